"""Fleets over real HTTP: two built-in simulators (target.replicas: 2) behind one load, per policy.

prefix-affinity sends requests that share a system prompt to one replica: its fleet hit rate
(from usage.prompt_tokens_details) is higher and its cross-replica prefix overlap lower than
round-robin's; adapter-affinity keeps each adapter on the replica that has it (fewer cold adapter
loads); session-affinity keeps a session on one replica; per-endpoint blocks add up to the run's.
The four runs start together (independent processes) to keep the test short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ("round-robin", "prefix-affinity", "adapter-affinity", "session-affinity")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    scenario = tmp / "fleet.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "fleet",
                "seed": 4,
                "target": {"replicas": 2},
                "load": {"concurrency": 6, "duration_s": 5},
                "workload": {
                    "classes": [
                        {
                            "name": "chat",
                            "weight": 2,
                            "session": {
                                "turns": 3,
                                "user_tokens": 64,
                                "output_tokens": 16,
                                "system_prompt": {"tokens": 640, "count": 4},
                            },
                        },
                        {
                            "name": "tools",
                            "weight": 1,
                            "input_tokens": 300,
                            "output_tokens": 16,
                            "adapters": [{"name": "a1"}, {"name": "a2"}, {"name": "a3"}, {"name": "a4"}],
                        },
                    ]
                },
            }
        )
    )
    procs = {}
    for policy in POLICIES:
        out = tmp / policy
        cmd = [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scenario),
            "--set",
            f"target.routing={policy}",
            "--sim-args=--sim-speed 2 --max-loras 4",
            "--out",
            str(out),
            "--quiet",
            "--no-report",
        ]
        procs[policy] = (
            subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ)
            ),
            out,
        )
    results = {}
    for policy, (proc, out) in procs.items():
        _o, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{policy}: {err[-3000:]}"
        lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines() if x.strip()]
        results[policy] = (json.loads((out / "summary.json").read_text()), lines)
    return results


@pytest.mark.parametrize("policy", POLICIES)
def test_per_endpoint_blocks_add_up_to_the_fleet(runs, policy: str) -> None:
    s, lines = runs[policy]
    eps = s["groups"]["endpoint"]
    assert len(eps) == 2 if policy == "round-robin" else 1 <= len(eps) <= 2
    for key in ("completed", "failed"):
        assert sum(b["requests"][key] for b in eps.values()) == s["requests"][key]
    assert sum(b["tokens"]["output_total"] for b in eps.values()) == s["tokens"]["output_total"]
    assert sum(s["fleet"]["sent"]) == len(lines)  # every request sent, warmup included, went to one replica
    assert s["fleet"]["routing"] == policy
    # each replica's own /metrics over the window: queue depth and prefix hits per replica
    engines = s["fleet"]["engines"]
    assert [e["endpoint"] for e in engines] == s["fleet"]["endpoints"]
    assert all(e["waiting"] is not None and e["prefix_hit_rate"] is not None for e in engines)


def test_prefix_affinity_raises_the_hit_rate_and_lowers_overlap(runs) -> None:
    rr, pa = runs["round-robin"][0]["fleet"], runs["prefix-affinity"][0]["fleet"]
    assert pa["prefix_overlap"] < rr["prefix_overlap"]
    assert pa["fleet_usage_cached_hit_rate"] > rr["fleet_usage_cached_hit_rate"]


def test_adapter_affinity_cuts_cold_adapter_loads(runs) -> None:
    def cold(policy: str) -> int:
        return runs[policy][0]["groups"]["adapter_load"]["cold"]["requests"]["completed"]

    assert cold("adapter-affinity") < cold("round-robin")
    assert cold("adapter-affinity") <= 4 + 1  # each adapter on one replica (one fallback at most)


def test_session_affinity_keeps_a_session_on_one_replica(runs) -> None:
    homes: dict[int, set[str]] = {}
    for r in runs["session-affinity"][1]:
        if r.get("session") is not None:
            homes.setdefault(r["session"], set()).add(r["labels"]["endpoint"])
    assert homes and all(len(h) == 1 for h in homes.values())
    assert len({e for h in homes.values() for e in h}) == 2


@pytest.mark.parametrize("policy", ["round-robin", "prefix-affinity"])
def test_balance_per_replica_is_reported(runs, policy: str) -> None:
    """fleet.balance: each replica's completed requests, prompt tokens and TTFT (endpoint order),
    and the busiest replica over the mean; the routings differ in hit rate, the figures sit side by side."""
    s, _lines = runs[policy]
    f = s["fleet"]
    b = f["balance"]
    eps = s["groups"]["endpoint"]
    names = [u.split("//", 1)[-1] for u in f["endpoints"]]
    assert b["requests"] == [eps[n]["requests"]["completed"] if n in eps else 0 for n in names]
    assert b["prompt_tokens"] == [eps[n]["tokens"]["input_total"] if n in eps else 0 for n in names]
    assert sum(b["requests"]) == s["requests"]["completed"]
    assert b["requests_max_over_mean"] >= 1.0 and b["prompt_tokens_max_over_mean"] >= 1.0
    assert b["ttft_p99_ms"] == [eps[n]["latency_ms"]["ttft"]["p99"] if n in eps else None for n in names]
    if policy == "round-robin":
        assert b["requests_max_over_mean"] < 1.2  # in turn: even
