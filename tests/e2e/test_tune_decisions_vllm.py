"""Tune's decisions on the real vLLM CPU build (slow): the token budget on a long-prompt mix is
decided on ITL and TTFT, and a separate `harness compare` of the same cells says the same thing
metric by metric (a decision `harness compare` would contradict is a bug)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]

ROOT = Path(__file__).resolve().parents[2]
TUNE = ROOT / "scenarios" / "tune"
JUDGED = ("ttft.p50", "ttft.p99", "itl.p50", "itl.p99", "tpot.p50", "rps", "error_rate")


def tune_file(real_vllm, tmp_path: Path, name: str, workload: str) -> Path:
    data = yaml.safe_load((TUNE / name).read_text())
    data["engine"].update(
        {"command": real_vllm.command(), "model": str(real_vllm.model), "cwd": str(ROOT), "env": real_vllm.env}
    )
    scen = yaml.safe_load((TUNE / workload).read_text())
    scen["workload"]["tokenizer"] = str(real_vllm.model)
    (tmp_path / workload).write_text(yaml.safe_dump(scen))
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def harness(*argv: str, baselines: Path, timeout: float = 2800) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BASELINES": str(baselines)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_dirs(out: Path, tried: dict) -> str:
    return ",".join(str(out / "steps" / c.split("/", 1)[0] / "runs" / c.split("/", 1)[1]) for c in tried["cells"])


def against(current: dict, cand: dict) -> dict:
    """The incumbent's cells the candidate was judged against (vs_current.against): a later
    comparison in the same step may have bought the incumbent more repeats than this one read."""
    cells = (cand.get("vs_current") or {}).get("against")
    return {"cells": cells} if cells else current


def test_token_budget_on_a_long_prompt_mix_agrees_with_harness_compare(real_vllm, tmp_path):
    out = tmp_path / "out"
    proc = harness(
        "tune",
        str(tune_file(real_vllm, tmp_path, "vllm_cpu_budget.yaml", "tiny_long_mix.yaml")),
        "--out",
        str(out),
        baselines=tmp_path / "baselines",
    )
    print(proc.stderr[-6000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "tune.json").read_text())
    step = next(s for s in doc["steps"] if s["step"] == "max-num-batched-tokens")
    print(json.dumps({"verdict": step["verdict"], "reason": step["reason"]}, indent=1))
    assert step["verdict"] in ("changed", "kept")
    assert "ITL p99" in step["reason"] and "TTFT p50" in step["reason"] and "interval" in step["reason"]
    assert "no SLO" in step["reason"] or "requests/s" in step["reason"]  # goodput is plain throughput here
    current, cand = (
        step["tried"][0],
        next(t for t in step["tried"][1:] if t["flags"].get("max-num-batched-tokens") == 512),
    )
    # the same cells through `harness compare` at the tune's threshold
    cmp = harness(
        "compare",
        run_dirs(out, against(current, cand)),
        run_dirs(out, cand),
        "--json",
        "--max-regression",
        "5%",
        baselines=tmp_path / "baselines",
    )
    assert cmp.returncode in (0, 1), cmp.stderr[-2000:]
    rows = {r["key"]: r for p in json.loads(cmp.stdout)["pairs"] for r in p["rows"]}
    judged = next(iter(cand["vs_current"]["per_scenario"].values()))["metrics"]
    for key in JUDGED:
        assert judged[key]["verdict"] == rows[key]["verdict"], (key, judged[key], rows[key])
        assert judged[key]["change"] == pytest.approx(rows[key]["change"])
    # the decision is the rule applied to those rows: ITL p99 (or requests/s) better beyond noise,
    # requests/s and failed requests not worse, no TPOT p50 or TTFT loss (no TTFT SLO here) larger
    # than the ITL p99 gain
    gain = -rows["itl.p99"]["change"] if rows["itl.p99"]["verdict"] == "improved" else 0.0
    costs = [rows[k]["change"] for k in ("tpot.p50", "ttft.p50", "ttft.p99") if rows[k]["verdict"] == "REGRESSION"]
    harm = any(rows[k]["verdict"] == "REGRESSION" for k in ("itl.p99", "rps", "error_rate"))
    better = gain > 0 or rows["rps"]["verdict"] == "improved"
    takes = better and not harm and all(c <= gain for c in costs)
    assert (step["verdict"] == "changed") == takes, (step["reason"], {k: rows[k]["verdict"] for k in JUDGED})
    assert doc["final"]["vs_baseline"]["verdict"] in ("better", "mixed", "same", "worse")


#: the guide sentence each step follows (docs/tune.md "Decision review")
GUIDE = {
    "context-length": "000: An explicit limit prevents one request from reserving a context length that the service does not need.",
    "gpu-memory": "000: Use a lower value when another process shares the GPU.",
    "baseline": "000: Record these values before you change the server.",
    "max-num-seqs": "001 2.1: Set max-num-seqs to a value where steady-state KV occupancy stays below 85% of available blocks.",
    "cuda-graphs": "000: Eager mode reduces startup work and usually lowers steady-state performance. "
    "Do not use it as a production default without a benchmark.",
    "max-num-batched-tokens": "001 1.1: Start with a chunk budget of 512 tokens ... Measure both TTFT and ITL.",
    "cache-check": "000: Keep it enabled unless the target platform or a specific feature requires it to be disabled.",
    "kv-dtype": "000: Use FP8 KV cache when the model and platform support it. Test output quality.",
    "parallelism": "000: Do not add GPUs only to increase the reported batch capacity.",
    "speculative": "001 3.2: Below 50% acceptance, speculative decoding hurts.",
    "final": "000: Repeat the complete production-like benchmark.",
}
DEFAULT = (
    "ttft.p50",
    "ttft.p99",
    "itl.p50",
    "itl.p99",
    "tpot.p50",
    "e2e.p50",
    "e2e.p99",
    "rps",
    "output_tps",
    "goodput_rps",
    "error_rate",
)


def agrees(out: Path, tmp_path: Path, base: dict, cand: dict, judged: dict) -> tuple[bool, str]:
    """Whether `harness compare` of the two rows' cells gives the verdicts the tune recorded."""
    cmp = harness(
        "compare",
        run_dirs(out, against(base, cand)),
        run_dirs(out, cand),
        "--json",
        "--max-regression",
        "5%",
        baselines=tmp_path / "baselines",
    )
    if cmp.returncode not in (0, 1):
        return False, cmp.stderr[-300:]
    rows = {r["key"]: r for p in json.loads(cmp.stdout)["pairs"] for r in p["rows"]}
    diff = [k for k in DEFAULT if k in judged and k in rows and judged[k]["verdict"] != rows[k]["verdict"]]
    moved = ", ".join(
        f"{rows[k]['label']} {rows[k]['change']:+.0f}% {rows[k]['verdict']}"
        for k in DEFAULT
        if k in rows and rows[k]["verdict"] in ("improved", "REGRESSION")
    )
    return not diff, (f"differs on {diff}" if diff else f"yes ({moved or 'nothing beyond noise'})")


