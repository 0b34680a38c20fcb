"""Quality beside speed on the real vLLM CPU build (slow: three `vllm serve` starts, ~3-6 minutes).

A sweep of the tiny local model: bf16 with the default KV cache (base), the same flags again
(a restart must reproduce its greedy outputs: 100% agreement), and `--kv-cache-dtype fp8` (the
CPU attention backend supports fp8 KV caches). The agreement figures are printed for the notes;
fp8's is not asserted (a random-weight model's near-tied logits make it what it is), only that
it was measured on every prompt and judged.
"""

from __future__ import annotations

import json

import pytest
import yaml

from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.plan import build_plan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "small",
    "birds",
    "sing",
    "in",
    "old",
    "green",
    "trees",
]


def test_real_vllm_bf16_vs_fp8_kv_cache_agreement(real_vllm, tmp_path):
    prompts = [
        {"id": f"p{i}", "prompt": " ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(8 + i % 7))}
        for i in range(32)
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (tmp_path / "s.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "target": {"api": "openai-completions"},
                "load": {"concurrency": 2, "requests": 6},
                "workload": {
                    "tokenizer": str(real_vllm.model),
                    "classes": [{"name": "c", "input_tokens": 64, "output_tokens": 16}],
                },
            }
        )
    )
    sweep = {
        "name": "vllm-quality",
        "engine": {
            "kind": "vllm",
            "command": real_vllm.command(),
            "env": real_vllm.env,
            "served_model_name": real_vllm.served_model_name,
            "ready_timeout_s": 600,
            "stop_timeout_s": 30,
        },
        # eager: no compilation warm-up, so three starts fit on a busy 2-core box (numerics are what is compared)
        "base": {"max-model-len": 1024, "max-num-seqs": 4, "uvicorn-log-level": "warning", "enforce-eager": True},
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "base"},
                {"id": "base-again", "flags": {"uvicorn-log-level": "error"}},  # numerically the same config
                {"id": "fp8-kv", "flags": {"kv-cache-dtype": "fp8"}},
            ],
        },
        "scenarios": ["s.yaml"],
        "quality": {"prompts": "q.jsonl", "max_tokens": 32, "baseline": "base", "gate": {"min_exact_agreement": 0.9}},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    outcome = run_sweep(
        build_plan(tmp_path / "sweep.yaml"), SweepOptions(out_dir=out, show_progress=True, write_report=False)
    )
    assert outcome.counts["complete"] == 3, outcome.counts
    doc = json.loads((out / "quality.json").read_text())
    figures = {
        cid: {k: v.get(k) for k in ("status", "short")}
        | {
            "exact_rate": (v.get("agreement") or {}).get("exact_rate"),
            "mean_common_prefix": (v.get("agreement") or {}).get("mean_common_prefix"),
            "mean_abs_logprob_diff": (v.get("agreement") or {}).get("mean_abs_logprob_diff"),
        }
        for cid, v in doc["configs"].items()
    }
    print("\nreal-vLLM quality figures:", json.dumps(figures, indent=1))
    assert doc["configs"]["base"]["status"] == "baseline"
    again = doc["configs"]["base-again"]
    assert again["agreement"]["n"] == 32 and again["agreement"]["exact_rate"] == 1.0, (
        again
    )  # a restart repeats greedy output
    fp8 = doc["configs"]["fp8-kv"]
    assert fp8["agreement"]["n"] == 32 and fp8["status"] in ("pass", "fail") and fp8["errors"] == 0
    assert fp8["agreement"]["mean_abs_logprob_diff"] is not None  # vLLM returned log-probs
