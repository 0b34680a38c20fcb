"""The shipped vLLM CPU tune case, short (slow: about 5-10 minutes): real `vllm serve` restarts,
the tiny model, prefix caching off on a shared-system-prompt workload. The decisions an engineer
who read both guides accepts: the context length set, the memory fraction kept, max-num-seqs kept
(4 users, no storm, nothing waits for a slot) and prefix caching turned ON, by the guide's prior
(keep it enabled unless on is worse beyond noise), the reason naming TTFT and the hit rate with
their intervals (audit N1: it was kept off on a goodput tie while TTFT p50 fell 46%)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
TUNE = ROOT / "scenarios" / "tune"


def test_vllm_cpu_short_tune(real_vllm, tmp_path):
    data = yaml.safe_load((TUNE / "vllm_cpu_short.yaml").read_text())
    data["engine"].update(
        {"command": real_vllm.command(), "model": str(real_vllm.model), "cwd": str(ROOT), "env": real_vllm.env}
    )
    scen = yaml.safe_load((TUNE / "tiny_shared_prompt.yaml").read_text())
    scen["workload"]["tokenizer"] = str(real_vllm.model)
    (tmp_path / "tiny_shared_prompt.yaml").write_text(yaml.safe_dump(scen))
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BASELINES": str(tmp_path / "baselines")},
        capture_output=True,
        text=True,
        timeout=2300,
    )
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads((out / "tune.json").read_text())
    assert [s["step"] for s in doc["steps"]] == [
        "context-length",
        "gpu-memory",
        "baseline",
        "max-num-seqs",
        "cache-check",
        "final",
    ]
    by = {s["step"]: s for s in doc["steps"]}
    assert by["context-length"]["verdict"] == "changed" and "2048 tokens" in by["context-length"]["reason"]
    assert "KV cache" in by["context-length"]["reason"]  # from vLLM's startup log
    assert by["baseline"]["tried"][0]["goodput_req_per_s"] > 0
    assert by["gpu-memory"]["verdict"] == "kept" and by["max-num-seqs"]["verdict"] == "kept", by["max-num-seqs"][
        "reason"
    ]
    cc = by["cache-check"]
    print(cc["reason"])
    assert cc["verdict"] == "changed", cc["reason"]
    assert "the side the guides keep" in cc["reason"] and "TTFT p50" in cc["reason"] and "TTFT p99" in cc["reason"]
    assert (
        "hit rate" in cc["reason"] and "95% interval [" in cc["reason"].split("hit rate", 1)[1]
    )  # the hit rate's interval
    on = [t for t in cc["tried"] if t["flags"].get("enable-prefix-caching") is True]
    assert on and on[0]["prefix_hit_rate"] and on[0]["prefix_hit_rate"] > 0.3  # 256 of 384 tokens shared
    assert doc["final"]["flags"]["enable-prefix-caching"] is True
    vs = doc["final"]["vs_baseline"]
    # never worse for turning it on, unless the machine drifted between runs and the final says so
    # (on the shared 2-core box the chosen flags measured 7.00 req/s in their step and 2.10 in the final)
    assert vs["verdict"] in ("better", "mixed", "same") or "machine's speed changed" in (vs.get("drift") or ""), vs
    assert doc["final"]["command"][1] == "serve" and "--max-model-len" in doc["final"]["command"]
    assert doc["cost"]["engine_starts"] >= 3  # baseline (with context-length), prefix caching on, final (+ evidence)
    assert (out / "report.html").is_file() and (out / "recommended.yaml").is_file()
