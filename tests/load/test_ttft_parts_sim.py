"""TTFT split with the server's own timing, over real HTTP on the simulated engine (harness run).

The built-in simulator returns vLLM 0.32's per-request `metrics` on the final usage chunk; each
request's line in requests.jsonl joins them with the client's stamps, and the parts add up to the
client's TTFT within 1 ms with no part negative (the server's queue + prefill fit inside the
client's time). With one batch slot and open-loop arrivals faster than it serves, the tail is
queue and the findings say so; the report carries the split, its figure and the slowest requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ttft_parts")
    sc = tmp / "sc.yaml"
    sc.write_text(
        json.dumps(
            {
                "name": "parts",
                "seed": 3,
                "load": {"rate": 12, "arrival": "poisson", "duration_s": 4},
                "workload": {
                    "classes": [
                        {"name": "a", "input_tokens": 300, "output_tokens": 8},
                        {"name": "b", "input_tokens": 60, "output_tokens": 8},
                    ]
                },
            }
        )
    )
    out = tmp / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(sc),
            "--out",
            str(out),
            "--quiet",
            "--sim-args=--max-num-seqs 1 --sim-speed 0.5",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines() if x.strip()]
    return (
        json.loads((out / "summary.json").read_text()),
        [r for r in lines if not r["warmup"] and r["error"] is None],
        out,
    )


def test_parts_add_up_to_the_client_ttft_per_request(run) -> None:
    _, reqs, _ = run
    assert len(reqs) > 20
    for r in reqs:
        parts = r["ttft_parts_ms"]
        assert set(parts) == {"send_lag", "network", "queue", "prefill"}  # open loop: send lag is a part
        assert all(v >= 0 for v in parts.values()), r
        assert sum(parts.values()) == pytest.approx(r["ttft_ms"], abs=1.0)
        assert r["server"]["timing"] == "vllm" and r["server"]["decode_ms"] > 0


def test_queue_tail_is_found_and_reported(run) -> None:
    s, reqs, out = run
    assert s["server_timing"] == {
        "requests": len(reqs),
        "timed": len(reqs),
        "sources": ["vllm"],
        "unknown": [],
        "note": "",
    }
    tail = s["ttft_breakdown"]["tail"]
    assert tail["share"]["queue"] > 0.5  # one batch slot, arrivals faster than it serves
    for cls in ("a", "b"):
        assert s["per_class"][cls]["ttft_breakdown"]["requests"] == s["per_class"][cls]["requests"]["completed"]
        assert s["per_class"][cls]["latency_ms"]["ttft_queue"]["count"] > 0  # percentiles of each part
    f = next(f for f in s["findings"] if f["id"] == "ttft_parts")
    assert f["value"]["part"] == "queue" and f["text"].startswith("TTFT p99 is") and "max_num_seqs" in f["knobs"]
    md = (out / "report.md").read_text()
    assert "Where TTFT went" in md and "The slowest requests, split" in md
    assert (out / "report_files" / "ttft_parts.png").is_file() or "ttft_parts.png" in (out / "report.html").read_text()
    # every request reported its cached tokens (the built-in simulator has --enable-prompt-tokens-details)
    assert s["cache"]["requests_reporting"] == len(reqs)
