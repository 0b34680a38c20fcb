"""The CLI's last line of defence: an unexpected exception (a bug) is one line on stderr and exit
70, never a traceback; HARNESS_DEBUG=1 shows the traceback."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout under test, first on sys.path

CODE = (
    "import sys; import harness.cli.report as r;"
    "r._run = lambda args: 1 / 0;"  # a bug inside a command
    "from harness.cli.main import main; sys.exit(main(['report', '.']))"
)


def _patched_report(tmp_path, env=None):
    return subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)


def test_internal_error_is_one_line_without_traceback(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "HARNESS_DEBUG"}
    proc = _patched_report(tmp_path, env)
    assert proc.returncode == 70, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: internal error: ZeroDivisionError: division by zero (a bug in harness; HARNESS_DEBUG=1 shows "
        "the traceback; results already written are kept)"
    ]


def test_harness_debug_shows_the_traceback(tmp_path):
    import os

    proc = _patched_report(tmp_path, {**os.environ, "HARNESS_DEBUG": "1"})
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "ZeroDivisionError" in proc.stderr
