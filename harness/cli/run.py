"""`harness run SCENARIO [overrides]`: measure one scenario against one target."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.out_untouched import OutBefore
from harness.cli.run_flags import (
    add_run_flags,
    chosen_percentiles,
    duration_arg,
    extra_overrides,
    load_run_scenario,
    warmup_arg,
    write_exports,
)
from harness.cli.run_outcome import add_outcome_flags, outcome, parse_thresholds, prepare_out
from harness.results.layout import default_run_dir
from harness.scenario.choices import API_NAMES
from harness.signals import stop_on_term_and_hup


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a scenario (no --target: against the built-in simulated engine)",
        description="Run one scenario and write a run directory with summary.json, histograms, "
        "requests.jsonl and a report.",
    )
    p.add_argument(
        "scenario", nargs="?", help="scenario YAML file (none: a quick run from --input-tokens/--output-tokens)"
    )
    p.add_argument(
        "--target",
        action="append",
        help="base URL of an OpenAI-compatible server (default: start the "
        "simulated engine); repeat it for a fleet of replicas (target.endpoints, routed by target.routing)",
    )
    p.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    p.add_argument("--api", choices=API_NAMES, help="API to call")
    p.add_argument("--out", type=Path, help="run directory (default: results/<UTC time>-<scenario name>)")
    p.add_argument(
        "-u", "--concurrency", "--users", type=int, help="closed loop with N users (replaces the file's load mode)"
    )
    p.add_argument("--rate", type=float, help="open loop at R requests/s (replaces the file's load mode)")
    p.add_argument(
        "--offline",
        action="store_true",
        help="offline throughput: submit all --requests N at once, the engine drains them (replaces the file's load mode)",
    )
    p.add_argument(
        "-r",
        "--spawn-rate",
        type=float,
        metavar="USERS_PER_S",
        help="closed loop: start this many users per second (Locust's -r; sets load.ramp_s)",
    )
    p.add_argument(
        "-t", "--duration", "--run-time", type=duration_arg, help="measured window: seconds or 30s, 5m, 1h30m"
    )
    p.add_argument("--requests", type=int, help="measured request count")
    p.add_argument("--warmup", type=warmup_arg, help="warmup: seconds or 30s, 1m (excluded from results)")
    p.add_argument("--seed", type=int, help="workload seed")
    p.add_argument("--processes", type=int, default=1, help="load processes (more client CPU; results merged)")
    p.add_argument(
        "--distributed",
        type=int,
        default=0,
        metavar="N",
        help="a Locust master and N worker processes (HDR histograms merged on the master; see docs/ui.md)",
    )
    p.add_argument(
        "--remote-workers",
        action="store_true",
        help="with --distributed N: start no worker here; N workers on other machines connect "
        "(harness worker --master-host THIS_HOST); see docs/distributed.md",
    )
    p.add_argument(
        "--master-bind-host",
        default="0.0.0.0",
        metavar="HOST",
        help="--remote-workers: the address the master listens on (default: all)",
    )
    p.add_argument(
        "--master-port",
        type=int,
        default=5557,
        metavar="PORT",
        help="--remote-workers: the master's port (default 5557, Locust's)",
    )
    p.add_argument("--sim-args", default="", help='flags for the simulated engine, e.g. "--max-num-seqs 8"')
    p.add_argument("--engine-kind", help="engine kind hint for telemetry (vllm, sglang, tgi, llamacpp)")
    p.add_argument("--prometheus", help="read engine telemetry from this Prometheus server instead of /metrics")
    p.add_argument("--no-telemetry", action="store_true", help="do not scrape engine metrics")
    p.add_argument("--user-clock", action="store_true", help="stamp reads in user space instead of the kernel")
    p.add_argument(
        "--reader",
        choices=("auto", "native", "python"),
        default="auto",
        help="the stream reader: native (C, built at install time), python (the pure-Python fallback), or "
        "auto: native where it was built, unless $HARNESS_READER says otherwise (summary: client.reader)",
    )
    p.add_argument("--no-report", action="store_true", help="do not write report.md/html")
    p.add_argument("--quiet", action="store_true", help="no progress line and no table")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve live harness_ metrics for Prometheus on PORT while the run lasts (0: off); see docs/grafana.md",
    )
    p.add_argument(
        "--metrics-host", default="127.0.0.1", metavar="HOST", help="address for --metrics-port (default 127.0.0.1)"
    )
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label for the live metrics' harness_run_info (config=... also labels every series); repeatable",
    )
    p.add_argument(
        "--reset-prefix-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="before the run, reset the target's prefix cache (vLLM POST /reset_prefix_cache, SGLang "
        "/flush_cache); where it cannot be reset, salt the prompts' words (same lengths, recorded "
        "as workload.prompt_salt) so an earlier run's cache cannot serve them (default: on)",
    )
    p.add_argument(
        "--engine-log",
        type=Path,
        metavar="FILE",
        help="the engine's log file, for a server the harness did not start: the lines written during the "
        "window are counted by kind (recompilations, preemptions, OOM/CUDA errors, aborts)",
    )
    p.add_argument(
        "--slice-s",
        type=float,
        default=10.0,
        metavar="S",
        help="width of the per-interval figures (timeslices.json) and the steady-state check (default 10)",
    )
    add_run_flags(p)
    add_outcome_flags(p)
    p.set_defaults(func=run)


def overrides_from_args(args: argparse.Namespace) -> dict:
    raw = getattr(args, "targets", None) or args.target
    fleet = list(raw) if isinstance(raw, list) else ([raw] if raw else [])  # --target repeated: a fleet
    return {
        "target.url": fleet[0] if len(fleet) == 1 else None,
        "target.endpoints": fleet if len(fleet) > 1 else None,
        "target.model": args.model,
        "target.api": args.api,
        "load.concurrency": args.concurrency,
        "load.rate": args.rate,
        "load.offline": True if getattr(args, "offline", False) else None,
        "load.duration_s": args.duration,
        "load.requests": args.requests,
        "warmup.duration_s": args.warmup,
        "seed": args.seed,
        "telemetry.prometheus": args.prometheus,
        "telemetry.enabled": False if args.no_telemetry else None,
    }


def run(args: argparse.Namespace) -> int:
    stop_on_term_and_hup()  # stop like Ctrl-C: the load stops, what was measured is written
    from harness.cli.input_checks import check_run_flags, check_target_flag
    from harness.errors import UserError
    from harness.run import RunOptions, run_scenario

    # --target repeated: a fleet (the first one is checked by check_run_flags, the others here)
    args.targets = list(args.target or [])
    args.target = args.targets[0] if args.targets else None
    for url in args.targets[1:]:
        check_target_flag(url)
    sim_argv = check_run_flags(args)
    scenario = load_run_scenario(args, {**overrides_from_args(args), **extra_overrides(args)})
    if args.processes < 1:
        raise UserError("--processes must be at least 1")
    if args.distributed < 0 or (args.distributed and args.processes > 1):
        raise UserError("--distributed N: N >= 1 worker processes, and not together with --processes")
    if args.remote_workers and not args.distributed:
        raise UserError("--remote-workers: give the number of workers with --distributed N")
    if not 0 < args.master_port < 65536:
        raise UserError(f"--master-port {args.master_port}: not a port number")
    if not args.slice_s > 0:
        raise UserError(f"--slice-s {args.slice_s:g}: must be > 0 seconds")
    from harness.client.http_stream import choose_reader

    try:
        choose_reader(None if args.reader == "auto" else args.reader)
    except ValueError as exc:
        raise UserError(f"--reader {args.reader}: {exc}") from None
    if args.engine_log is not None and not args.engine_log.is_file():
        raise UserError(
            f"--engine-log {args.engine_log}: no such file; give the log the engine writes (e.g. vllm serve ... > vllm.log 2>&1)"
        )
    wanted = parse_thresholds(args, scenario)
    if args.metrics_port and not 0 < args.metrics_port < 65536:
        raise UserError(f"--metrics-port {args.metrics_port}: not a port number")
    out = args.out or default_run_dir(scenario.name)
    made_from = OutBefore.missing_part(out)
    prepare_out(out, args.force)
    before = OutBefore.take(out, made_from)
    opts = RunOptions(
        out_dir=out,
        target_url=scenario.target.url,
        model=scenario.target.model,
        sim_args=sim_argv,
        engine_kind=args.engine_kind,
        show_progress=not args.quiet,
        write_report=not args.no_report,
        processes=args.processes,
        distributed=args.distributed,
        remote_workers=args.remote_workers,
        master_bind_host=args.master_bind_host,
        master_port=args.master_port,
        scenario_path=args.scenario,
        kernel_stamps=not args.user_clock,
        reader=args.reader,
        labels=_labels(args.label),
        metrics_port=args.metrics_port or None,
        metrics_host=args.metrics_host,
        percentiles=chosen_percentiles(args),
        reset_prefix_cache=args.reset_prefix_cache,
        engine_log=args.engine_log,
        slice_s=args.slice_s,
    )
    try:
        summary = run_scenario(scenario, opts)
    except BaseException as exc:
        before.restore(exc)  # a run that never started leaves --out as it found it (audit N7)
        raise
    write_exports(args, out)
    return outcome(summary, out, wanted)


def _labels(items: list[str]) -> dict[str, str]:
    from harness.errors import UserError

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--label {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out
