"""The streamed post-run analyses (bounded batches, exact two-pass percentiles) give exactly the
figures the in-memory ones gave (every record as a dict: tests/diagnose/inmemory_reference.py):
on a real run of the simulated engine over HTTP, and on a synthesized file large enough to cross
many batch, compaction and plot-trimming boundaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.diagnose import base, tally
from harness.diagnose.base import DiagnoseOptions, RunInputs, iter_jsonl
from harness.diagnose.interference import Interference
from harness.diagnose.timeslices import Timeslices
from harness.load.controller import _encode_line
from harness.metrics import percentile
from harness.metrics.record import RequestRecord
from harness.results.models.summary import RunSummary
from tests.diagnose import inmemory_reference as ref
from tests.diagnose.conftest import run_harness

SCENARIO = """
name: streamed
seed: 5
load: {concurrency: 8, duration_s: 4}
warmup: {requests: 4}
sampling: {ignore_eos: true}
workload:
  classes:
    - {name: chat, weight: 8, input_tokens: {dist: uniform, min: 32, max: 96}, output_tokens: {dist: uniform, min: 20, max: 60}}
    - {name: doc, weight: 2, input_tokens: {dist: fixed, value: 6000}, output_tokens: {dist: fixed, value: 4}}
"""


def _both(root: Path, summary: RunSummary, opts: DiagnoseOptions, tmp: Path) -> list[tuple[Any, Any]]:
    """(streamed, in-memory) pairs: each analysis's block and the file it writes."""
    old_root = tmp / "inmemory"
    old_root.mkdir(parents=True)
    old = ref.RunInputs(
        root=old_root,
        summary=summary,
        options=opts,
        requests=[r for r in iter_jsonl(root / "requests.jsonl") if not r.get("warmup")],
        engine_metrics=list(iter_jsonl(root / "engine_metrics.jsonl")),
    )
    new = RunInputs.load(root, summary, opts)
    pairs = [
        (Timeslices().analyze(new), ref.Timeslices().analyze(old)),
        (Interference().analyze(new), ref.Interference().analyze(old)),
    ]
    for name in ("timeslices.json", "interference.json"):
        assert (root / name).is_file() == (old_root / name).is_file(), name
        if (root / name).is_file():
            pairs.append((json.loads((root / name).read_text()), json.loads((old_root / name).read_text())))
    return pairs


def test_a_real_run_gives_the_same_figures(tmp_path):
    out = tmp_path / "run"
    s = run_harness(
        out, SCENARIO, "--no-enable-chunked-prefill --max-model-len 8192", "--slice-s", "0.5", "--no-report"
    )
    summary = RunSummary.model_validate(s)
    opts = DiagnoseOptions(slice_s=0.5)
    pairs = _both(out, summary, opts, tmp_path)
    streamed, inmemory = pairs[0][0], pairs[0][1]
    assert streamed["count"] >= 6 and streamed == s["diagnosis"]["timeslices"], (streamed, s["diagnosis"])
    assert pairs[1][0]["long_prefills"] >= 2 and pairs[1][0] == s["diagnosis"]["interference"]
    for new, old in pairs:
        assert new == old
    assert inmemory is not None


def _synthesize(root: Path, n: int) -> RunSummary:
    """n requests over 16 streams: jittered gaps, 5% spikes, 3% long prompts, failures, warmups,
    a request with a chunk_tokens list that does not match (counted as 1 each)."""
    rng = np.random.default_rng(11)
    base_ns = 987_654_321_012_345
    lines = []
    clock = [base_ns + i * 3_000_000 for i in range(16)]
    last_send = 0
    for i in range(n):
        k = i % 16
        sent = clock[k]
        long = rng.random() < 0.03
        chunks = int(rng.integers(1, 80))
        gaps = rng.normal(20e6, 3e6, chunks).clip(50_000)
        gaps[rng.random(chunks) < 0.05] *= rng.uniform(3, 12)
        first = (400e6 if long else 30e6) * rng.uniform(0.8, 1.2)
        times = (sent + first + np.concatenate(([0.0], np.cumsum(gaps[1:])))).astype(np.int64).tolist()
        failed = rng.random() < 0.02
        rec = RequestRecord(
            index=i,
            class_name="doc" if long else "chat",
            sent_ns=sent,
            chunk_ns=times[: chunks // 2] if failed else times,
            chunk_tokens=[int(t) for t in rng.integers(1, 3, len(times))] if i % 7 else [1],
            input_tokens=4096 if long else int(rng.integers(16, 300)),
            output_tokens=chunks,
            error_kind="read" if failed else None,
            warmup=i < 20,
        )
        lines.append(_encode_line(rec.to_json()))
        last_send = max(last_send, sent)
        clock[k] = times[-1] + 200_000
    (root / "requests.jsonl").write_text("\n".join(lines) + "\n")
    end = max(clock)
    summary = RunSummary()
    summary.window.start = 1_764_780_000.25
    summary.window.duration_s = (end - base_ns) / 1e9
    summary.window.drain_s = (end - last_send) / 1e9
    return summary


def test_a_synthesized_file_gives_the_same_figures_across_batches(tmp_path, monkeypatch):
    # small batches and compactions: many boundaries inside one file
    monkeypatch.setattr(base, "BATCH_REQUESTS", 97)
    monkeypatch.setattr(base, "BATCH_CHUNKS", 3000)
    monkeypatch.setattr(tally, "_COMPACT_AT", 5000)
    root = tmp_path / "run"
    root.mkdir()
    summary = _synthesize(root, 6000)
    for slice_s in (1.0, 7.0):
        pairs = _both(root, summary, DiagnoseOptions(slice_s=slice_s), tmp_path / f"s{slice_s}")
        for new, old in pairs:
            assert new == old
        spikes = pairs[1][0]["spikes"]
        assert spikes > 5000 and len(pairs[3][0]["spikes"]) == 5000  # the plot keeps the largest 5,000


@pytest.mark.parametrize("pct", [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0])
def test_two_pass_percentiles_are_nearest_rank(pct):
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 4, 20_000)
    keys = np.concatenate((rng.integers(-50, 300_000, 19_000), rng.integers(0, 40, 1000)))
    exact = tally.Tally(4)
    two = tally.TwoPassPercentiles(4, (pct,))
    for part in np.array_split(np.arange(keys.size), 7):
        exact.add(groups[part], keys[part])
        two.add(groups[part], keys[part])
    two.plan()
    for part in np.array_split(np.arange(keys.size), 5):
        two.refine(groups[part], keys[part])
    for g in range(4):
        values = np.sort(keys[groups == g])
        want = int(values[percentile.rank(pct, values.size) - 1])
        assert exact.percentile(g, pct) == want == two.percentile(g, pct), (g, pct)
