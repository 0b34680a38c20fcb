"""The shipped agentic mix against the simulated engine over real HTTP (harness run).

Each user turn of an agent session is several requests: tool calls (a short reply, the tool's
latency, its result sent back with the whole history) and fan-outs to sub-agents that start from
the parent's whole history. With prefix caching the cached tokens per request grow with the
history turn by turn; sub-agents' first requests are served the parent's prefix from the cache;
the session's wall time is split into the engine, tools, the user and sub-agents. With two load
processes, and on a two-replica fleet with session affinity, a session and its sub-agents stay
on one process and one replica.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "agentic_mix.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agentic")
    base = [str(SCENARIO), "--duration", "8", "--quiet", "--no-report"]
    # two runs: one load process on one engine; two load processes on a two-replica fleet
    cases = {
        "one": ["--sim-args=--sim-speed 4"],
        "fleet": [
            "--processes",
            "2",
            "--set",
            "target.replicas=2",
            "--set",
            "target.routing=session-affinity",
            "--sim-args=--sim-speed 4",
        ],
    }
    procs = {}
    for name, extra in cases.items():
        out = tmp / name
        procs[name] = (
            subprocess.Popen(
                [sys.executable, "-m", "harness.cli.main", "run", *base, *extra, "--out", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=dict(os.environ),
            ),
            out,
        )
    results = {}
    for name, (proc, out) in procs.items():
        _o, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines() if x.strip()]
        results[name] = (
            json.loads((out / "summary.json").read_text()),
            [r for r in lines if not r["warmup"] and r["error"] is None],
        )
    return results


def _sessions(reqs: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in reqs:
        if r.get("session") is not None:
            out.setdefault(r["session"], []).append(r)
    return out


def test_cached_tokens_grow_with_the_history(runs) -> None:
    s, _ = runs["one"]
    turns = s["groups"]["turn"]
    cached = [
        turns[t]["cache"]["cached_tokens"] / turns[t]["cache"]["requests_reporting"] for t in ("1", "2", "3", "4")
    ]
    assert cached == sorted(cached) and cached[3] > cached[0] + 300, cached
    for t in ("2", "3", "4"):  # after the first request the engine serves what the history allows
        assert turns[t]["cache"]["hit_rate"] == pytest.approx(turns[t]["cache"]["ideal_hit_rate"], abs=0.05)
    assert set(s["groups"]["call"]) >= {"user", "tool", "join", "subagent"}
    assert "cache" in s["per_class"]["chat"] and "call" not in str(s["per_class"]["chat"])


def test_sub_agents_are_served_the_parents_prefix(runs) -> None:
    _, reqs = runs["one"]
    firsts: dict[tuple[int, str], dict] = {}
    for r in reqs:
        if r.get("agent"):
            key = (r["session"], r["agent"])
            if key not in firsts or r["turn"] < firsts[key]["turn"]:
                firsts[key] = r
    assert len(firsts) >= 6
    for r in firsts.values():
        parent = [
            p for p in reqs if p.get("session") == r["session"] and not p.get("agent") and p["turn"] == r["turn"] - 1
        ]
        assert parent, r["id"]
        # the whole parent prompt, in whole blocks, came from the cache (the ideal), the server says so
        assert r["ideal_cached_tokens"] >= parent[0]["input_tokens"] - 16
        assert r["cached_tokens"] >= 0.9 * r["ideal_cached_tokens"] > 0
    s, _ = runs["one"]
    sub = s["groups"]["call"]["subagent"]["cache"]
    assert sub["hit_rate"] > 0.7 and sub["hit_rate"] == pytest.approx(sub["ideal_hit_rate"], abs=0.05)


def test_session_wall_time_is_split(runs) -> None:
    s, _ = runs["one"]
    a = s["sessions"]["agent"]
    assert a["sessions"] >= 4 and a["calls_per_session"] > 2 and a["tool_calls"] > 0 and a["fan_outs"] > 0
    assert a["subagents"] >= 3 * a["fan_outs"] - 3  # 3 each, bar any the window cut
    if a["completed"]:
        share = a["share"]
        assert 0.5 < sum(share.values()) <= 1.0 + 1e-9  # the rest: the client interpreting replies between calls
        assert share["engine"] > 0 and share["tools"] > 0


def test_a_session_and_its_sub_agents_stay_together(runs) -> None:
    s, reqs = runs["fleet"]
    sessions = _sessions(reqs)
    assert any(any(r.get("agent") for r in rs) for rs in sessions.values())
    for rs in sessions.values():
        assert len({r["id"].rsplit("-", 1)[1] for r in rs}) == 1  # one load process
        assert len({r["labels"]["endpoint"] for r in rs}) == 1  # one replica (session affinity)
    assert s["client"]["processes"] == 2 and len({r["id"].rsplit("-", 1)[1] for r in reqs}) == 2
    assert len(s["fleet"]["endpoints"]) == 2 and all(n > 0 for n in s["fleet"]["sent"])
