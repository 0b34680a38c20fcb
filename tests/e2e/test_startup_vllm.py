"""`harness startup` on the real vLLM CPU build (slow: 4 starts, 3-6 minutes on a quiet 2-core box,
much longer on a loaded one): default vs --enforce-eager, 1 cold + 1 warm each, then a short
scenario on each warm start.

On the CPU build there are no CUDA graphs; compilation happens in its warmup, and a warm start finds
TorchInductor's cache filled by the cold one (under the start's own VLLM_CACHE_ROOT /
TORCHINDUCTOR_CACHE_DIR). What is asserted is what the log and the process must show, not speeds.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from waiting import wait_until

from harness.cli.main import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def _no_other_vllm(wait_s: float = 900) -> None:
    """Two vLLMs on two cores make both crawl: wait for another test's (or engineer's) to end."""
    try:
        wait_until(
            lambda: subprocess.run(["pgrep", "-f", "vllm serve"], capture_output=True).returncode != 0,
            "no other `vllm serve`",
            timeout_s=wait_s,
            interval_s=5,
        )
    except AssertionError:
        pytest.skip(f"another `vllm serve` kept running for {wait_s:g}s")


def test_real_vllm_cold_warm_eager_vs_default(real_vllm, tmp_path, capsys):
    _no_other_vllm()
    (tmp_path / "short.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "short",
                "target": {"api": "openai-completions"},
                "load": {"concurrency": 4, "requests": 16},
                "workload": {
                    "tokenizer": str(real_vllm.model),
                    "classes": [{"name": "q", "input_tokens": 64, "output_tokens": 32}],
                },
            }
        )
    )
    spec = {
        "name": "real-startup",
        "engine": {
            "kind": "vllm",
            "command": real_vllm.command(),
            "env": real_vllm.aot_env,  # the compile phase is read from the AOT path's log lines
            "served_model_name": real_vllm.served_model_name,
            "ready_timeout_s": 1500,
            "stop_timeout_s": 30,
        },
        "base": {"max-model-len": 2048, "max-num-seqs": 8, "uvicorn-log-level": "warning"},
        "vary": {"flags": {"enforce-eager": [True]}},
        "cold": 1,
        "warm": 1,
        "scenario": "short.yaml",
    }
    path = tmp_path / "startup.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    assert main(["startup", str(path), "--out", str(out)]) == 0, capsys.readouterr().err[-3000:]
    printed = capsys.readouterr().out
    print(printed)  # the figures, for the record (-s)
    data = json.loads((out / "startup.json").read_text())
    starts = {s["id"]: s for s in data["starts"]}
    assert set(starts) == {"base__cold1", "base__warm1", "enforce-eager=true__cold1", "enforce-eager=true__warm1"}
    for s in starts.values():
        assert s["status"] == "ok", s.get("reason")
        assert abs(sum(v for v in s["phases"].values() if v is not None) - s["ready_s"]) < 0.01
        assert s["logged_s"] <= s["ready_s"] + 1.0  # log stamps have 1 s resolution
        f = s["facts"]
        assert f["engine_version"].startswith("0.32") and f["max_model_len"] == 2048 and f["cudagraph_count"] == 0
        # every start had its own cache root; the warm one reused the cold one's
        assert s["cache_dir"].startswith(str(out / "caches"))
    assert starts["base__warm1"]["cache_dir"] == starts["base__cold1"]["cache_dir"]
    assert starts["base__cold1"]["phases"]["compile"] > 0  # the CPU build's compile warmup
    assert starts["enforce-eager=true__cold1"]["facts"]["enforce_eager"] is True
    assert starts["base__cold1"]["facts"]["enforce_eager"] is False
    for c in data["configs"]:
        assert c["steady"]["status"] == "complete" and c["steady"]["output_tok_per_s"] > 0
    assert data["tradeoffs"][0]["config_id"] == "enforce-eager=true"
    assert (out / "report.html").is_file()
    assert "trade-off against base" in printed
