"""`--plan`: every step of a sweep, with the exact command line, before anything starts."""

from __future__ import annotations

import shlex

from harness.engines import get_kind
from harness.sweep.flags import describe, shell_line
from harness.sweep.models import EngineSpec
from harness.sweep.plan import Plan
from harness.sweep.progress import fmt_duration


def one_line(text: str) -> str:
    """`text` for one line of the plan: a newline or another control character in a flag value is
    shown as its escape (audit R20: a newline broke the `[start n/N] config ...` line in two; the
    argv line below it is quoted by shlex and was right)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def render_plan(plan: Plan) -> str:
    sweep = plan.sweep
    spec = sweep.engine
    kind = get_kind(spec.kind)
    starts = plan.engine_starts()
    levels = next(iter(sweep.loads.values()), [])
    lines = [
        f"sweep {sweep.name}: {len(plan.configs)} config(s) x {len(plan.scenarios)} scenario(s)"
        + (f" x {len(levels)} load level(s)" if levels else "")
        + f" x {sweep.repeats} repeat(s) = {len(plan.cells)} cell(s), "
        + ("attached to a running server" if not kind.starts_engine else f"{len(starts)} engine start(s)"),
    ]
    if sweep.description:
        lines.append(f"  {sweep.description.strip()}")
    port = "a free port per start ({port})" if spec.port == "auto" else str(spec.port)
    env = {**kind.default_env(spec), **spec.env}
    if not kind.starts_engine:
        lines.append(
            f"engine external: {spec.url}, a server already running (nothing is started, restarted or stopped), "
            f"ready when {_readiness(spec)}, ready timeout {spec.ready_timeout_s:g}s"
        )
    else:
        lines.append(
            f"engine {spec.kind}: port {port}, ready when {_readiness(spec)}, ready timeout {spec.ready_timeout_s:g}s, "
            f"stop: SIGTERM to the process group, SIGKILL after {spec.stop_timeout_s:g}s"
        )
    if env:
        lines.append("  env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    if spec.cwd:
        lines.append(f"  cwd: {spec.cwd}")
    lines.append(
        f"between cells: {'reset the prefix cache' if sweep.reset_prefix_cache_between else 'no cache reset'}; "
        f"{'a fresh engine for every cell (cold start)' if sweep.cold_start else 'one engine per config'}"
    )
    if sweep.loads:
        ((path, values),) = sweep.loads.items()
        lines.append(
            f"load levels: {path} = {', '.join(f'{v:g}' for v in values)}, in this order on the same engine "
            "(one latency-throughput curve per config)"
        )
    if sweep.warmup:
        w = sweep.warmup
        lines.append(
            f"warmup: {w.requests} request(s) / {w.duration_s:g}s "
            f"{'before every cell' if w.every_cell else 'after each engine start'} (replaces the scenarios' warmup)"
        )
    lines.append("scenarios:")
    for ref in plan.scenarios:
        lines.append(f"  {ref.name}: {ref.path}")
    lines.append("")
    step = 0
    total_s = 0.0
    known = True
    for n, (config, cells) in enumerate(starts, 1):
        what = one_line(describe(config.varied)) or "base flags"
        lines.append(f"[start {n}/{len(starts)}] config {config.id}" + ("" if what == config.id else f": {what}"))
        argv = plan.command(config)
        lines.append(f"  $ {shell_line(argv, config.flags)}" if argv else f"  (attached to {spec.url})")
        if config.replicas > 1:
            lines.append(
                f"  x {config.replicas} replicas ({{replica}} 0..{config.replicas - 1}, each on its own port, "
                f"{config.devices} device(s) in all); the load is routed over them (target.routing)"
            )
        for cell in cells:
            step += 1
            ov = one_line(", ".join(f"{k}={v}" for k, v in cell.overrides.items()))
            load = cell.resolved.load
            what = f"concurrency {load.concurrency}" if load.concurrency else f"rate {load.rate:g}/s"
            stop = " or ".join(
                x
                for x in (
                    f"{load.duration_s:g}s" if load.duration_s else "",
                    f"{load.requests} requests" if load.requests else "",
                )
                if x
            )
            if load.duration_s:
                total_s += load.duration_s + cell.resolved.warmup.duration_s
            else:
                known = False
            lines.append(
                f"  step {step}: {cell.what} r{cell.repeat} ({what}, {stop})"
                + (f" overrides: {ov}" if ov else "")
                + f" -> {cell.run_dir}"
            )
    lines.append("")
    if known:
        est = f"at least {fmt_duration(total_s)} of load"
    elif total_s:
        est = f"{fmt_duration(total_s)} of timed load, plus cells bounded by request count"
    else:
        est = "cells bounded by request count (no duration to estimate)"
    starting = "" if not get_kind(spec.kind).starts_engine else f" plus {len(starts)} engine start(s)"
    lines.append(f"{len(plan.cells)} cells; {est}{starting}. Nothing was started (--plan).")
    return "\n".join(lines)


def _readiness(spec: EngineSpec) -> str:
    path = get_kind(spec.kind).ready_path_for(spec)
    return f"GET {path} answers 200"
