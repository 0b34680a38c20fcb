"""`harness quality SCENARIO`: the scenario's quality check alone, against one server.

Sends the `quality:` block's prompts greedily (temperature 0, in file order), stores the outputs
(`quality.jsonl`) and prints the expected-answer accuracy. With `--baseline DIR` (an earlier
quality or run directory) the outputs are also scored against that run's and judged by the
block's gate. Exit 0: done (and the gate holds); 1: the gate failed or prompts failed; 2: bad input.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from harness.errors import UserError
from harness.results.layout import default_run_dir
from harness.results.lock import lock_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quality",
        help="run a scenario's quality: block alone (greedy outputs, accuracy, agreement)",
        description="Send the scenario's quality prompts greedily to one server, store the outputs "
        "(quality.jsonl) and score them: accuracy against expected answers and, with --baseline, "
        "agreement with an earlier run judged by the quality gate.",
    )
    p.add_argument("scenario", help="scenario YAML file with a quality: block")
    p.add_argument("--target", help="base URL (default: the scenario's target.url, else start the simulated engine)")
    p.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    p.add_argument("--prompts", help="prompts JSONL instead of the block's (relative to the current folder)")
    p.add_argument("--max-tokens", type=int, help="output budget per prompt instead of the block's")
    p.add_argument(
        "--baseline", type=Path, metavar="DIR", help="a quality or run directory whose outputs are the reference"
    )
    p.add_argument(
        "--lossless",
        action="store_true",
        help="the change vs --baseline must not alter greedy outputs (speculative decoding): any difference is an engine problem",
    )
    p.add_argument("--out", type=Path, help="output directory (default: results/<UTC time>-<scenario>-quality)")
    p.add_argument("--sim-args", default="", help='flags for the simulated engine, e.g. "--kv-cache-dtype fp8"')
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.quality import judge, load_quality_set, read_quality_run
    from harness.quality.passes import quality_pass
    from harness.run.provider import TargetProvider
    from harness.run.target import _auth_headers
    from harness.scenario.loader import load_scenario

    scenario = load_scenario(args.scenario)
    spec = scenario.quality
    if spec is None:
        raise UserError(
            f"{args.scenario}: no quality: block; add quality: {{prompts: FILE.jsonl, max_tokens: 128}} (see docs/quality.md)"
        )
    base_dir = Path(args.scenario).parent
    updates = {}
    if args.prompts:
        updates["prompts"] = str(Path(args.prompts).resolve())
    if args.max_tokens is not None:
        if args.max_tokens < 1:
            raise UserError(f"--max-tokens {args.max_tokens}: give a whole number >= 1")
        updates["max_tokens"] = args.max_tokens
    if updates:
        spec = spec.model_copy(update=updates)
    qset = load_quality_set(spec.prompts, base_dir)  # a bad file fails before anything starts
    baseline = None
    if args.baseline is not None:
        baseline = read_quality_run(args.baseline)
        if baseline is None:
            raise UserError(
                f"--baseline {args.baseline}: no quality.jsonl there; give a directory written by harness quality, run or sweep"
            )
    out = lock_dir(args.out or default_run_dir(f"{scenario.name}-quality"), "--out", "quality directory")
    # the target provider: --target, the scenario's, else the built-in simulator (one: a quality
    # pass asks one server)
    with TargetProvider(shlex.split(args.sim_args), out) as targets:
        url = targets.provide(scenario, args.target, replicas=1).url
        result = quality_pass(
            spec, base_dir, url, out, model=args.model or scenario.target.model, headers=_auth_headers(scenario)
        )
    verdict = judge(
        scenario.name,
        qset,
        baseline,
        result,
        spec.gate,
        is_baseline=baseline is None,
        lossless=args.lossless,
        confidence=spec.confidence,
    )
    from harness.quality.render import verdict_lines
    from harness.quality.runner import write_summary

    summary = {**result.summary(), "verdict": verdict.to_json()}
    write_summary(out, summary)
    if args.json:
        import json

        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(
            f"quality: {len(result.outputs)} prompts from {url} ({result.seconds:.1f} s), outputs in {out / 'quality.jsonl'}"
        )
        for line in verdict_lines(verdict, against=str(args.baseline) if baseline else None):
            print(line)
    if result.errors:  # the reason on stderr too, not only in quality.json (audit R18)
        first = next(o for o in result.outputs if o.error)
        print(
            f"error: {result.errors} of {len(result.outputs)} prompts failed (first, {first.id}: {str(first.error)[:200]}); "
            f"see {out / 'quality.jsonl'}",
            file=sys.stderr,
        )
    if result.errors or verdict.failed:
        return 1
    return 0
