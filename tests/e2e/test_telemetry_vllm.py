"""Engine telemetry against the real vLLM CPU build (slow: two engine starts).

A KV cache forced small (`--num-gpu-blocks-override 20`, 128-token blocks = 2,560 tokens) under
16 concurrent requests of ~300 prompt + 512 output tokens must report preemptions and KV usage
near full; the same workload on a roomy cache must report none. A shared-prefix workload on the
roomy engine must report an achieved prefix-cache hit rate near the one the scenario implies.
Every figure comes from the engine's own /metrics over the measured window (summary `engine`).
"""

from __future__ import annotations

import json

import pytest
import yaml

from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.plan import build_plan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _scenarios(tmp_path, model_dir: str) -> None:
    pressure = {
        "name": "pressure",
        "target": {"api": "openai-completions"},
        "load": {"concurrency": 16, "requests": 32},
        "workload": {
            "tokenizer": model_dir,
            "classes": [{"name": "long_out", "input_tokens": 300, "output_tokens": 512}],
        },
        "telemetry": {"interval_s": 0.25},
    }
    prefix = {
        "name": "prefix",
        "target": {"api": "openai-completions"},
        "load": {"concurrency": 4, "requests": 80},
        "warmup": {"requests": 4},
        "workload": {
            "tokenizer": model_dir,
            "classes": [
                {
                    "name": "q",
                    "input_tokens": 640,
                    "output_tokens": 16,
                    "shared_prefix": {"tokens": 512, "count": 2, "fraction": 1.0},
                }
            ],
        },
        "telemetry": {"interval_s": 0.25},
    }
    (tmp_path / "pressure.yaml").write_text(yaml.safe_dump(pressure))
    (tmp_path / "prefix.yaml").write_text(yaml.safe_dump(prefix))


def test_kv_pressure_preemptions_and_prefix_hits_on_real_vllm(real_vllm, tmp_path):
    _scenarios(tmp_path, str(real_vllm.model))
    sweep = {
        "name": "real-vllm-telemetry",
        "engine": {
            "kind": "vllm",
            "command": real_vllm.command(),
            "env": real_vllm.env,
            "served_model_name": real_vllm.served_model_name,
            "ready_timeout_s": 300,
            "stop_timeout_s": 30,
        },
        "base": {"max-model-len": 2048, "max-num-seqs": 16, "uvicorn-log-level": "warning"},
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "roomy"},
                {"id": "starved", "flags": {"num-gpu-blocks-override": 20}},
            ],
        },
        "scenarios": ["pressure.yaml", "prefix.yaml"],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, show_progress=True, write_report=False))
    index = json.loads((out / "index.json").read_text())
    assert outcome.counts["complete"] == 4, json.dumps(index, indent=1)[:3000]

    def engine(cell: str) -> dict:
        run_dir = out / next(c["run_dir"] for c in index["cells"] if c["id"] == cell)
        return json.loads((run_dir / "summary.json").read_text())["engine"]

    starved, roomy = engine("starved__pressure__r1"), engine("roomy__pressure__r1")
    print(
        "\nstarved:", json.dumps({k: starved[k] for k in ("kv_usage", "preemptions", "kv_capacity_tokens", "waiting")})
    )
    print("roomy:", json.dumps({k: roomy[k] for k in ("kv_usage", "preemptions", "kv_capacity_tokens", "waiting")}))
    assert starved["profile"] == "vllm" and starved["telemetry"]["source"] == "direct"
    assert starved["telemetry"]["scrapes"] >= 3
    assert starved["kv_capacity_tokens"] == 20 * 128
    assert starved["preemptions"]["count"] > 0
    assert starved["kv_usage"]["max"] >= 0.6
    assert starved["waiting"]["max"] > 0
    assert roomy["preemptions"]["count"] == 0
    assert roomy["kv_capacity_tokens"] > 10 * starved["kv_capacity_tokens"]
    assert roomy["kv_usage"]["max"] < starved["kv_usage"]["max"]

    prefix_engine = engine("roomy__prefix__r1")
    prefix = prefix_engine["prefix_cache"]
    print("prefix:", json.dumps(prefix), "telemetry:", json.dumps(prefix_engine["telemetry"]))
    assert prefix["expected_hit_rate"] is not None and prefix["hit_rate"] is not None, prefix_engine["telemetry"]
    # 512 of 640 tokens are the shared prefix: 4 full 128-token blocks hit once both are cached
    assert prefix["hit_rate"] > 0.5 and abs(prefix["hit_rate"] - prefix["expected_hit_rate"]) < 0.2, prefix
