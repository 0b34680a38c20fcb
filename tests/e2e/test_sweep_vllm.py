"""A small sweep on the real vLLM CPU build (slow: about 2-4 minutes).

Three configs restart a real `vllm serve`: the base, prefix caching off, and one whose KV cache
(`--num-gpu-blocks-override 4` x 128-token blocks) cannot hold one `--max-model-len 2048`
request, so vLLM exits at startup. Two scenarios per config, with the prefix cache reset
between them through vLLM's dev endpoint.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.plan import build_plan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # vLLM starts take 30-150 s here


def scenario(name: str, model_dir: str, shared_prefix: bool) -> dict:
    cls = {"name": "q", "input_tokens": 384, "output_tokens": 32}
    if shared_prefix:  # two full 128-token blocks shared by every request
        cls["shared_prefix"] = {"tokens": 256, "count": 1}
    return {
        "name": name,
        "target": {"api": "openai-completions"},
        # 48 requests: a window of 2-4 s, so a scrape delayed by a busy box cannot miss all of it
        "load": {"concurrency": 4, "requests": 48},
        "workload": {"tokenizer": model_dir, "classes": [cls]},
        "slo": {"ttft_ms": 5000},
        "telemetry": {"interval_s": 0.5},
    }


def engine_facts(out, cell: dict) -> str:
    """What the cell's engine block and validity say: the counters' window, when they are wrong."""
    summary = json.loads((out / cell["run_dir"] / "summary.json").read_text())
    engine = summary["engine"]
    keep = ("prefix_cache", "prompt_tokens", "telemetry")
    return json.dumps(
        {"engine": {k: engine.get(k) for k in keep}, "client_prompt_tokens": summary["tokens"]["input_total"]}
        | {"window": summary["window"], "warnings": summary["validity"]["warnings"]},
        indent=1,
    )


def test_real_vllm_sweep_with_a_failed_start(real_vllm, tmp_path):
    for name, shared in (("plain", False), ("prefix", True)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(scenario(name, str(real_vllm.model), shared)))
    sweep = {
        "name": "real-vllm",
        "engine": {
            "kind": "vllm",
            "command": real_vllm.command(),
            "env": real_vllm.env,
            "served_model_name": real_vllm.served_model_name,
            "ready_timeout_s": 300,
            "stop_timeout_s": 30,
        },
        "base": {"max-model-len": 2048, "max-num-seqs": 8, "uvicorn-log-level": "warning"},
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "base"},
                {"id": "no-prefix-caching", "flags": {"enable-prefix-caching": False}},
                {"id": "too-few-blocks", "flags": {"num-gpu-blocks-override": 4}},
            ],
        },
        "scenarios": ["plain.yaml", "prefix.yaml"],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"

    t0 = time.monotonic()
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, show_progress=True, write_report=False))
    wall = time.monotonic() - t0

    index = json.loads((out / "index.json").read_text())
    cells = {c["id"]: c for c in index["cells"]}
    timing = {
        "setup_s": real_vllm.setup_s,
        "sweep_s": round(wall, 1),
        "startup_s": {c["config_id"]: c["startup_s"] for c in index["cells"]},
        "cell_s": {c["id"]: c.get("duration_s") for c in index["cells"]},
    }
    print("\nreal-vLLM sweep timings:", json.dumps(timing, indent=1))
    assert outcome.counts == {"complete": 4, "partial": 0, "failed": 2, "not run": 0}, json.dumps(index, indent=1)[
        :4000
    ]

    for cfg in ("base", "no-prefix-caching"):
        for scen in ("plain", "prefix"):
            c = cells[f"{cfg}__{scen}__r1"]
            assert c["status"] == "complete", c
            assert c["metrics"]["completed"] >= 20 and not c["metrics"]["failed"], c["metrics"]
            assert c["startup_facts"]["kv_cache_tokens"] > 0 and c["startup_facts"]["max_concurrency"] > 0
            assert 5 < c["startup_s"] < 300
            assert not c.get("notes"), c["notes"]  # the prefix cache reset worked (dev mode)
    assert "--no-enable-prefix-caching" in cells["no-prefix-caching__plain__r1"]["argv"]
    hit = cells["base__prefix__r1"]["metrics"]["prefix_hit_rate"]
    off = cells["no-prefix-caching__prefix__r1"]["metrics"]["prefix_hit_rate"]
    assert hit is not None and hit > 0.3, engine_facts(out, cells["base__prefix__r1"])  # ~256 of 384 hit once warm
    assert not off, off
    assert not cells["base__plain__r1"]["metrics"]["prefix_hit_rate"]  # random prompts: no hits

    bad = cells["too-few-blocks__plain__r1"]
    assert bad["status"] == "failed"
    assert "ValueError: To serve at least one request with the model's max seq len (2048)" in bad["reason"]
    assert cells["too-few-blocks__prefix__r1"]["reason"] == bad["reason"]
    assert bad["log_tail"]

    assert not (out / "engine.json").exists()  # every engine was stopped
    text = (out / "summary.csv").read_text().splitlines()
    assert len(text) == 7
