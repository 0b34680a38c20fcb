"""Sweep console: a live line inside each cell, an ETA that counts down instead of being revised
upward, the report's validity warnings on the console, labelled numbers, the signal that stopped it."""

from __future__ import annotations

import io
import json

import harness.sweep.progress as progress_mod
from harness.cli.main import main
from harness.results.models import RunSummary, dumps
from harness.results.models.facts import StartupFacts
from harness.results.models.summary import RequestsBlock
from harness.results.models.sweep import Cell
from harness.sweep.execute import STOP, SweepOptions, run_sweep
from harness.sweep.plan import build_plan
from harness.sweep.progress import Progress, result_line

from .conftest import fake_engine_command


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_eta_is_a_lower_bound_then_counts_down(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_mod.time, "monotonic", clock)
    out = io.StringIO()
    p = Progress(3, 3, stream=out)
    p.planned = {"a": 10.0, "b": 10.0, "c": 10.0}
    etas = []
    for i, cid in enumerate("abc"):
        p.engine_starting(f"cfg{i}", {}, ["engine"], 1)
        clock.t += 2  # engine start
        p.engine_ready(2.0, StartupFacts())
        p.cell_starting(cid, "tiny", 1)
        etas.append(p.eta_text())
        for _ in range(3):  # each cell takes 30 s of wall time for 10 s of planned load
            clock.t += 10
            etas.append(p.eta_text())
        p.cell_done(Cell(id=cid, config_id=f"cfg{i}", scenario="tiny", repeat=1, status="complete"), 30.0)
    assert etas[0].startswith("ETA ≥") and all("≥" not in e for e in etas[4:])
    seconds = [p_ for p_ in (_secs(e) for e in etas[4:])]
    assert seconds == sorted(seconds, reverse=True), etas  # never revised upward once measured
    assert seconds[0] == 64  # 20 planned s left at 32 wall s per 10 planned s
    assert "ETA ≥" in out.getvalue()


def _secs(text: str) -> int:
    value = text.removeprefix("ETA ").lstrip("≥")
    if "m" in value:
        m, s = value.rstrip("s").split("m")
        return int(m) * 60 + int(s)
    return int(value.rstrip("s"))


def test_cell_progress_lines_off_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(1, 1, stream=out)
    p.live_interval_s = 0.0
    p.planned = {"a": 5.0}
    p.cell_progress("ignored before a cell starts")
    p.cell_starting("a", "tiny", 1)
    p.cell_progress("   3.0s/5s (ETA 2s)  req 4  in-flight 2")
    text = out.getvalue()
    assert "ignored" not in text and "    3.0s/5s (ETA 2s)  req 4  in-flight 2  · sweep ETA" in text


def test_result_line_labels_every_number() -> None:
    line = result_line(
        Cell.model_validate(
            {
                "id": "c__s__r1",
                "config_id": "c",
                "scenario": "s",
                "repeat": 1,
                "status": "complete",
                "metrics": {"goodput_req_per_s": 0.86, "req_per_s": 0.86, "output_tok_per_s": 405},
            }
        )
    )
    assert "goodput 0.86 req/s · throughput 0.86 req/s · 405 tok/s" in line


class WarningRun:
    """Stands in for run_scenario: reports progress through the sink and writes a warning."""

    def __call__(self, scenario, opts):
        opts.progress_sink("   1.0s/2s (ETA 1s)  req 3/12  in-flight 4")
        summary = RunSummary(
            status="complete",
            requests=RequestsBlock(completed=12, rps=4.0),
            goodput={"overall": {"good": 12, "rps": 4.0, "fraction": 1.0}},
            validity={"ok": False, "warnings": ["host stalled 3 time(s) in the window"]},
        )
        opts.out_dir.mkdir(parents=True, exist_ok=True)
        (opts.out_dir / "summary.json").write_text(dumps(summary))
        return summary


def _sweep(write_sweep):
    return write_sweep(
        {
            "name": "fake",
            "engine": {"kind": "vllm", "command": fake_engine_command(), "ready_timeout_s": 20, "stop_timeout_s": 5},
            "vary": {"flags": {"max-num-seqs": [2]}, "include_base": False},
        }
    )


def test_cli_sweep_shows_cell_progress_and_validity_warnings(write_sweep, tmp_path, monkeypatch, capsys) -> None:
    import harness.run.lifecycle

    monkeypatch.setattr(harness.run.lifecycle, "run_scenario", WarningRun())
    monkeypatch.setattr(Progress, "live_interval_s", 0.0, raising=False)
    orig = Progress.__init__

    def init(self, *a, **kw):
        orig(self, *a, **kw)
        self.live_interval_s = 0.0

    monkeypatch.setattr(Progress, "__init__", init)
    out = tmp_path / "out"
    assert main(["sweep", str(_sweep(write_sweep)), "--out", str(out), "--no-report"]) == 0
    captured = capsys.readouterr()
    assert "req 3/12  in-flight 4  · sweep ETA" in captured.err
    assert "validity warnings (read these before the numbers" in captured.out
    assert "  WARNING: max-num-seqs=2 × tiny (repeat 1): host stalled 3 time(s) in the window" in captured.out


def test_sigterm_is_named_in_the_cell_reason(write_sweep, tmp_path) -> None:
    def stopped(scenario, opts):
        STOP.request("SIGTERM")
        raise KeyboardInterrupt

    try:
        outcome = run_sweep(
            build_plan(_sweep(write_sweep)), SweepOptions(out_dir=tmp_path / "o", run_fn=stopped, show_progress=False)
        )
    finally:
        STOP.requested = False
    assert outcome.interrupted
    (entry,) = json.loads((tmp_path / "o" / "index.json").read_text())["cells"]
    assert entry["reason"] == "interrupted (SIGTERM)"


def test_every_cell_failed_exits_1_and_strict_any_failed(write_sweep, tmp_path, monkeypatch, capsys) -> None:
    import harness.run.lifecycle
    from harness.errors import UserError

    def broken(scenario, opts):
        raise UserError("target refused every request")

    monkeypatch.setattr(harness.run.lifecycle, "run_scenario", broken)
    assert main(["sweep", str(_sweep(write_sweep)), "--out", str(tmp_path / "a"), "--no-report"]) == 1
    captured = capsys.readouterr()
    assert "error: every cell failed (1)" in captured.err
    # the real error comes first, and nothing speaks of a ranking there is not (audit N13)
    assert "error: every cell failed (1); nothing was measured: target refused every request" in captured.err
    assert "no goodput in the results" not in captured.out + captured.err
    assert "nothing to rank: no config produced results" in captured.out and "configs ranked by" not in captured.out
    monkeypatch.setattr(harness.run.lifecycle, "run_scenario", WarningRun())
    assert main(["sweep", str(_sweep(write_sweep)), "--out", str(tmp_path / "b"), "--no-report", "--strict"]) == 0
