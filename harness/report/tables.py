"""Tables of a run: the tuning guides' record list (client side per class and overall, engine
side for the whole server), goodput, errors, and how the measurement itself held up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.metrics.table import shown
from harness.report.data import RunData
from harness.report.document import Table
from harness.report.metrics import fmt_bytes_gib, fmt_num, fmt_pct
from harness.results.models.summary import ClassBlock, Dist, PrefixCacheIsolation, RunSummary


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _dist_cell(d: Dist | None, stat: str) -> str:
    if d is None or not d.count:
        return "—"
    return fmt_num(getattr(d, stat, None))


def _frac_pct(v: Any) -> str:
    """A 0-1 fraction as percent (values above 1.5 are taken as already percent)."""
    f = _num(v)
    if f is None:
        return "—"
    return fmt_pct(f * 100 if f <= 1.5 else f)


def slo_text(slo: Any) -> str:
    if not isinstance(slo, dict):
        return ""
    parts = [f"{k.removesuffix('_ms').upper()} ≤ {fmt_num(v)} ms" for k, v in slo.items() if _num(v) is not None]
    return ", ".join(parts)


def run_slo(run: RunData) -> str:
    """The run's SLO in words, from its scenario.yaml (summary.json does not repeat it)."""
    return slo_text(run.scenario.get("slo")) if run.scenario else ""


def record_table(run: RunData) -> Table:
    """Client-measured values per class and overall (columns), one metric per row."""
    s = run.summary
    groups: list[tuple[str, RunSummary | ClassBlock]] = [("all requests", s)]
    groups += [(name, s.per_class[name]) for name in s.per_class]
    cols = ["Metric"] + [g[0] for g in groups]

    def row(label: str, fn: Callable[[RunSummary | ClassBlock], str]) -> list[str]:
        return [label] + [fn(b) for _, b in groups]

    def lat(metric: str, stat: str) -> Callable[[RunSummary | ClassBlock], str]:
        return lambda b: _dist_cell(b.latency_ms.get(metric), stat)

    def goodput(b: RunSummary | ClassBlock) -> str:
        g = b.goodput.overall if isinstance(b, RunSummary) else b.goodput
        if g.fraction is None:
            return "—"
        return f"{fmt_pct(100 * g.fraction)} ({fmt_num(g.rps)} req/s)"

    rows = [
        row("Requests completed", lambda b: f"{b.requests.completed:,}"),
        row("Requests failed", lambda b: f"{b.requests.failed:,}"),
        row("Requests/s", lambda b: fmt_num(b.requests.rps)),
        row("Input tokens/s", lambda b: fmt_num(b.tokens.input_per_s)),
        row("Output tokens/s", lambda b: fmt_num(b.tokens.output_per_s)),
    ]
    for m in shown("report"):  # harness.metrics.table
        if not any(b.latency_ms.get(m.name) is not None and b.latency_ms[m.name].count for _, b in groups):
            continue
        for stat in m.stats:
            rows.append(row(f"{m.label} {stat} ({m.unit})", lat(m.name, stat)))
    rows.append(row("Goodput (share meeting SLO)", goodput))
    slo = run_slo(run)
    notes = [
        "Latencies in milliseconds, measured by the client; TTFT and E2E from the intended send time "
        "(open loop) so queueing in the client counts. ITL per token splits a multi-token chunk's gap evenly.",
    ]
    if slo:
        notes.append(f"SLO: {slo}.")
    return Table(cols, rows, caption="Latency and throughput, per request class and overall", notes=notes)


