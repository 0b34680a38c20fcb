"""Finish a run: assemble summary.json from the load processes' results, judge it, write it.

One path for every front end. `assemble` builds the summary (harness.results.build); the caller
may then add what only it knows (an early stop, a dead engine, missing workers); `conclude` adds
the checks every run gets (prefix-cache isolation, engine reconciliation, too-warm prefix cache),
runs the post-run analyses (harness.diagnose: summary.json diagnosis + findings) and judges a run
where most requests failed;
`write` stores histograms.json and summary.json.
"""

from __future__ import annotations

from typing import Any

from harness.diagnose import DiagnoseOptions, diagnose
from harness.metrics.recorder import MetricSet
from harness.results.build import build_summary
from harness.results.layout import write_json_atomic
from harness.results.models.summary import PrefixCacheIsolation, ReplicaFigures, RunSummary
from harness.results.trace_replay import block_trace_block
from harness.results.verdict import most_failed
from harness.run.instruments import Instruments
from harness.run.prefix_cache import hit_rate_warning, workload_max_hit_rate
from harness.run.prepare import Prepared
from harness.scenario.models import Scenario
from harness.workload.arrivals import get_arrival
from harness.workload.generator import expected_prefix_hit_rate


def load_block(scenario: Scenario) -> dict[str, Any]:
    """summary.json's `load`: what the scenario asked of the load (the mode adds what it achieved)."""
    load = scenario.load
    mode = "offline" if load.offline else "open" if load.open_loop else "closed"
    block: dict[str, Any] = {
        "mode": mode,
        "duration_s": load.duration_s,
        "requests": load.requests,
        "ramp_s": load.ramp_s,
    }
    if load.offline:  # every request at once: a batch-throughput run (makespan and the client check added after it)
        block["concurrency"] = load.requests
    elif load.open_loop:
        block.update(rate=load.rate, arrival=load.arrival, burstiness=load.burstiness, max_in_flight=load.max_in_flight)
        block.update(get_arrival(load.arrival).summary(load))  # the pattern's own inputs (a trace's file)
    else:
        block["concurrency"] = load.concurrency
    return block


def assemble(
    prep: Prepared,
    *,
    results: list[dict[str, Any]],
    engine: dict[str, Any],
    stall: Any,
    status: str,
    processes: int,
    load: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
) -> tuple[RunSummary, MetricSet]:
    scenario = prep.scenario
    return build_summary(
        scenario={
            "name": scenario.name,
            "fingerprint": prep.fingerprint,
            "path": prep.scenario_path,
            "seed": scenario.seed,
            "slo_set": scenario.has_slo(),
        },
        target={
            "url": prep.target_url,
            "api": scenario.target.api,
            "model": prep.info.get("model"),
            "engine_kind": prep.engine_kind,
            "simulated": prep.engine_kind == "sim",
            "continuous_usage": prep.info.get("continuous_usage"),
            "labels": prep.labels,
        },
        load=load if load is not None else load_block(scenario),
        results=results,
        engine=engine,
        stall_meter=stall,
        reconcile_warnings=warnings,
        status=status,
        processes=processes,
    )


def engine_reconcile(summary: RunSummary, engine: dict[str, Any]) -> list[str]:
    from harness.telemetry.reconcile import counter_coverage, reconcile

    client = {k: v.model_dump() for k, v in summary.latency_ms.items()}
    warnings = list(reconcile(client, engine))
    if summary.fleet is None:  # a fleet's engine block is one replica of several
        warnings += counter_coverage(
            engine,
            summary.tokens.input_total,
            summary.window.start,
            summary.window.end,
            failed=summary.requests.failed,
        )
    return warnings


def conclude(
    prep: Prepared,
    summary: RunSummary,
    engine: dict[str, Any],
    instruments: Instruments,
    *,
    slice_s: float = 10.0,
    judge: bool = True,
) -> None:
    """The checks every run gets, the post-run analyses, and (`judge`) status failed when most failed."""
    scenario = prep.scenario
    iso = prep.info.get("prefix_cache_isolation")
    summary.prefix_cache_isolation = PrefixCacheIsolation.model_validate(iso) if iso is not None else None
    replicas = instruments.per_replica()
    if replicas and summary.fleet is not None:
        # per replica over the window: queue depth (the autoscaling signal), running, KV, prefix hits
        summary.fleet.engines = [ReplicaFigures.model_validate(r) for r in replicas]
    if scenario.load.offline:  # makespan, submit spread, peak in flight; a warning when the client was the limit
        from harness.results.offline import offline_facts

        offline_facts(summary, prep.run_dir.requests, scenario.load.requests or 0)
    summary.block_trace = block_trace_block(scenario, prep.scenario_dir, summary)  # None without a block trace
    if instruments.telemetry is not None:
        warnings = engine_reconcile(summary, engine)
        too_warm = hit_rate_warning(summary.engine, workload_max_hit_rate(scenario, expected_prefix_hit_rate(scenario)))
        if too_warm:
            warnings.append(too_warm)
        if warnings:
            summary.validity.warnings.extend(warnings)
            summary.validity.ok = False
    # post-run analyses (harness.diagnose: one module each, registered by name): summary.diagnosis, findings
    diagnose(
        summary,
        prep.run_dir.root,
        DiagnoseOptions(
            slice_s=slice_s,
            engine_log=instruments.log.path,
            log_window=instruments.log.span,
            engine_kind=prep.engine_kind,
        ),
    )
    failed_most = most_failed(summary) if judge else None
    if failed_most and summary.status == "complete":
        summary.status, summary.status_reason = "failed", failed_most


def write(prep: Prepared, summary: RunSummary, metrics: MetricSet) -> dict[str, Any]:
    data = summary.model_dump(mode="json")
    write_json_atomic(prep.run_dir.summary, data)  # first: on a nearly full disk it is the one to keep
    write_json_atomic(prep.run_dir.histograms, metrics.to_dict())
    return data
