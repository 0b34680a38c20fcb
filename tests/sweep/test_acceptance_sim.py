"""Issue 5's acceptance test on the simulated engine, through the real CLI and runner:
`--max-num-seqs` over 3 values plus one config that cannot start; the sweep is killed (SIGKILL)
after two cells and `--resume` finishes only the missing ones. More preemptions at the largest
value; the failed config is recorded with its reason; no engine outlives the killed sweep."""

import json
import signal
import subprocess
import sys

import pytest
import yaml
from waiting import wait_until

from harness.sweep.launcher import group_alive

from .conftest import DATA

SWEEP = {
    "name": "acceptance",
    "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
    "base": {"sim-speed": 20, "max-model-len": 512, "block-size": 16, "num-gpu-blocks-override": 100},
    "vary": {
        "flags": {"max-num-seqs": [4, 8, 16], "num-gpu-blocks-override": [8]},  # 8 x 16 < 512: cannot start
        "include_base": False,
        "link": {"load.concurrency": "max-num-seqs"},
    },
    "scenarios": ["pressure.yaml"],
}


def harness(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "sweep", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def complete_cells(out):
    try:
        cells = json.loads((out / "index.json").read_text())["cells"]
    except (OSError, ValueError):
        return []
    return [c for c in cells if c["status"] == "complete"]


@pytest.mark.slow  # ~11 CPU-s of the fast suite; cheaper: tests/sweep/test_execute.py (resume after a kill runs
# only missing cells; a failed start is recorded with its reason) and a real `harness sweep` on the
# simulator in tests/sweep/test_flags.py and test_replicas_sim.py
def test_sim_sweep_kill_and_resume(tmp_path):
    pytest.importorskip("harness.sim.server")
    (tmp_path / "pressure.yaml").write_text((DATA / "pressure.yaml").read_text())
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    out = tmp_path / "out"

    first = harness(str(sweep), "--out", str(out), "--no-report")
    wait_until(lambda: len(complete_cells(out)) >= 2 or first.poll() is not None, "two finished cells", timeout_s=180)
    engine = json.loads((out / "engine.json").read_text()) if (out / "engine.json").exists() else None
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    kept = {c["id"]: c["finished"] for c in complete_cells(out)}
    assert len(kept) >= 2, (out / "index.json").read_text()
    if engine:  # the engine of the killed sweep goes too (parent-death signal / resume cleanup)
        wait_until(lambda: not group_alive(engine["pgid"]), "the killed sweep's engine to go")

    second = harness(str(sweep), "--resume", str(out), "--no-report")
    text, _ = second.communicate(timeout=120)
    assert second.returncode == 0, text
    assert f"resume: {len(kept)} finished cell(s) kept, {4 - len(kept)} to run" in text
    assert text.count("▶ start") == 4 - len(kept)

    index = json.loads((out / "index.json").read_text())
    cells = {c["config_id"]: c for c in index["cells"]}
    assert list(cells) == ["max-num-seqs=4", "max-num-seqs=8", "max-num-seqs=16", "num-gpu-blocks-override=8"]
    for cid, finished in kept.items():  # finished cells were not run again
        assert next(c for c in index["cells"] if c["id"] == cid)["finished"] == finished
    for n in (4, 8, 16):
        c = cells[f"max-num-seqs={n}"]
        assert c["status"] == "complete", c
        assert c["startup_facts"]["kv_cache_tokens"] == 1600
        assert (out / c["run_dir"] / "summary.json").is_file()
    pre = {n: cells[f"max-num-seqs={n}"]["metrics"]["preemptions"] for n in (4, 8, 16)}
    assert pre[16] > pre[4] and pre[16] >= pre[8], pre
    bad = cells["num-gpu-blocks-override=8"]
    assert bad["status"] == "failed"
    assert bad["reason"].startswith(
        "engine exited with code 1 before it was ready: ValueError: To serve at least one request"
    )
    assert bad["log_tail"]
    rows = (out / "summary.csv").read_text().splitlines()
    assert len(rows) == 5
    # closing table: the failed config is listed last with its reason
    assert "num-gpu-blocks-override=8" in text and "failed: engine exited with code 1" in text
    assert not (out / "engine.json").exists()


def test_sigterm_stops_the_engine_and_keeps_finished_cells(tmp_path):
    pytest.importorskip("harness.sim.server")
    (tmp_path / "pressure.yaml").write_text((DATA / "pressure.yaml").read_text())
    data = {
        **SWEEP,
        "vary": {"flags": {"max-num-seqs": [4, 8]}, "include_base": False},
        "repeats": 3,
        "overrides": {"load.requests": 200},
    }
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    log = open(tmp_path / "harness.out", "w")
    # output to a file, not a pipe: a load process the runner started keeps its own copy
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--out", str(out), "--no-report"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_until(lambda: complete_cells(out) or proc.poll() is not None, "a finished cell", timeout_s=120)
    if proc.poll() is not None:
        log.close()
        pytest.fail(
            f"the sweep ended (exit {proc.returncode}) before the signal:\n{(tmp_path / 'harness.out').read_text()[-3000:]}"
        )
    done_before = {c["id"] for c in complete_cells(out)}  # finished when the signal is sent
    engine = json.loads((out / "engine.json").read_text())
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        proc.kill()
        log.close()
    text = (tmp_path / "harness.out").read_text()
    assert proc.returncode == 130, text
    assert "--resume" in text
    assert not group_alive(engine["pgid"])
    assert not (out / "engine.json").exists()
    cells = json.loads((out / "index.json").read_text())["cells"]
    why = f"{[(c['id'], c['status'], c.get('reason')) for c in cells]}\n{text[-3000:]}"
    # the cells finished before the signal are kept as they were
    assert done_before and all(c["status"] == "complete" for c in cells if c["id"] in done_before), why
    # the cell in flight (if the signal came during one) is partial and says why; nothing after it ran
    # (one may have finished between reading the index and the signal's arrival)
    cut = [c for c in cells if c["id"] not in done_before and c["status"] != "complete"]
    assert len(cut) <= 1 and all(c["status"] == "partial" and "SIGTERM" in c["reason"] for c in cut), why
