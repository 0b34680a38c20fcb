"""The executor against the fake engine with a stand-in for run_scenario: failed starts are
recorded and the sweep goes on, index.json/summary.csv after every cell, resume after a kill,
an engine dying mid-run, prefix-cache resets between cells."""

import csv
import json
import os

from harness.cli.main import main
from harness.engines.parts.http import http_status
from harness.results.models import RunSummary, dumps
from harness.results.models.summary import RequestsBlock
from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.plan import build_plan

from .conftest import fake_engine_command

INDEX_KEYS = {
    "id",
    "config_id",
    "flags",
    "scenario",
    "repeat",
    "status",
    "run_dir",
    "startup_s",
    "startup_facts",
    "reason",
}


class FakeRun:
    """Stands in for harness.run.lifecycle.run_scenario: one request to the target, a summary.json."""

    def __init__(self, interrupt_at=None):
        self.calls = []
        self.interrupt_at = interrupt_at

    def __call__(self, scenario, opts):
        self.calls.append((scenario, opts))
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        status, _ = http_status(opts.target_url + "/v1/completions", "POST")
        ok = status == 200
        resets = json.loads(http_status(opts.target_url + "/resets")[1]).get("resets") if ok else None
        summary = RunSummary(
            status="complete" if ok else "partial",
            requests=RequestsBlock(
                completed=1 if ok else 0, failed=0 if ok else 1, rps=float(scenario.load.concurrency or 1)
            ),
            goodput={"overall": {"good": 1, "rps": float(scenario.load.concurrency or 1), "fraction": 1.0}},
            engine={"preemptions": {"count": scenario.load.concurrency}, "kv_usage": {"max": 0.5}},
            target={"labels": {"resets_seen": str(resets)}},  # the prefix-cache resets the engine had seen
        )
        opts.out_dir.mkdir(parents=True, exist_ok=True)
        (opts.out_dir / "summary.json").write_text(dumps(summary))
        return summary


def sweep_file(write_sweep, **extra):
    data = {
        "name": "fake",
        "engine": {"kind": "vllm", "command": fake_engine_command(), "ready_timeout_s": 20, "stop_timeout_s": 5},
        "base": {"max-model-len": 256},
        "vary": {
            "flags": {"max-num-seqs": [2, 4, 8], "num-gpu-blocks-override": [1]},
            "include_base": False,
            "link": {"load.concurrency": "max-num-seqs"},
        },
        "repeats": 2,
    }
    data.update(extra)
    return write_sweep(data)


def read_index(out):
    return json.loads((out / "index.json").read_text())


def test_sweep_runs_to_the_end_and_records_a_failed_start(write_sweep, tmp_path):
    plan = build_plan(sweep_file(write_sweep))
    out = tmp_path / "out"
    run = FakeRun()
    outcome = run_sweep(plan, SweepOptions(out_dir=out, run_fn=run, show_progress=False))
    assert outcome.counts == {"complete": 6, "partial": 0, "failed": 2, "not run": 0}
    index = read_index(out)
    assert index["sweep"] == "fake"
    cells = {c["id"]: c for c in index["cells"]}
    assert list(cells) == [c.id for c in plan.cells]
    for c in cells.values():
        assert set(c) >= INDEX_KEYS
    ok = cells["max-num-seqs=8__tiny__r2"]
    assert ok["status"] == "complete" and ok["reason"] is None
    assert ok["flags"] == {"max-model-len": 256, "max-num-seqs": 8}
    assert ok["startup_s"] > 0 and ok["startup_facts"]["kv_cache_tokens"] == 4096 * 16
    assert ok["metrics"]["preemptions"] == 8 and ok["metrics"]["kv_usage_max"] == 0.5
    assert (out / ok["run_dir"] / "summary.json").is_file()
    bad = cells["num-gpu-blocks-override=1__tiny__r1"]
    assert bad["status"] == "failed"
    assert bad["reason"].startswith(
        "engine exited with code 1 before it was ready: ValueError: To serve at least one request"
    )
    assert any("Engine core initialization failed" in line for line in bad["log_tail"])
    assert bad["startup_s"] is None and 0 < bad["failed_after_s"] < 20
    assert (out / "logs" / "num-gpu-blocks-override=1.log").is_file()
    # linked concurrency, labels and the engine hint reach the run
    scen, opts = run.calls[-1]
    assert scen.load.concurrency == 8
    assert opts.labels["config"] == "max-num-seqs=8" and opts.engine_kind == "vllm" and not opts.write_report
    # the prefix cache was reset before the second cell of each config, not the first
    assert next(c["metrics"] for c in index["cells"])["completed"] == 1
    assert [
        json.loads((out / c["run_dir"] / "summary.json").read_text())["target"]["labels"]["resets_seen"]
        for c in index["cells"]
        if c["status"] == "complete"
    ] == ["0", "1", "0", "1", "0", "1"]
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 8 and rows[0]["config_id"] == "max-num-seqs=2" and rows[0]["kv_cache_tokens"] == "65536"
    assert rows[-1]["status"] == "failed" and rows[-1]["reason"].startswith("engine exited with code 1")
    # ranking: by goodput, failed config last with its reason
    lines = outcome.table.splitlines()
    assert lines[0].startswith("scenario tiny:")
    assert lines[2].split()[:2] == ["1", "max-num-seqs=8"]
    assert any("num-gpu-blocks-override=1" in line and "failed: engine exited with code 1" in line for line in lines)
    # the engine facts of each config that started close the table
    assert "engine startup facts (from each config's log)" in lines and "  max-num-seqs=8: max_model_len 256" in lines
    assert (out / "sweep.yaml").is_file()


