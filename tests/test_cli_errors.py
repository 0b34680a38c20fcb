"""The CLI's last line of defence: an unexpected exception (a bug) is one line on stderr and exit
70, never a traceback; HARNESS_DEBUG=1 shows the traceback."""

import subprocess
import sys
from pathlib import Path

from waiting import wait_until

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


def test_ctrl_c_while_the_commands_load_is_one_line(monkeypatch, capsys):
    """Ctrl-C in the first moments of `harness run` (every command's module is being imported)
    printed a KeyboardInterrupt traceback: now `interrupted`, exit 130, like later."""
    import harness.cli.main as cli

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    try:
        code = cli.main(["run", "scenarios/smoke.yaml"])
    except KeyboardInterrupt:
        raise AssertionError("KeyboardInterrupt escaped main: the user sees a traceback") from None
    assert code == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_ctrl_c_while_the_load_process_starts_is_an_interruption_not_a_failure(tmp_path):
    """SIGINT once the load plan is written (the load process is still importing Locust): the run
    said `the load process failed before measuring anything` with exit 2 (a user error); now it is
    `interrupted`, exit 130, and the run directory keeps what was written."""
    import json
    import signal

    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "s",
                "load": {"concurrency": 2, "duration_s": 30},
                "workload": {"classes": [{"name": "a", "input_tokens": 16, "output_tokens": 8}]},
            }
        )
    )
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scenario),
            "--out",
            str(out),
            "--quiet",
            "--no-report",
            "--no-telemetry",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    wait_until(
        lambda: (out / "load_plan.json").exists() or proc.poll() is not None, "the load plan written", interval_s=0.005
    )
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "failed" not in err, err
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "interrupted", err
    assert (out / "scenario.yaml").exists() and (out / "load_plan.json").exists()


def test_a_full_disk_is_one_line_and_exit_1_not_an_internal_error():
    """Audit R14: a sweep or tune on a full disk ended `internal error: OSError: [Errno 28]`, exit 70."""
    code = (
        "import sys, errno; import harness.cli.report as r;"
        "r._run = lambda args: (_ for _ in ()).throw(OSError(errno.ENOSPC, 'No space left on device', 'out/tune.json'));"
        "from harness.cli.main import main; sys.exit(main(['report', '.']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: disk full: out/tune.json: No space left on device; what was written before is kept; free space, "
        "then continue a sweep, tune or startup benchmark with --resume DIR"
    ]
    # any other OSError that reaches the top is still a bug's one line
    code = code.replace("errno.ENOSPC", "errno.EIO")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 70 and "internal error: OSError" in proc.stderr
