"""`harness sweep FILE [--plan | --out DIR | --resume DIR]`: engine flags across restarts."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UserError
from harness.results.lock import lock_dir

if TYPE_CHECKING:
    from harness.sweep.plan import Cell, Config, Plan


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="restart an engine per flag config and run the same scenarios against each",
        description="Run a sweep file: every config (engine flags) x scenario x repeat. "
        "See docs/sweeps.md and scenarios/sweeps/.",
    )
    p.add_argument("file", help="sweep YAML file")
    p.add_argument("--plan", action="store_true", help="print every step with its exact command line; start nothing")
    p.add_argument("--out", metavar="DIR", help="sweep directory (default results/sweeps/<name>-<time>)")
    p.add_argument("--resume", metavar="DIR", help="continue the sweep in DIR: finished cells are kept, the rest run")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any cell failed or is partial (without it: exit 1 only when no cell completed)",
    )
    p.add_argument(
        "--capacity-search",
        action="store_true",
        help="after each config's cells, with its engine still up, search the highest load within the SLOs "
        "(harness capacity on the first scenario; trials in DIR/capacity/<config>/, docs/capacity.md)",
    )
    p.add_argument(
        "--capacity-precision",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="--capacity-search stops when (first fail - last pass) / first fail <= this (default 0.05)",
    )
    p.add_argument(
        "--capacity-max-trials",
        type=int,
        default=8,
        metavar="N",
        help="--capacity-search trial budget per config (default 8)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve live harness_ metrics for Prometheus on PORT across all cells (0: off); see docs/grafana.md",
    )
    p.add_argument(
        "--metrics-host", default="127.0.0.1", metavar="HOST", help="address for --metrics-port (default 127.0.0.1)"
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from harness.sweep.execute import SweepOptions, run_sweep
    from harness.sweep.plan import build_plan
    from harness.sweep.render import render_plan

    plan = build_plan(args.file)
    if args.plan:
        print(render_plan(plan))
        return 0
    if args.resume and args.out:
        raise UserError("--out and --resume: give one; --resume DIR continues the sweep in DIR")
    if args.resume:
        out = Path(args.resume)
        if not (out / "index.json").is_file():
            raise UserError(f"--resume {out}: no index.json there; give the directory of an earlier sweep")
        lock_dir(out, "--resume", "sweep directory")  # one writer at a time (harness.results.lock)
    else:
        out = (
            Path(args.out)
            if args.out
            else Path("results") / "sweeps" / f"{plan.sweep.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        lock_dir(out, "--out", "sweep directory")
        if any(out.iterdir()):
            raise UserError(f"--out {out}: not empty; choose a new directory, or continue it with --resume {out}")
    after = _capacity_hook(args, plan, out) if args.capacity_search else None
    _signals_to_interrupt()
    metrics = None
    if args.metrics_port:
        from harness.metrics.exporter_server import MetricsServer

        metrics = MetricsServer(args.metrics_port, args.metrics_host).start()
    try:
        outcome = run_sweep(
            plan,
            SweepOptions(
                out_dir=out,
                resume=bool(args.resume),
                show_progress=not args.quiet,
                write_report=not args.no_report,
                metrics_server=metrics,
                after_config=after,
            ),
        )
    finally:
        if metrics is not None:
            metrics.close()
    nothing = (
        bool(outcome.counts.get("failed")) and not outcome.counts.get("complete") and not outcome.counts.get("partial")
    )
    if nothing:
        # the real error first (audit N13: it came last, after a table of failures and a warning
        # about goodput that nothing had)
        print(
            f"error: every cell failed ({outcome.counts['failed']}); nothing was measured: {_failure_reasons(out)}",
            file=sys.stderr,
        )
    if outcome.table:
        print(outcome.table)
    if not args.quiet:
        _print_validity(out)
    print(f"results: {out}/index.json, {out}/summary.csv")
    if outcome.interrupted:
        print(
            f"interrupted: finished cells are kept; continue with: harness sweep {args.file} --resume {out}",
            file=sys.stderr,
        )
        return 130
    if args.strict and (outcome.counts.get("failed") or outcome.counts.get("partial")):
        print(
            f"--strict: {outcome.counts.get('failed', 0)} failed and {outcome.counts.get('partial', 0)} partial "
            "cell(s): exit 1",
            file=sys.stderr,
        )
        return 1
    if nothing:
        print(
            f"error: every cell failed ({outcome.counts['failed']}); nothing was measured; see {out}/index.json "
            f"and {out}/logs/",
            file=sys.stderr,
        )
        return 1  # a sweep that measured nothing is never a success, --strict or not
    if outcome.counts.get("partial") and not outcome.counts.get("complete"):
        # an engine that died in every config's run: what was measured is kept, but no cell is a result
        print(
            f"error: no cell completed ({outcome.counts['partial']} partial, {outcome.counts.get('failed', 0)} "
            f"failed): {_failure_reasons(out)}; see {out}/index.json and {out}/logs/",
            file=sys.stderr,
        )
        return 1
    return 0


def _failure_reasons(out: Path) -> str:
    """The distinct reasons the cells failed, most frequent first (from index.json)."""
    from harness.results.read import load_sweep

    try:
        cells = load_sweep(out).cells
    except UserError:
        return "see the cells' logs"
    counts: dict[str, int] = {}
    for c in cells:
        reason = c.reason or c.status or "unknown"
        counts[reason] = counts.get(reason, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{r}" + (f" ({n} cells)" if len(ordered) > 1 else "") for r, n in ordered[:3])
    return text + (f"; and {len(ordered) - 3} other reason(s)" if len(ordered) > 3 else "")


def _capacity_hook(args: argparse.Namespace, plan: Plan, out: Path) -> Callable[[Config, str, Cell], None]:
    """`--capacity-search`: a capacity search per config against its running engine, on the
    config's first complete cell's scenario; `DIR/capacity/<config>/capacity.json` and one line
    per config, and `DIR/capacity.json` with every config's boundary."""
    from harness.capacity.search import TrialSettings, has_slo, search_capacity
    from harness.results.models import dumps
    from harness.results.models.capacity import CapacitySearch, SweepCapacity

    if not 0 < args.capacity_precision < 1:
        raise UserError(f"--capacity-precision {args.capacity_precision}: give a fraction between 0 and 1, e.g. 0.05")
    if args.capacity_max_trials < 2:
        raise UserError(f"--capacity-max-trials {args.capacity_max_trials}: at least 2 (a passing and a failing level)")
    if not any(has_slo(c.resolved) for c in plan.cells):
        raise UserError(
            f"{args.file}: --capacity-search needs an SLO to judge levels by; add `slo:` to the scenario "
            "(e.g. slo: {ttft_ms: 500, tpot_ms: 50})"
        )
    found: dict[str, CapacitySearch] = {}

    def after(config: Config, base_url: str, cell: Cell) -> None:
        scenario = cell.resolved
        res = search_capacity(
            scenario,
            out / "capacity" / config.id,
            attainment=plan.sweep.slo_attainment,
            precision=args.capacity_precision,
            max_trials=args.capacity_max_trials,
            settings=TrialSettings(
                target_url=base_url, model=plan.sweep.engine.served_model_name, engine_kind=plan.sweep.engine.kind
            ),
        )
        found[config.id] = res.to_model(cell.scenario.name)
        (out / "capacity.json").write_text(dumps(SweepCapacity(found)))
        if not args.quiet:
            for line in res.lines():
                print(f"  capacity {config.id}: {line}")

    return after


def _print_validity(out: Path) -> None:
    """The report's validity box on the console too: read these before the numbers."""
    try:
        from harness.report.build import sweep_validity_items
        from harness.report.sweep_data import load_sweep

        items = sweep_validity_items(load_sweep(out))
    except Exception as exc:  # a display must never turn a finished sweep into a failure
        print(f"validity warnings not computed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    if items:
        print("validity warnings (read these before the numbers; details in the report):")
        for item in items:
            print(f"  WARNING: {item.replace('`', '')}")


def _signals_to_interrupt() -> None:
    """Ctrl-C, SIGTERM and SIGHUP (a closed ssh session, a job scheduler) stop the sweep: the
    engine's process group is stopped and the finished cells are kept. The request is also
    remembered, in case the run machinery turns the interrupt into an ordinary failure."""
    from harness.sweep.execute import STOP

    def handler(signum: int, frame: object) -> None:
        STOP.request("Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, handler)
