"""Cache-true traffic and TTFT split by the server's own timing, on the real vLLM CPU build (slow:
two engine starts).

vLLM 0.32 with `--enable-per-request-metrics` returns its own timing of each request (`metrics` on
the final usage chunk): every request's line joins it with the client's stamps (queue + prefill +
network = TTFT, none negative) and the report splits TTFT. Without the flag the run says which
parts are unknown and the report that TTFT is not split. A hash-block trace written for vLLM's
CPU block size (128) is served from the prefix cache close to what its block ids allow, per
request (`--enable-prompt-tokens-details`); an agentic session's sub-agents are served the
parent's history.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.plan import build_plan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def _report(run_dir: Path) -> str:
    subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "report", str(run_dir)], check=True, capture_output=True, cwd=ROOT
    )
    return (run_dir / "report.md").read_text()


def _scenarios(tmp_path, model_dir: str) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "make_block_trace.py"),
            str(tmp_path / "trace.jsonl"),
            "--records",
            "40",
            "--block-tokens",
            "128",
            "--seed",
            "5",
        ],
        check=True,
        capture_output=True,
    )
    trace = {
        "name": "trace",
        "target": {"api": "openai-completions"},
        "load": {"concurrency": 1, "requests": 40},  # one at a time: the trace's order, as the ideal assumes
        "sampling": {"ignore_eos": True},
        "workload": {
            "tokenizer": model_dir,
            "classes": [
                {"name": "t", "block_trace": {"path": "trace.jsonl", "block_tokens": 128, "engine_block": 128}}
            ],
        },
    }
    agent = {
        "name": "agent",
        "load": {"concurrency": 2, "requests": 24},
        "sampling": {"ignore_eos": True},
        "workload": {
            "tokenizer": model_dir,
            "classes": [
                {
                    "name": "a",
                    "session": {
                        "turns": 1,
                        "user_tokens": 64,
                        "output_tokens": 32,
                        "system_prompt": {"tokens": 300},
                        # the tiny model's ChatML template has no tool roles: plain messages
                        "agent": {
                            "tool_calls": 2,
                            "call_tokens": 16,
                            "tool_result_tokens": 200,
                            "tool_format": "text",
                            "fan_out": {
                                "probability": 0.5,
                                "agents": 2,
                                "steps": 1,
                                "task_tokens": 32,
                                "result_tokens": 24,
                            },
                        },
                    },
                }
            ],
        },
    }
    (tmp_path / "trace.yaml").write_text(yaml.safe_dump(trace))
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(agent))


def test_server_timing_joined_per_request_on_real_vllm(real_vllm, tmp_path):
    _scenarios(tmp_path, str(real_vllm.model))
    sweep = {
        "name": "real-vllm-traffic",
        "engine": {
            "kind": "vllm",
            "command": real_vllm.command(),
            "env": real_vllm.env,
            "served_model_name": real_vllm.served_model_name,
            "stop_timeout_s": 30,
            "ready_timeout_s": 600,
        },  # a cold compile on a busy 2-core box took 196 s
        "base": {
            "max-model-len": 2048,
            "max-num-seqs": 8,
            "uvicorn-log-level": "warning",
            "enable-prompt-tokens-details": True,
        },
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "timed", "flags": {"enable-per-request-metrics": True}},
                {"id": "untimed"},
            ],
        },
        "scenarios": ["trace.yaml", "agent.yaml"],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, show_progress=True, write_report=False))
    index = json.loads((out / "index.json").read_text())
    assert outcome.counts["complete"] == 4, [(c["id"], c["status"], c.get("reason")) for c in index["cells"]]

    def cell(cid: str) -> tuple[dict, list[dict], object]:
        run_dir = out / next(c["run_dir"] for c in index["cells"] if c["id"] == cid)
        reqs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines() if x.strip()]
        return (
            json.loads((run_dir / "summary.json").read_text()),
            [r for r in reqs if not r["warmup"] and not r["error"]],
            run_dir,
        )

    s, reqs, run_dir = cell("timed__trace__r1")
    print(
        "\nserver_timing:",
        s["server_timing"],
        "\nblock_trace:",
        s["block_trace"],
        "\nttft_breakdown share:",
        s["ttft_breakdown"]["share"],
    )
    assert s["server_timing"]["timed"] == s["requests"]["completed"] == len(reqs) > 30
    assert s["server_timing"]["sources"] == ["vllm"] and s["server_timing"]["unknown"] == []
    for r in reqs:
        parts = r["ttft_parts_ms"]
        assert set(parts) == {"network", "queue", "prefill"}  # closed loop: no send lag
        assert parts["queue"] >= 0 and parts["prefill"] > 0 and parts["network"] > -1.0, r["id"]
        assert sum(parts.values()) == pytest.approx(r["ttft_ms"], abs=1.0)
    assert s["latency_ms"]["ttft_prefill"]["count"] == len(reqs)
    bt = s["block_trace"]
    assert bt["engine_block_size"] == 128 and bt["ideal_hit_rate"] > 0.2
    # the tokenizer splits blocks' joins a token or so differently: within a quarter of the ideal
    assert bt["server_hit_rate"] == pytest.approx(bt["ideal_hit_rate"], rel=0.25)
    assert "Where TTFT went" in _report(run_dir)

    s, reqs, _ = cell("timed__agent__r1")
    subs = [r for r in reqs if r.get("agent")]
    assert subs and all(r["cached_tokens"] >= 256 for r in subs)  # the parent's history (300-token system prompt +)
    assert s["sessions"]["agent"]["fan_outs"] >= 1 and s["groups"]["call"]["subagent"]["cache"]["hit_rate"] > 0.5

    s, reqs, run_dir = cell("untimed__trace__r1")
    assert s["server_timing"]["timed"] == 0 and s["server_timing"]["unknown"] == ["queue", "prefill", "network"]
    assert "--enable-per-request-metrics" in s["server_timing"]["note"]
    assert all("ttft_parts_ms" not in r and r["cached_tokens"] is not None for r in reqs)
    md = _report(run_dir)
    assert "TTFT not split" in md and "unknown: queue, prefill, network" in md
