"""The stall meter: which stalls fall inside a window (hand-made stall lists), and a real run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from waiting import wait_until

from harness.metrics.stall_meter import StallMeter

# a parent that starts the meter process as the web UI's run does, says its pid, and waits
PARENT = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from harness.metrics.stall_meter import StallMeterProcess\n"
    "meter = StallMeterProcess(Path(sys.argv[1])).start()\n"
    "print(meter.proc.pid, flush=True)\n"
    "time.sleep(3600)\n"
)


def test_window_filter_on_hand_made_stalls() -> None:
    m = StallMeter(threshold_ms=20)
    # (wall time the stall ended, stall length ms)
    m.stalls = [(100.0, 30.0), (105.0, 500.0), (110.2, 400.0), (120.0, 50.0)]
    s = m.summary(window_start=104.0, window_end=110.0)
    # 105.0 ends inside; 110.2 started at 109.8 (inside); 100.0 and 120.0 are outside
    assert s["stalls_in_window"] == 2 and s["max_stall_ms"] == 500.0
    assert s["stall_times"] == [105.0, 110.2]
    assert m.summary()["stalls_in_window"] == 4
    assert s["threshold_ms"] == 20.0


def test_runs_and_stops() -> None:
    m = StallMeter(interval_s=0.001).start()
    wait_until(lambda: m.hist.count > 0, "the meter's first wake-up")
    m.stop()
    assert not m._thread.is_alive()
    assert m.hist.count > 0  # it woke up and recorded lateness
    n = m.hist.count
    time.sleep(0.01)  # not a wait for anything: ten of its intervals, in which a wake-up would show
    assert m.hist.count == n  # and stopped


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (an exited one nobody reaped yet is a zombie: not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_the_meter_process_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """It runs in its own session, so no signal reaches it when its parent dies: it watches its
    parent (an orphaned meter outlived its web UI test by 2 h)."""
    out = tmp_path / "stalls.json"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(out)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    meter_pid = int(parent.stdout.readline())
    try:
        assert _running(meter_pid)
        parent.kill()  # SIGKILL: no handler runs, nothing stops the meter for it
        parent.wait()
        wait_until(lambda: not _running(meter_pid), "the stall meter to exit after its parent was killed")
        assert not out.exists()  # nobody will read it: nothing written
    finally:
        parent.kill()
        parent.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(meter_pid, signal.SIGKILL)
