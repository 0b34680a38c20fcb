"""Multi-turn sessions against the simulated engine over real HTTP (harness run, subprocesses).

With prefix caching on, each turn's history is served from the cache: the engine's hit rate is
close to the ideal the harness computes from the conversations, and TTFT stays flat with the
turn number; with caching off TTFT grows with the history. With two load processes in open loop
(session arrivals at a rate), sessions stay whole on one process and the per-turn histograms
merge losslessly. The runs start together (independent processes) to keep the test short.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.metrics.hdr import Histogram
from harness.metrics.recorder import GROUPS

ROOT = Path(__file__).resolve().parents[2]

SESSION = {
    "turns": 4,
    "think_time_s": 0.05,
    "user_tokens": 1024,
    "output_tokens": 8,
    "system_prompt": {"tokens": 512, "count": 1},
}


def _scenario(path: Path, load: dict) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "sessions",
                "seed": 7,
                "load": load,
                "workload": {"classes": [{"name": "chat", "session": SESSION}]},
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sessions")
    # one user: no other conversation's prefill queues ahead of a turn, so TTFT is this turn's own prefill
    closed = _scenario(tmp / "closed.yaml", {"concurrency": 1, "duration_s": 8})
    opened = _scenario(tmp / "open.yaml", {"rate": 1.5, "arrival": "poisson", "duration_s": 5})
    cases = {
        # a slow simulated GPU: prefill time dominates TTFT, not a loaded host's scheduling noise
        "on": [str(closed), "--sim-args=--sim-speed 0.5"],
        "off": [str(closed), "--sim-args=--no-enable-prefix-caching --sim-speed 0.5"],
        "open2": [str(opened), "--processes", "2", "--sim-args=--sim-speed 2"],
        "dist2": [str(opened), "--distributed", "2", "--sim-args=--sim-speed 2"],
    }
    procs = {}
    for name, args in cases.items():
        out = tmp / name
        cmd = [sys.executable, "-m", "harness.cli.main", "run", *args, "--out", str(out), "--quiet", "--no-report"]
        procs[name] = (
            subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ)
            ),
            out,
        )
    results = {}
    for name, (proc, out) in procs.items():
        _stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr[-3000:]}"
        results[name] = (json.loads((out / "summary.json").read_text()), out)
    return results


def _ttft_p50(summary: dict, turn: str) -> float:
    return summary["groups"]["turn"][turn]["latency_ms"]["ttft"]["p50"]


def test_prefix_hit_rate_is_close_to_the_ideal(runs) -> None:
    s, _ = runs["on"]
    sess = s["sessions"]
    assert sess["turns"] == s["requests"]["completed"] > 8
    assert sess["ideal_prefix_hit_rate"] > 0.5
    assert sess["engine_prefix_hit_rate"] == pytest.approx(sess["ideal_prefix_hit_rate"], abs=0.08)
    off, _ = runs["off"]
    assert off["sessions"]["ideal_prefix_hit_rate"] > 0.5  # the same conversations allow it...
    assert not off["engine"]["prefix_cache"]["hit_rate"]  # ...but the engine caches nothing


def test_ttft_flat_in_turn_number_with_caching_and_growing_without(runs) -> None:
    on, _ = runs["on"]
    off, _ = runs["off"]
    # history per turn grows by ~1 user message (1,024 tokens) + the reply in both runs
    for s in (on, off):
        turns = s["groups"]["turn"]
        mean_in = [turns[t]["tokens"]["input_total"] / turns[t]["requests"]["completed"] for t in ("1", "2", "3", "4")]
        assert mean_in == sorted(mean_in) and mean_in[3] - mean_in[0] > 3000
    # no cache: turn 4 prefills ~4,700 tokens, turn 2 ~2,600 (x1.8 on the simulated GPU); cached: ~1,050 each
    assert _ttft_p50(on, "4") < 1.3 * _ttft_p50(on, "2")
    assert _ttft_p50(off, "4") > 1.25 * _ttft_p50(off, "2")
    assert _ttft_p50(off, "4") > 2 * _ttft_p50(on, "4")


def test_requests_record_sessions_and_histories(runs) -> None:
    _, out = runs["on"]
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    by_session: dict[int, list[dict]] = {}
    for r in lines:
        by_session.setdefault(r["session"], []).append(r)
    full = [rs for rs in by_session.values() if len(rs) == 4]
    assert full
    for rs in full:
        rs.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in rs] == [1, 2, 3, 4]
        # turn k+1 repeats turn k's prompt and reply, then a new 1,024-token user message
        for a, b in itertools.pairwise(rs):
            assert b["input_tokens"] == a["input_tokens"] + a["output_tokens"] + 1024
            assert b["sent_ns"] > a["sent_ns"]


@pytest.mark.parametrize("case", ["open2", "dist2"])
def test_open_loop_sessions_on_two_processes_merge_losslessly(runs, case: str) -> None:
    s, out = runs[case]
    assert s["client"]["processes"] == 2
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines() if line.strip()]
    measured = [r for r in lines if not r["warmup"] and r["error"] is None]
    # every turn has an intended send time (coordinated omission): turn 1 the arrival, later turns
    # the previous reply's end + think time
    assert all(r["intended_ns"] is not None for r in measured)
    # one session's turns come from one load process (request ids end in the process id)
    pids: dict[int, set[str]] = {}
    for r in measured:
        pids.setdefault(r["session"], set()).add(r["id"].rsplit("-", 1)[1])
    assert all(len(p) == 1 for p in pids.values())
    assert len({p for ps in pids.values() for p in ps}) == 2
    # per-turn blocks are the merge of both processes: counts equal requests.jsonl's, exactly
    per_turn = Counter(str(r["turn"]) for r in measured)
    turns = s["groups"]["turn"]
    assert {t: b["requests"]["completed"] for t, b in turns.items()} == dict(per_turn)
    hist = json.loads((out / "histograms.json").read_text())[GROUPS]
    for t, n in per_turn.items():
        assert Histogram.from_dict(hist[f"turn={t}"]["hist"]["ttft"]).count == n
    assert sum(b["requests"]["completed"] for b in turns.values()) == s["requests"]["completed"]
