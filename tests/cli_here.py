"""`harness ARGS` in the test process, for a command that fails on its flags or input before it
starts anything, or prints help: the same exit code and console lines as `python -m
harness.cli.main ARGS`, without a fresh interpreter importing the harness (~0.5-0.8 CPU-s each on
the 2-core box). What a command does once running, and that a real process prints no traceback,
stays with the subprocess helpers of each test module."""

from __future__ import annotations

import signal
import subprocess

import pytest


def harness_here(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    from harness.cli.main import main

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as exc:  # argparse: --help (0), a usage error (2)
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for sig, handler in handlers.items():  # `run` installs its SIGTERM/SIGHUP stop
            signal.signal(sig, handler)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), rc, out.out, out.err)