def test_resume_after_a_kill_runs_only_missing_cells(write_sweep, tmp_path):
    plan = build_plan(sweep_file(write_sweep))
    out = tmp_path / "out"
    first = FakeRun(interrupt_at=4)  # Ctrl-C during the 4th measured cell (config 2, repeat 2)
    outcome = run_sweep(plan, SweepOptions(out_dir=out, run_fn=first, show_progress=False))
    assert outcome.interrupted
    statuses = {c["id"]: c["status"] for c in read_index(out)["cells"]}
    assert statuses == {
        "max-num-seqs=2__tiny__r1": "complete",
        "max-num-seqs=2__tiny__r2": "complete",
        "max-num-seqs=4__tiny__r1": "complete",
        "max-num-seqs=4__tiny__r2": "partial",
    }
    # the engine of the interrupted config is gone (nothing of ours keeps its port)
    second = FakeRun()
    outcome = run_sweep(
        build_plan(plan.source), SweepOptions(out_dir=out, run_fn=second, resume=True, show_progress=False)
    )
    assert [o.labels["config"] + "/" + o.labels["repeat"] for _, o in second.calls] == [
        "max-num-seqs=4/2",
        "max-num-seqs=8/1",
        "max-num-seqs=8/2",
    ]
    assert outcome.counts == {"complete": 6, "partial": 0, "failed": 2, "not run": 0}
    # a second resume has nothing left but the failed config, which is tried again
    third = FakeRun()
    run_sweep(build_plan(plan.source), SweepOptions(out_dir=out, run_fn=third, resume=True, show_progress=False))
    assert third.calls == []


def test_engine_dies_mid_run(write_sweep, tmp_path):
    path = sweep_file(
        write_sweep,
        vary={"flags": {"die-after-requests": [1]}, "include_base": True},
        base={"max-model-len": 256, "die-after-requests": 0},
    )
    plan = build_plan(path)
    out = tmp_path / "out"
    run_sweep(plan, SweepOptions(out_dir=out, run_fn=FakeRun(), show_progress=False))
    cells = {c["id"]: c for c in read_index(out)["cells"]}
    assert cells["base__tiny__r1"]["status"] == "complete"
    died = cells["die-after-requests=1__tiny__r1"]
    assert died["status"] == "partial"  # its summary.json was written, the engine died under it
    assert died["reason"].startswith("engine exited with code 3 during the run: RuntimeError: simulated engine crash")
    after = cells["die-after-requests=1__tiny__r2"]
    assert after["status"] == "failed" and "during cell die-after-requests=1__tiny__r1" in after["reason"]


def test_cli_out_resume_and_progress(write_sweep, tmp_path, monkeypatch, capsys):
    import harness.run.lifecycle

    monkeypatch.setattr(harness.run.lifecycle, "run_scenario", FakeRun())
    path = sweep_file(write_sweep, vary={"flags": {"max-num-seqs": [2]}, "include_base": False}, repeats=1)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "▶ start 1/1: config max-num-seqs=2" in captured.err
    assert "✓ [1/1] max-num-seqs=2 · tiny r1: complete · goodput 4.00 req/s" in captured.err
    assert "sweep finished in" in captured.err
    assert "scenario tiny: configs ranked by goodput" in captured.out
    assert main(["sweep", str(path), "--out", str(out)]) == 2  # not empty
    assert "not empty" in capsys.readouterr().err
    assert main(["sweep", str(path), "--resume", str(out)]) == 0
    assert "resume: 1 finished cell(s) kept, 0 to run" in capsys.readouterr().err
    assert main(["sweep", str(path), "--resume", str(tmp_path / "nowhere")]) == 2


