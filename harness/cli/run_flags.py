"""`harness run` flags beyond the file's own overrides: what users of Locust, vllm bench, GuideLLM
and k6 type first (`-u/-r/-t`, `--duration 5m`, a quick run with no file, `--header`,
`--api-key-env`, `--tokenizer`, `--set key.path=value`).

They all end up as dotted scenario overrides, so `scenario.yaml` in the run directory records the
scenario that actually ran, whichever way it was written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.scenario.durations import parse_duration
from harness.scenario.loader import UNSET
from harness.scenario.models import Scenario
from harness.scenario.yaml_io import load_yaml_value

#: a run without a scenario file stops after this many requests unless --duration/--requests say otherwise
QUICK_REQUESTS = 100
QUICK_SOURCE = "command line"


def duration_arg(text: str) -> float:
    """argparse type: `30`, `30s`, `5m`, `1h30m`."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 seconds")
    return seconds


def warmup_arg(text: str) -> float:
    """argparse type for --warmup: a duration, 0 allowed."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags of this module (the load-mode and stop flags stay in run.py, with Locust's short names)."""
    quick = p.add_argument_group("without a scenario file (as vllm bench --random-input-len/--random-output-len)")
    quick.add_argument("--input-tokens", type=int, metavar="N", help="prompt length of a quick run (no scenario file)")
    quick.add_argument("--output-tokens", type=int, metavar="N", help="output length of a quick run (no scenario file)")
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="name of the environment variable holding the API key (sent as a Bearer token)",
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="'K: V'", help="extra HTTP header on every request; repeatable"
    )
    p.add_argument(
        "--tokenizer", metavar="PATH", help="local tokenizer (tokenizer.json or its directory) that sizes prompts"
    )
    p.add_argument(
        "--percentiles",
        metavar="LIST",
        help="latency percentiles for the console table and --csv/--json, e.g. 50,90,95,99,99.9 "
        "(default: p50 p90 p99 p99.9), read from the HDR histograms",
    )
    p.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="also write one row per class and latency metric (count, mean, percentiles, max; ms) to FILE",
    )
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the summary (summary.json plus the chosen percentiles) to FILE",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        dest="set_values",
        help="any scenario field, e.g. --set sampling.temperature=0.7 (value read as YAML; null: the field's "
        "default); a list entry by its "
        "index: --set workload.classes.0.input_tokens=512 (or classes[0]); repeatable",
    )


def extra_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted overrides from this module's flags; `--set` comes last and wins."""
    if args.concurrency is not None and args.rate is not None:
        raise UserError(
            "--concurrency/-u and --rate: give one (closed loop with N users, or open loop at R requests/s)"
        )
    out: dict[str, Any] = {"target.api_key_env": args.api_key_env}
    if args.tokenizer:
        path = Path(args.tokenizer).expanduser()
        if not path.exists():
            raise UserError(
                f"--tokenizer {args.tokenizer}: no such file or directory; give a tokenizer.json or its directory"
            )
        out["workload.tokenizer"] = str(path.resolve())  # the file's paths are relative to it; this one to the shell
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise UserError(f"--header {item!r}: expected 'Name: value', e.g. --header 'X-Team: bench'")
        if "." in name:
            raise UserError(
                f"--header {item!r}: a header name with '.' cannot be given here; set target.headers in a scenario file"
            )
        out[f"target.headers.{name.strip()}"] = value.strip()
    for item in args.set_values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or " " in key.strip():
            raise UserError(f"--set {item!r}: expected KEY.PATH=VALUE, e.g. --set load.ramp_s=5")
        parsed = load_yaml_value(value, f"--set {key.strip()}") if value.strip() else ""
        out[key.strip()] = UNSET if parsed is None else parsed  # --set KEY=null: the field's default
    return out


def quick_scenario_data(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario of a run with no file: one class of fixed lengths, closed loop of 1 user unless told."""
    if args.input_tokens is None or args.output_tokens is None:
        raise UserError("give a scenario file, or --input-tokens N and --output-tokens N for a quick run without one")
    for flag, value in (("--input-tokens", args.input_tokens), ("--output-tokens", args.output_tokens)):
        if value <= 0:
            raise UserError(f"{flag} {value}: must be at least 1 token")
    load: dict[str, Any] = {"concurrency": 1}
    if args.duration is None and args.requests is None:
        load["requests"] = QUICK_REQUESTS
    return {
        "name": "quick",
        "description": f"quick run: {args.input_tokens} input / {args.output_tokens} output tokens",
        "load": load,
        "workload": {
            "classes": [{"name": "default", "input_tokens": args.input_tokens, "output_tokens": args.output_tokens}]
        },
    }


def load_run_scenario(args: argparse.Namespace, overrides: dict[str, Any]) -> Scenario:
    """The scenario file with the overrides, or the quick scenario; `-r` becomes load.ramp_s."""
    from harness.scenario import load_scenario
    from harness.scenario.loader import apply_overrides, validate

    if args.scenario and (args.input_tokens is not None or args.output_tokens is not None):
        raise UserError(
            f"--input-tokens/--output-tokens make a quick run without a scenario file; the lengths of "
            f"{args.scenario} come from the file: drop the file, or drop these flags"
        )

    def load(extra: dict[str, Any]) -> Scenario:
        if args.scenario:
            return load_scenario(args.scenario, {**overrides, **extra})
        return validate(Scenario, apply_overrides(quick_scenario_data(args), {**overrides, **extra}), QUICK_SOURCE)

    scenario = load({})
    spawn_rate = getattr(args, "spawn_rate", None)
    if spawn_rate is None:
        return scenario
    if not spawn_rate > 0:
        raise UserError(f"--spawn-rate/-r {spawn_rate}: must be more than 0 users per second")
    if scenario.load.concurrency is None:
        raise UserError("--spawn-rate/-r starts the users of a closed loop; this run is open loop (--rate); drop -r")
    return load({"load.ramp_s": scenario.load.ramp_for(spawn_rate)})


def chosen_percentiles(args: argparse.Namespace) -> tuple[float, ...] | None:
    from harness.results.export import parse_percentiles

    return parse_percentiles(args.percentiles) if args.percentiles else None


def write_exports(args: argparse.Namespace, run_dir: Path) -> None:
    """--csv / --json after the run; the run directory already holds everything they are made from."""
    from harness.results.export import DEFAULT_PERCENTILES, write_csv, write_json

    percentiles = chosen_percentiles(args) or DEFAULT_PERCENTILES
    for flag, path, writer in (("--csv", args.csv, write_csv), ("--json", args.json, write_json)):
        if path is None:
            continue
        try:
            writer(path, run_dir, percentiles)
        except OSError as exc:
            raise UserError(
                f"{flag} {path}: cannot write ({exc.strerror}); the run directory {run_dir} is complete"
            ) from None
        if not args.quiet:
            print(f"{flag[2:]}: {path}")