def engine_table(run: RunData) -> Table:
    e = run.summary.engine
    tel = e.telemetry
    missing = tel.missing_reason
    rows: list[list[str]] = []

    gm = e.gpu_memory
    if gm.available and gm.used_max_bytes is not None:
        used, total = gm.used_max_bytes, gm.total_bytes
        share = f" of {fmt_bytes_gib(total)} ({fmt_pct(100 * used / total)})" if total else ""
        rows.append(
            [
                "GPU memory used (max)",
                fmt_bytes_gib(used) + share + (" (simulated engine's model)" if gm.simulated else ""),
            ]
        )
        if gm.note:  # another process on the device: NVML counts it too
            rows.append(["GPU memory note", gm.note])
    else:
        rows.append(["GPU memory used (max)", "not available" + (f": {gm.reason}" if gm.reason else "")])

    kv = e.kv_usage
    if kv.max is not None:
        cap = e.kv_capacity_tokens
        rows.append(
            [
                "KV cache occupancy mean / p99 / max",
                " / ".join(_frac_pct(v) for v in (kv.mean, kv.p99, kv.max))
                + (f" of {fmt_num(cap)} tokens" if cap else ""),
            ]
        )
    else:
        rows.append(["KV cache occupancy", "not available"])

    pre = e.preemptions
    if pre.count is not None:
        rows.append(["Preemptions", f"{pre.count:,} ({fmt_num(pre.per_s)} /s)"])
    else:
        rows.append(["Preemptions", "not available"])

    pc = e.prefix_cache
    if pc.hit_rate is not None:
        expected = pc.expected_hit_rate
        rows.append(
            [
                "Prefix cache hit rate",
                _frac_pct(pc.hit_rate) + (f" (workload allows {_frac_pct(expected)})" if expected is not None else ""),
            ]
        )
    else:
        rows.append(["Prefix cache hit rate", "not available"])

    for label, gauge in (("Running requests mean / max", e.running), ("Waiting requests mean / max", e.waiting)):
        if gauge.max is not None:
            rows.append([label, f"{fmt_num(gauge.mean)} / {fmt_num(gauge.max, 0)}"])
    sd = e.spec_decode
    if sd is not None:
        rows.append(
            [
                "Speculative decoding",
                ", ".join(
                    f"{k} {fmt_num(_num(v)) if _num(v) is not None else v}"
                    for k, v in sd.model_dump(mode="json").items()
                ),
            ]
        )
    for key, label in (
        ("ttft", "Engine-reported TTFT p50 / p99"),
        ("itl", "Engine-reported ITL p50 / p99"),
        ("queue", "Engine queue time p50 / p99"),
        ("prefill", "Engine prefill time per request p50 / p99"),
        ("decode", "Engine decode time per request p50 / p99"),
    ):
        d = e.engine_latency_ms.get(key)
        if d is not None and (d.p50 is not None or d.p50_bucket_ms):
            rows.append(
                [
                    label,
                    f"{bucket_quantile(d.model_dump(), 'p50')} / {bucket_quantile(d.model_dump(), 'p99')} ms"
                    + (f"; mean {fmt_num(d.mean)} ms" if d.mean is not None else "")
                    + " (from bucketed histograms)",
                ]
            )
    rows.append(
        ["Telemetry", f"{tel.source or 'none'}, {tel.scrapes} scrapes" + (f"; missing: {missing}" if missing else "")]
    )
    caption = "Engine, whole server" + (f" (profile {e.profile})" if e.profile else "")
    return Table(
        ["Metric", "Value"],
        rows,
        caption=caption,
        align=["l", "l"],
        notes=["From the engine's metrics endpoint over the measurement window; shared by all request classes."],
    )


def bucket_quantile(d: dict, key: str, suffix: str = "_bucket_ms", value_key: str | None = None) -> str:
    """A quantile read off a bucketed histogram. Inside the first bucket (0 to its upper bound)
    linear interpolation only says "half the bucket": vLLM's queue-time buckets start at 300 ms,
    so a 13 ms mean queue printed as a 150 ms p50 (audit D8). Say what is known instead. Every
    table that shows an engine histogram's quantile prints it through here."""
    bucket = d.get(f"{key}{suffix}")
    if isinstance(bucket, list) and len(bucket) == 2 and _num(bucket[0]) == 0 and _num(bucket[1]) is not None:
        return f"< {fmt_num(_num(bucket[1]))} (first bucket)"
    return fmt_num(_num(d.get(value_key or key)))


def isolation_text(iso: PrefixCacheIsolation | None) -> str | None:
    """How the run kept an earlier run's prefix cache out (summary.json prefix_cache_isolation),
    in words: the console said "prompts salted with workload.prompt_salt N" and the report said
    nothing (audit N18); salted prompts are other words at the same lengths, so a reader comparing
    with an unsalted run needs to know."""
    if iso is None or not iso.mode:
        return None
    mode, salt, reason = iso.mode, iso.prompt_salt, iso.reason
    salted = f"prompts salted with workload.prompt_salt {salt} (same lengths, other words)" if salt is not None else ""
    if mode == "reset":
        return f"reset (POST {iso.reset_path})" + (f"; {salted}" if salted else "")
    if mode == "salt":
        return salted + (f": the target has {reason}" if reason else "")
    return f"kept warm ({reason or 'not reset'})" + (f"; {salted}" if salted else "")


