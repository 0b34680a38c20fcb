"""Compare a candidate with a baseline, metric by metric, and decide what is a regression.

A metric regresses when BOTH hold:
1. it is worse by more than the threshold (`--max-regression`, percent; failed requests and other
   shares use `--max-error-increase`, in percentage points), and
2. the difference is beyond run-to-run noise, by every noise estimate the data allows:
   - per-request records (requests.jsonl): a bootstrap interval of the difference (latency
     percentiles by resampling requests; ITL by resampling whole requests' gaps; throughput by
     resampling time slices of the run; shares by a binomial interval) must exclude zero;
   - repeats (two or more runs per side: a folder of runs, a comma list, or a sweep's repeats):
     every candidate run must be worse than every baseline run (a permutation test).
   With neither (single runs without requests.jsonl), the threshold alone decides, and the
   output says so.

Sides: a run directory, a folder of run directories (repeats), a comma-separated list of run
directories, a sweep directory (compared cell by cell: config × scenario), or `baseline:<name>`.
Runs whose workload fingerprints differ are refused (exit 2), naming the parts that differ,
unless `force`.
"""

from pathlib import Path

from harness.compare.metrics import MetricDef
from harness.compare.noise import compare_runs
from harness.errors import UserError
from harness.report.compare_fingerprint import fingerprint_check
from harness.report.compare_model import Options, Pair, Result, Row, Side, load_side
from harness.report.compare_render import HEADERS, render_markdown, render_text
from harness.report.data import RunData
from harness.report.sweep_data import SweepData

__all__ = [
    "HEADERS",
    "Options",
    "Pair",
    "Result",
    "Row",
    "Side",
    "compare",
    "compare_runs",
    "fingerprint_check",
    "load_side",
    "render_markdown",
    "render_text",
]


# ---------------------------------------------------------------- top level


def _how(opts: Options) -> list[str]:
    return [
        f"A metric regresses when it is worse by more than {opts.threshold_pct:g}% (shares such as failed requests: "
        f"by more than {opts.max_error_pp:g} percentage point(s)) AND the difference is beyond the run-to-run noise.",
        f"Noise, per-request records: a {int(opts.confidence * 100)}% bootstrap interval of the difference ({opts.bootstrap} resamples, "
        f"at most 500 for ITL; seed {opts.seed}) "
        "must exclude zero. Latency percentiles and ITL resample time blocks of requests (requests that ran "
        "together share the same batches and stalls, so they are drawn together; without per-request gaps ITL "
        "uses the HDR histogram with one effective sample per request); "
        "throughput resamples time slices of the run; shares use a binomial interval.",
        f"Many metrics at once: the bootstrap p-values of one comparison are adjusted by Holm's step-down, so the "
        f"chance of any false alarm among all its metrics stays at {100 - int(opts.confidence * 100)}%, not that much per metric.",
        "Noise, repeats (2+ runs per side): every candidate run must also be worse than every baseline run.",
        "With no noise estimate (single runs without requests.jsonl) the threshold alone decides; a percentile "
        "that is just the largest sample (p99 of fewer than 100 requests) is marked 'too few samples' and not judged.",
        "Values with repeats are the mean of the runs.",
    ]


def _usable(side: Side) -> None:
    for r in side.runs:
        if r.summary.requests.completed == 0:
            raise UserError(
                f"{side.role} {r.path}: no completed requests (status {r.summary.status}); nothing to compare. "
                "Check the run's errors (report.md) and re-run it"
            )


def compare(
    baseline: str, candidate: str, metrics: list[MetricDef], opts: Options, baseline_root: Path | None = None
) -> Result:
    bs = load_side(baseline, "baseline", baseline_root)
    cs = load_side(candidate, "candidate", baseline_root)
    if bs.kind != cs.kind:
        raise UserError(
            f"cannot compare a {'sweep' if bs.sweep else 'run'} ({baseline}) with a {'sweep' if cs.sweep else 'run'} ({candidate}); "
            "compare a sweep with a sweep (cell by cell) or runs with runs"
        )
    result = Result(bs.describe(), cs.describe(), opts, [], _how(opts))
    if bs.sweep is None:
        _usable(bs)
        _usable(cs)
        desc, problems = fingerprint_check(bs.runs, cs.runs)
        if problems and not opts.force:
            raise UserError(
                *[f"refusing to compare: {p}" for p in problems],
                "these runs did not do the same work; pass --force to compare anyway",
            )
        if problems:
            result.warnings += [f"--force: {p}" for p in problems]
            desc += " (compared anyway: --force)"
        for r in bs.runs + cs.runs:
            result.warnings += [f"{r.path}: {n}" for n in r.notes if "missing" in n or "unreadable" in n]
        result.warnings += _not_complete("", bs.runs, cs.runs)
        result.pairs.append(Pair("", "compared", desc, compare_runs(bs.runs, cs.runs, metrics, opts)))
        result.pairs += _class_pairs("", bs.runs, cs.runs, metrics, opts)
        _add_quality(result, "", bs.runs[0].path, cs.runs[0].path)
        return result
    assert cs.sweep is not None  # the same kind as the baseline's: a sweep
    return _compare_sweeps(bs.sweep, cs.sweep, metrics, opts, result)


