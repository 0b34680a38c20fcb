"""The shipped hash-block trace replay against the simulated engine over real HTTP (harness run).

Requests sharing a block id send the same tokens, so with prefix caching on the server's cached
tokens (usage, per request) reach the ideal hit rate the block ids allow, within 10 %; with it
off they are zero. A conversation's turns (session_id) go out in order, each after the previous
one ended, from one load process when there are two.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "block_trace_replay.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("block_trace")
    # twice the trace's pace for 10 s: about half of its 132 sessions, the same reuse pattern
    base = [str(SCENARIO), "--rate", "10", "--duration", "10", "--quiet", "--no-report"]
    # caching on with two load processes (a session's turns must stay on one), and off
    cases = {
        "on": ["--processes", "2", "--sim-args=--sim-speed 4"],
        "off": ["--sim-args=--sim-speed 4 --no-enable-prefix-caching"],
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
        results[name] = (json.loads((out / "summary.json").read_text()), [r for r in lines if not r["warmup"]])
    return results


def test_hit_rate_reaches_the_ideal_with_caching_and_zero_without(runs) -> None:
    for name in ("on",):
        s, reqs = runs[name]
        bt = s["block_trace"]
        assert bt["records"] == 240 and bt["sessions"] == 132 and bt["requests"] > 60
        assert bt["ideal_hit_rate"] > 0.3  # the block ids allow real reuse...
        assert bt["server_hit_rate"] == pytest.approx(bt["ideal_hit_rate"], rel=0.10)  # ...and the engine finds it
        assert bt["engine_hit_rate"] == pytest.approx(bt["ideal_hit_rate"], rel=0.10)
        # per request: the server's cached tokens and the ideal, side by side in requests.jsonl
        ok = [r for r in reqs if r["error"] is None]
        assert all(r["cached_tokens"] is not None and r["ideal_cached_tokens"] is not None for r in ok)
        assert sum(r["cached_tokens"] for r in ok) == pytest.approx(sum(r["ideal_cached_tokens"] for r in ok), rel=0.10)
    off, reqs = runs["off"]
    assert off["block_trace"]["ideal_hit_rate"] > 0.3
    assert off["block_trace"]["server_hit_rate"] == 0.0 and not off["engine"]["prefix_cache"]["hit_rate"]


def test_sessions_keep_their_order_on_one_process(runs) -> None:
    for name in ("on",):
        s, reqs = runs[name]
        by_session: dict[int, list[dict]] = {}
        for r in reqs:
            if r.get("session") is not None:
                by_session.setdefault(r["session"], []).append(r)
        multi = [rs for rs in by_session.values() if len(rs) > 1]
        assert multi and s["sessions"]["started"] > 5
        for rs in multi:
            rs.sort(key=lambda r: r["turn"])
            assert [r["turn"] for r in rs] == list(range(1, len(rs) + 1))
            assert len({r["id"].rsplit("-", 1)[1] for r in rs}) == 1  # one load process holds the session
            for a, b in itertools.pairwise(rs):  # sent after the previous turn's last chunk
                assert b["sent_ns"] >= a["intended_ns"] + a["e2e_ms"] * 1e6 - 1e6
                assert b["ideal_cached_tokens"] >= a["input_tokens"] - 16  # the history's blocks
    assert runs["on"][0]["client"]["processes"] == 2