def errors_table(run: RunData) -> Table | None:
    errs = run.summary.requests.errors_by_kind
    if not errs:
        return None
    total = run.summary.requests.completed + run.summary.requests.failed
    rows = [
        [k, f"{v:,}", fmt_pct(100 * v / total if total else None)]
        for k, v in sorted(errs.items(), key=lambda kv: -kv[1])
    ]
    return Table(["Error kind", "Requests", "Share"], rows, caption="Failed requests by kind")


def measurement_table(run: RunData) -> Table:
    s = run.summary
    rows: list[list[str]] = []
    w = s.window
    drain_text = f" (incl. {fmt_num(w.drain_s)} s drain)" if w.drain_s >= 0.05 else ""
    rows.append(
        ["Measurement window", f"{fmt_num(w.duration_s)} s{drain_text} after {fmt_num(w.warmup_s)} s of warmup"]
    )
    load = {k: v for k, v in s.load.model_dump(mode="json").items() if v is not None}
    if "load" in s.model_fields_set and load:
        rows.append(["Load", ", ".join(f"{k} {v}" for k, v in load.items())])
    if "timing" in s.model_fields_set:  # a summary rebuilt from requests.jsonl has none
        rows.append(["Timestamp clock", s.timing.clock])
        rows.append(["Reads holding several events", f"{s.timing.coalesced_reads:,}"])
    meter = s.timing.stall_meter
    if "stalls_in_window" in meter.model_fields_set:
        rows.append(
            [
                "Host stalls in the window",
                f"{meter.stalls_in_window} (longest {fmt_num(meter.max_stall_ms)} ms, "
                f"threshold {fmt_num(meter.threshold_ms)} ms)",
            ]
        )
    sim = s.engine.simulator
    if sim is not None:
        share = sim.behind_share
        rows.append(
            [
                "Simulated engine behind its schedule",
                f"{fmt_num(sim.behind_s)} s ({fmt_pct(None if share is None else 100 * share)} of its busy time); "
                f"step lag p50 / p99 {fmt_num(sim.step_lag_ms.p50)} / {fmt_num(sim.step_lag_ms.p99)} ms "
                f"(mean step {fmt_num(sim.mean_step_ms)} ms)",
            ]
        )
    if s.client.cpu_max_pct is not None:
        rows.append(
            ["Client CPU max / mean", f"{fmt_pct(s.client.cpu_max_pct, 0)} / {fmt_pct(s.client.cpu_mean_pct, 0)}"]
        )
    lag = s.latency_ms.get("send_lag")
    if lag is not None and lag.count:
        rows.append(["Send lag p50 / p99 (open loop)", f"{fmt_num(lag.p50)} / {fmt_num(lag.p99)} ms"])
    uc = s.usage_check
    if uc.prompt_tokens_mean_diff is not None:
        fit = ""
        if uc.prompt_tokens_offset is not None:  # harness.metrics.prompt_fit
            fit = (
                f"; constant offset {uc.prompt_tokens_offset:+.1f} per request (a chat template's fixed tokens), "
                f"scale {100 * (uc.prompt_tokens_scale_error or 0.0):+.1f}%, "
                f"scatter {fmt_num(uc.prompt_tokens_residual_rms)} rms"
            )
        rows.append(
            [
                "Server prompt tokens − intended",
                f"mean {fmt_num(uc.prompt_tokens_mean_diff)}, max {uc.max_diff}{fit}"
                + (f" (tokenizer {uc.tokenizer})" if uc.tokenizer else ""),
            ]
        )
    elif "usage_check" in s.model_fields_set:
        rows.append(
            [
                "Usage check",
                ", ".join(f"{k} {v}" for k, v in uc.model_dump(mode="json").items() if not isinstance(v, (dict, list))),
            ]
        )
    iso = isolation_text(s.prefix_cache_isolation)
    if iso:
        rows.append(["Prefix cache before the run", iso])
    tgt = s.target
    parts = [v for v in (tgt.url, tgt.api, tgt.model) if v]
    if parts:
        rows.append(["Target", " ".join(parts)])
    return Table(["Item", "Value"], rows, caption="How the measurement held up", align=["l", "l"])