def _not_complete(label: str, base: list[RunData], cand: list[RunData]) -> list[str]:
    """A partial or failed run measured less (an interrupted window, a dead engine): its numbers
    are not like the other side's, so every comparison that uses one says so up front."""
    out = []
    for role, runs in (("baseline", base), ("candidate", cand)):
        for r in runs:
            st = r.summary.status
            if st != "complete":
                why = f" ({r.summary.status_reason})" if getattr(r.summary, "status_reason", None) else ""
                out.append(
                    f"{label + ': ' if label else ''}{role} {r.path} is a {st.upper()} run{why}: "
                    "its values cover only what was measured before it stopped; re-run it before trusting this comparison"
                )
    return out


def _class_pairs(
    label: str, base: list[RunData], cand: list[RunData], metrics: list[MetricDef], opts: Options
) -> list[Pair]:
    """One pair per request class asked for (`--class`), after the overall one."""
    if not opts.classes:
        return []
    names = [c for r in base for c in r.classes if c != "_all"] if "*" in opts.classes else list(opts.classes)
    known = sorted({c for r in base + cand for c in r.summary.per_class})
    unknown = [n for n in names if n not in known]
    if unknown and "*" not in opts.classes:
        raise UserError(
            f"--class {', '.join(unknown)}: no such request class in either side; classes: {', '.join(known) or 'none'}"
        )
    out: list[Pair] = []
    for name in dict.fromkeys(names):
        where = f"{label} · class {name}" if label else f"class {name}"
        bv = [v for r in base if (v := r.for_class(name)) is not None]
        cv = [v for r in cand if (v := r.for_class(name)) is not None]
        if len(bv) < len(base) or len(cv) < len(cand):
            side = "baseline" if len(bv) < len(base) else "candidate"
            out.append(
                Pair(
                    where,
                    f"missing in {side}",
                    "",
                    note=f"no class {name!r} there (classes: {', '.join(known) or 'none'})",
                )
            )
            continue
        if not any(v.summary.requests.completed for v in cv):
            out.append(Pair(where, "candidate failed", "", note=f"no completed requests of class {name}"))
            continue
        out.append(
            Pair(where, "compared", "same workload (checked for the whole run)", compare_runs(bv, cv, metrics, opts))
        )
    return out


def _compare_sweeps(bsw: SweepData, csw: SweepData, metrics: list[MetricDef], opts: Options, result: Result) -> Result:
    from harness.report.sweep_view import results as sweep_results

    rb, rc = sweep_results(bsw), sweep_results(csw)
    keys = list(rb) + [k for k in rc if k not in rb]
    refusals: list[str] = []
    pairs: list[Pair] = []
    for key in keys:
        label = f"{key[0]} × {key[1]}"
        b, c = rb.get(key), rc.get(key)
        if c is None:
            pairs.append(Pair(label, "missing in candidate", "", note="the candidate sweep has no such cell"))
            continue
        if b is None:
            pairs.append(Pair(label, "new in candidate", "", note="the baseline sweep has no such cell"))
            continue
        if not b.runs and not c.runs:
            pairs.append(Pair(label, "both failed", "", note=c.reason or ""))
            continue
        if not c.runs:
            pairs.append(Pair(label, "candidate failed", "", note=c.reason or "no results"))
            continue
        if not b.runs:
            pairs.append(Pair(label, "baseline failed", "", note="nothing to compare against"))
            continue
        desc, problems = fingerprint_check(b.runs, c.runs)
        if problems:
            if not opts.force:
                refusals += [f"{label}: {p}" for p in problems]
                continue
            result.warnings += [f"--force: {label}: {p}" for p in problems]
        result.warnings += _not_complete(label, b.runs, c.runs)
        pairs.append(Pair(label, "compared", desc, compare_runs(b.runs, c.runs, metrics, opts)))
        pairs += _class_pairs(label, b.runs, c.runs, metrics, opts)
        _add_quality(result, label, b.runs[0].path, c.runs[0].path)
    if refusals:
        raise UserError(
            *[f"refusing to compare: {r}" for r in refusals[:10]],
            *([f"... and {len(refusals) - 10} more"] if len(refusals) > 10 else []),
            "these cells did not do the same work; pass --force to compare anyway",
        )
    result.pairs = pairs
    return result


def _add_quality(result: Result, label: str, base_dir: Path, cand_dir: Path) -> None:
    """Remember where the pair's runs are; harness.quality.compare judges their outputs."""
    result.quality_dirs.append((label, base_dir, cand_dir))
