"""The decision rules on the simulated engine, through the real CLI: a default-on feature off in
`base` (CUDA graphs) is turned on by the guide's prior; a tune without any SLO says goodput is
plain throughput and decides prefix caching on TTFT; a candidate whose engine cannot start
fails the step (exit 1) and is measured again on --resume; a memory fraction that starts the
engine and then fails its run is reported as a failed run, not a failed start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.tune.test_cases_sim import TUNE, finish, tune

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SIM = {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10}
FAST = {"sim-hbm-tbps": 0.3, "sim-tflops": 80, "sim-speed": 4}


def write(tmp_path: Path, doc: dict, scenario: dict | None = None) -> Path:
    if scenario is not None:
        (tmp_path / "w.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
        doc = {**doc, "workload": ["w.yaml"]}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(path: Path, out: Path, *extra: str) -> tuple[int, dict, str]:
    proc = tune(str(path), *extra, *(() if "--resume" in extra else ("--out", str(out))))
    text = finish(proc)
    return proc.returncode, json.loads((out / "tune.json").read_text()), text


def by_step(doc: dict) -> dict:
    return {s["step"]: s for s in doc["steps"]}


def test_eager_in_base_is_turned_to_graphs_by_the_prior(tmp_path):
    doc = {
        "name": "eager",
        "engine": SIM,
        "base": {**FAST, "enforce-eager": True},
        "workload": [str(TUNE / "short_chat.yaml")],
        "load": {"concurrency": 8},
        "steps": ["baseline", "cuda-graphs", "final"],
        "measure": {"duration_s": 6, "warmup_s": 1},
    }
    rc, out, text = run(write(tmp_path, doc), tmp_path / "out")
    assert rc == 0, text[-3000:]
    s = by_step(out)["cuda-graphs"]
    assert s["verdict"] == "changed", s["reason"]
    assert "the side the guides keep" in s["reason"] and "TPOT p50" in s["reason"] and "startup" in s["reason"]
    # graphs on = the switch removed: absent, or None (removed from the engine's own command line)
    assert out["final"]["flags"].get("enforce-eager") is None
    assert "--enforce-eager" not in out["final"]["command"]


def test_a_tune_without_slos_judges_prefix_caching_on_ttft(tmp_path):
    scen = yaml.safe_load((TUNE / "shared_system_prompt.yaml").read_text())
    scen.pop("slo", None)
    for c in scen["workload"]["classes"]:
        c.pop("slo", None)
    doc = {
        "name": "no-slo",
        "engine": SIM,
        "base": {**FAST, "enable-prefix-caching": False},
        "load": {"concurrency": 8},
        "steps": ["context-length", "baseline", "cache-check", "final"],
        "measure": {"duration_s": 6, "warmup_s": 1},
    }
    rc, out, text = run(write(tmp_path, doc, scen), tmp_path / "out")
    assert rc == 0, text[-3000:]
    steps = by_step(out)
    assert "no SLO in the tune file or the scenarios: goodput is plain throughput" in steps["baseline"]["reason"]
    cc = steps["cache-check"]
    assert cc["verdict"] == "changed", cc["reason"]
    assert (
        "requests/s" in cc["reason"]
        and "TTFT p50" in cc["reason"]
        and "goodput" not in cc["reason"].split("Turned on")[0]
    )
    # said in the step's own reason, once: the guard is requests/s and TTFT decided, not a limit
    assert cc["reason"].count("No SLO in the tune file or the scenarios: goodput is plain throughput") == 1
    assert "TTFT p50" in cc["reason"] and "beyond noise" in cc["reason"]


def test_a_candidate_that_cannot_start_fails_the_step_and_resume_retries_it(tmp_path):
    doc = {
        "name": "dead",
        "engine": SIM,
        "base": dict(FAST),
        "workload": [str(TUNE / "short_chat.yaml")],
        "load": {"concurrency": 4},
        "steps": ["baseline", "max-num-seqs", "final"],
        "candidates": {"max-num-seqs": [-1]},
        "measure": {"duration_s": 4, "warmup_s": 1},
    }
    path = write(tmp_path, doc)
    rc, out, text = run(path, tmp_path / "out")
    assert rc == 1, text[-3000:]
    s = by_step(out)["max-num-seqs"]
    assert s["verdict"] == "failed" and "max-num-seqs=-1: the engine did not start" in s["reason"], s["reason"]
    assert "must be >= 1" in s["reason"]  # the engine's own error
    assert "--resume" in s["reason"] and out["final"]["flags"].get("max-num-seqs") is None
    starts = out["cost"]["engine_starts"]
    rc2, again, _text2 = run(path, tmp_path / "out", "--resume", str(tmp_path / "out"))
    assert rc2 == 1 and by_step(again)["max-num-seqs"]["verdict"] == "failed"
    assert again["cost"]["engine_starts"] > starts  # the failed candidate was started again, not read back


def test_a_fraction_that_starts_then_fails_its_run_is_not_a_failed_start(tmp_path):
    doc = {
        "name": "crash",
        "engine": SIM,
        "base": {**FAST, "fault-crash-after-s": 3},
        "workload": [str(TUNE / "short_chat.yaml")],
        "load": {"concurrency": 4},
        "steps": ["context-length", "gpu-memory", "baseline", "final"],
        "measure": {"duration_s": 6, "warmup_s": 1},
    }
    rc, out, text = run(write(tmp_path, doc), tmp_path / "out")
    assert rc == 1, text[-3000:]
    g = by_step(out)["gpu-memory"]
    assert g["verdict"] == "failed" and "a failed run, not a failed start" in g["reason"], g["reason"]
    assert "no fraction starts the engine" not in g["reason"]
    assert "died during the run" in g["reason"] or "started but the run failed" in g["reason"]


def test_winning_budgets_are_weighed_on_itl_and_ttft_as_compare_reads_them(tmp_path):
    """Guide 001 1.1 'measure both': when 2048 and 512 both beat the stalling 8192, the step takes
    the smaller only if it is better beyond noise on ITL p99 or TPOT p50 and no worse on TTFT,
    goodput or failures, exactly as `harness compare 2048-CELLS 512-CELLS` reads them (the H200
    tune once took 2048 at ITL p99 51.4 ms over 512 at 17.4 ms as 'the largest')."""
    import subprocess
    import sys

    doc = {
        "name": "budget-pick",
        "engine": SIM,
        "base": {
            "sim-gpu-memory-gib": 40,
            "sim-hbm-tbps": 0.3,
            "sim-tflops": 120,
            "sim-speed": 4,
            "max-num-seqs": 64,
            "max-num-batched-tokens": 8192,
        },
        "workload": [str(TUNE / "docs_and_chat.yaml")],
        "load": {"concurrency": 16},
        "steps": ["baseline", "max-num-batched-tokens"],
        "candidates": {"max-num-batched-tokens": [2048, 512]},
        "measure": {"duration_s": 8, "warmup_s": 1},
    }
    out = tmp_path / "out"
    rc, res, text = run(write(tmp_path, doc), out)
    assert rc == 0, text[-3000:]
    s = by_step(res)["max-num-batched-tokens"]
    assert s["verdict"] == "changed", s["reason"]
    winners = [
        t["flags"]["max-num-batched-tokens"]
        for t in s["tried"]
        if (t.get("vs_current") or {}).get("verdict") == "better"
    ]
    if sorted(winners) != [512, 2048]:
        pytest.skip(f"this run did not make both budgets win against 8192 (winners {winners}): nothing to weigh")
    assert "Among the budgets that win" in s["reason"] and "512 vs 2048" in s["reason"]
    chosen = res["final"]["flags"]["max-num-batched-tokens"]

    def cells(v: int) -> str:  # every run of that budget in this step, repeats bought to decide included
        return ",".join(
            str(p)
            for p in sorted(out.glob(f"steps/*max-num-batched-tokens*/runs/max-num-batched-tokens={v}__*"))
            if (p / "summary.json").is_file()
        )

    cmp = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "compare", cells(2048), cells(512), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert cmp.returncode in (0, 1), cmp.stderr
    rows = {r["key"]: r["verdict"] for r in json.loads(cmp.stdout)["pairs"][0]["rows"]}
    gain = any(rows.get(k) == "improved" for k in ("itl.p99", "tpot.p50"))
    harm = [
        k
        for k in ("itl.p99", "tpot.p50", "ttft.p50", "ttft.p99", "goodput_rps", "error_rate")
        if rows.get(k) == "REGRESSION"
    ]
    assert chosen == (512 if gain and not harm else 2048), (chosen, rows, s["reason"])
    assert s["reason"].rstrip(".").endswith(f"{chosen} holds")


def test_when_every_start_crashes_no_unmeasured_length_is_changed_or_recommended(tmp_path):
    """Audit R17: every start crashes (a bad flag in `base`): context-length once said CHANGED and
    recommended.yaml carried the max-model-len no engine ever ran with."""
    doc = {
        "name": "all-crash",
        "engine": SIM,
        "base": {**FAST, "max-num-seqs": -1},
        "workload": [str(TUNE / "short_chat.yaml")],
        "load": {"concurrency": 4},
        "steps": ["context-length", "gpu-memory", "baseline", "final"],
        "measure": {"duration_s": 4, "warmup_s": 1},
    }
    rc, out, text = run(write(tmp_path, doc), tmp_path / "out")
    assert rc == 1, text[-3000:]
    steps = by_step(out)
    cl = steps["context-length"]
    assert cl["verdict"] != "changed" and "not measured yet" in cl["reason"] and "must be >= 1" in cl["reason"], cl[
        "reason"
    ]
    assert steps["gpu-memory"]["verdict"] == "failed" and steps["final"]["verdict"] == "skipped"
    assert "max-model-len" not in out["final"]["flags"] and out["final"]["flags"] == doc["base"]
    rec = (tmp_path / "out" / "recommended.yaml").read_text()
    assert "max-model-len" not in yaml.safe_load(rec)["base"] and "no engine started with the tuned flags" in rec
    assert "note: no engine started with the tuned flags" in text
