"""summary.json `block_trace`: a replayed trace of hashed prefix blocks, its ideal hit rate beside
the server's and the engine's (harness.workload.block_trace, harness.results.models.traffic)."""

from __future__ import annotations

from pathlib import Path

from harness.results.models.summary import RunSummary
from harness.results.models.traffic import BlockTraceReplay
from harness.scenario.models import Scenario
from harness.workload import block_trace


def block_trace_block(scenario: Scenario, base_dir: Path | None, summary: RunSummary) -> BlockTraceReplay | None:
    cls = next((c for c in scenario.workload.classes if c.block_trace is not None), None)
    if cls is None or cls.block_trace is None:
        return None
    spec = cls.block_trace
    trace = block_trace.load(spec, base_dir)
    cache = summary.cache
    return BlockTraceReplay(
        path=spec.path,
        content_id=trace.content_id,
        records=trace.records,
        sessions=len(trace.sessions),
        block_tokens=spec.block_tokens,
        engine_block=spec.engine_block,
        engine_block_size=summary.engine.block_size,
        trace_rate=trace.rate,
        ideal_hit_rate_trace=trace.ideal_hit_rate(spec.engine_block),
        requests=summary.requests.completed,
        ideal_hit_rate=cache.ideal_hit_rate if cache is not None else None,
        server_hit_rate=cache.hit_rate if cache is not None else None,
        engine_hit_rate=summary.engine.prefix_cache.hit_rate,
    )