def test_every_step_on_the_vllm_cpu_build_agrees_with_harness_compare(real_vllm, tmp_path):
    """All eleven steps on a deployment with three things the guides would change. Every decision
    that compared measurements is checked against `harness compare` of its cells; the table this
    prints is docs/tune.md's decision review."""
    out = tmp_path / "out"
    proc = harness(
        "tune",
        str(tune_file(real_vllm, tmp_path, "vllm_cpu_review.yaml", "tiny_review.yaml")),
        "--out",
        str(out),
        baselines=tmp_path / "baselines",
    )
    print(proc.stderr[-8000:])
    doc = json.loads((out / "tune.json").read_text())
    by = {s["step"]: s for s in doc["steps"]}
    lines = ["| step | decision | reason | guide | `harness compare` agrees |", "|---|---|---|---|---|"]
    failures = []
    for s in doc["steps"]:
        checks = []
        for t in s["tried"][1:]:
            vs = t.get("vs_current") or {}
            for judged in (p.get("metrics") for p in vs.get("per_scenario", {}).values()):
                if judged:
                    ok, text = agrees(out, tmp_path, s["tried"][0], t, judged)
                    checks.append(text)
                    if not ok:
                        failures.append((s["step"], text))
        if s["step"] == "final" and (vs_b := (s.get("details") or {}).get("vs_baseline")):
            base_row = by["baseline"]["tried"][0]
            judged = {k: v for k, v in next(iter(vs_b["deltas"].values())).items()}
            ok, text = agrees(out, tmp_path, base_row, s["tried"][0], judged)
            checks.append(text)
            if not ok:
                failures.append(("final", text))
        lines.append(
            f"| {s['step']} | {s['verdict']} | {s['reason']} | {GUIDE[s['step']]} | {'; '.join(checks) or 'n/a (no comparison)'} |"
        )
    print("\n".join(lines))
    (tmp_path / "review.md").write_text("\n".join(lines) + "\n")
    assert not failures, failures
    assert by["cuda-graphs"]["verdict"] == "changed", by["cuda-graphs"]["reason"]  # compiled beats eager on this build
    assert by["cache-check"]["verdict"] == "changed", by["cache-check"]["reason"]  # the guide's prior, shared prompt
    # graphs on = enforce-eager absent, or None (removed from the command line: the kind's knob)
    assert (
        doc["final"]["flags"].get("enable-prefix-caching") is True
        and doc["final"]["flags"].get("enforce-eager") is None
    )
    assert "--enforce-eager" not in doc["final"]["command"]
    for name in ("kv-dtype", "parallelism"):
        assert by[name]["verdict"] == "skipped", by[name]
