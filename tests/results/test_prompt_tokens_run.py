"""A chat run whose server adds a chat template's fixed tokens is valid, with the offset reported;
one whose server counts 10 % more tokens is not (GPU_VLLM defect 2). Real parts: `harness run`
against an OpenAI-compatible server whose usage counts words plus a ChatML-like template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCENARIO = {
    "name": "template",
    "seed": 2,
    "load": {"concurrency": 4, "requests": 40},
    "warmup": {"requests": 0},
    "target": {"api": "openai-chat"},
    "workload": {
        "classes": [{"name": "chat", "input_tokens": {"dist": "uniform", "min": 40, "max": 400}, "output_tokens": 4}]
    },
}


def _run(fake_openai, tmp_path: Path, model: str) -> dict:
    path = tmp_path / f"{model}.yaml"
    path.write_text(json.dumps(SCENARIO))
    out = tmp_path / model
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--target",
            fake_openai.url,
            "--model",
            model,
            "--no-telemetry",
            "--no-report",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


def test_a_chat_templates_constant_is_reported_not_warned(fake_openai, tmp_path: Path) -> None:
    s = _run(fake_openai, tmp_path, "chatml")
    uc = s["usage_check"]
    assert uc["prompt_tokens_mean_diff"] == 9.0 and uc["prompt_tokens_offset"] == 9.0, uc
    assert uc["prompt_tokens_mismatch"] == []
    assert not any("prompt token" in w for w in s["validity"]["warnings"]), s["validity"]


def test_a_tokenizer_that_counts_differently_is_a_validity_warning(fake_openai, tmp_path: Path) -> None:
    s = _run(fake_openai, tmp_path, "scaled")
    w = next(w for w in s["validity"]["warnings"] if "prompt token counts disagree" in w)
    assert "lengths off by +10" in w and "set workload.tokenizer" in w, w
    assert s["validity"]["ok"] is False