def test_fixed_port_busy_is_a_failed_start(write_sweep, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        path = sweep_file(write_sweep, vary={"flags": {"max-num-seqs": [2]}, "include_base": False}, repeats=1)
        plan = build_plan(path)
        plan.sweep.engine.port = port
        out = tmp_path / "out"
        run_sweep(plan, SweepOptions(out_dir=out, run_fn=FakeRun(), show_progress=False, port_free_timeout_s=0.3))
        cell = read_index(out)["cells"][0]
        assert cell["status"] == "failed" and cell["reason"].startswith(f"port {port} is still in use")
    finally:
        s.close()


def test_index_writes_are_atomic(write_sweep, tmp_path, monkeypatch):
    """Every write goes through a temporary file and os.replace."""
    replaced = []
    real = os.replace

    def spy(src, dst):
        replaced.append(os.path.basename(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = sweep_file(write_sweep, vary={"flags": {"max-num-seqs": [2]}, "include_base": False}, repeats=2)
    run_sweep(build_plan(path), SweepOptions(out_dir=tmp_path / "o", run_fn=FakeRun(), show_progress=False))
    assert replaced.count("index.json") >= 3 and replaced.count("summary.csv") >= 3
    assert not [p for p in (tmp_path / "o").iterdir() if ".tmp" in p.name]


def test_cold_start_and_sweep_warmup(write_sweep, tmp_path):
    path = sweep_file(
        write_sweep,
        vary={"flags": {"max-num-seqs": [2]}, "include_base": False},
        repeats=3,
        cold_start=True,
        warmup={"requests": 5},
    )
    run = FakeRun()
    out = tmp_path / "out"
    run_sweep(build_plan(path), SweepOptions(out_dir=out, run_fn=run, show_progress=False))
    log = (out / "logs" / "max-num-seqs=2.log").read_text()
    assert log.count("===== harness sweep") == 3  # a fresh engine per cell, one log per config
    assert [s.warmup.requests for s, _ in run.calls] == [5, 5, 5]  # each cell is the first after a start
    cells = read_index(out)["cells"]
    assert len({c["port"] for c in cells}) == 3
    # no reset needed: every cell starts on a fresh engine
    assert [
        json.loads((out / c["run_dir"] / "summary.json").read_text())["target"]["labels"]["resets_seen"] for c in cells
    ] == ["0", "0", "0"]


def test_sweep_warmup_only_after_a_start(write_sweep, tmp_path):
    path = sweep_file(
        write_sweep, vary={"flags": {"max-num-seqs": [2]}, "include_base": False}, repeats=3, warmup={"duration_s": 2}
    )
    run = FakeRun()
    run_sweep(build_plan(path), SweepOptions(out_dir=tmp_path / "out", run_fn=run, show_progress=False))
    assert [s.warmup.duration_s for s, _ in run.calls] == [2, 0, 0]


def test_a_harness_error_in_one_config_does_not_end_the_sweep(write_sweep, tmp_path, monkeypatch):
    from harness.sweep import execute

    path = sweep_file(write_sweep, vary={"flags": {"max-num-seqs": [2, 4]}, "include_base": False}, repeats=1)
    real = execute.SweepExecutor._run_start

    def flaky(self, config, cells):
        if config.id == "max-num-seqs=2":
            raise RuntimeError("bug")
        return real(self, config, cells)

    monkeypatch.setattr(execute.SweepExecutor, "_run_start", flaky)
    out = tmp_path / "out"
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, run_fn=FakeRun(), show_progress=False))
    cells = read_index(out)["cells"]
    assert [(c["config_id"], c["status"]) for c in cells] == [
        ("max-num-seqs=2", "failed"),
        ("max-num-seqs=4", "complete"),
    ]
    assert cells[0]["reason"] == "harness error: RuntimeError: bug"
    assert outcome.counts["complete"] == 1


def test_a_stop_the_run_turned_into_an_error_still_stops_the_sweep(write_sweep, tmp_path):
    """Ctrl-C/SIGTERM while the runner starts its load process can come back as a UserError;
    the sweep still stops (the CLI's handler set STOP) and keeps what finished."""
    from harness.errors import UserError
    from harness.sweep.execute import STOP

    class StopInSecondCell(FakeRun):
        def __call__(self, scenario, opts):
            if len(self.calls) == 1:
                self.calls.append((scenario, opts))
                STOP.request()
                raise UserError("the load process failed before measuring anything")
            return super().__call__(scenario, opts)

    path = sweep_file(write_sweep, vary={"flags": {"max-num-seqs": [2, 4]}, "include_base": False}, repeats=2)
    out = tmp_path / "out"
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, run_fn=StopInSecondCell(), show_progress=False))
    assert outcome.interrupted
    assert [(c["status"], c["reason"]) for c in read_index(out)["cells"]] == [
        ("complete", None),
        ("partial", "interrupted (Ctrl-C)"),
    ]
    STOP.requested = False
