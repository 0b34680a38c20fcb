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

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.report import baselines, stats
from harness.report.data import (
    RunData,
    SweepData,
    kind_of,
    load_run,
    load_sweep,
    run_subdirs,
)
from harness.report.metrics import MetricDef, fmt_num

# ---------------------------------------------------------------- sides


@dataclass
class Side:
    spec: str
    role: str  # "baseline" | "candidate"
    paths: list[Path]
    runs: list[RunData] = field(default_factory=list)
    sweep: SweepData | None = None

    @property
    def kind(self) -> str:
        return "sweep" if self.sweep is not None else "runs"

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.paths)
        head = self.spec if self.spec.startswith(baselines.PREFIX) else where
        extra = f" → {where}" if self.spec.startswith(baselines.PREFIX) else ""
        if self.sweep is not None:
            return f"{head}{extra} (sweep {self.sweep.name}: {len(self.sweep.configs)} configs × {len(self.sweep.scenarios)} scenarios)"
        n_req = sum(r.summary.requests.completed for r in self.runs)
        runs = f"{len(self.runs)} runs" if len(self.runs) > 1 else "1 run"
        return f"{head}{extra} ({runs}, {n_req:,} requests)"


def load_side(spec: str, role: str, baseline_root: Path | None = None) -> Side:
    specs = [s for s in spec.split(",") if s.strip()]
    if not specs:
        raise UserError(f"{role}: empty; pass a run directory, a sweep directory or baseline:<name>")
    paths = [baselines.resolve(s.strip(), baseline_root) for s in specs]
    side = Side(spec=spec, role=role, paths=paths)
    for p in paths:
        if not p.is_dir():
            raise UserError(f"{role} {p}: no such directory; pass a run directory, a sweep directory or baseline:<name>")
        kind = kind_of(p)
        if kind == "sweep":
            if len(paths) > 1:
                raise UserError(f"{role} {spec}: a sweep directory cannot be listed with others; compare one sweep with one sweep")
            side.sweep = load_sweep(p)
        elif kind == "run":
            side.runs.append(load_run(p))
        elif kind == "group":
            side.runs.extend(load_run(d) for d in run_subdirs(p))
        else:
            raise UserError(f"{role} {p}: not a run directory (summary.json), a folder of run directories, or a sweep directory (index.json)")
    return side


# ---------------------------------------------------------------- options and results


@dataclass
class Options:
    threshold_pct: float = 5.0
    max_error_pp: float = 1.0
    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0
    force: bool = False
    #: also judge these request classes on their own ("*" = every class of the baseline)
    classes: tuple[str, ...] = ()


@dataclass
class Row:
    key: str
    label: str
    unit: str
    better: str
    baseline: float | None
    candidate: float | None
    change: float | None  # percent, or points for shares
    change_unit: str  # "%" | "pp"
    worse_by: float | None  # change signed so that positive = worse
    interval: tuple[float, float] | None  # interval of `change` from the per-request bootstrap
    tests: list[str]
    beyond_noise: bool | None  # None: no noise estimate was possible
    verdict: str  # ok | REGRESSION | improved | within noise | too few samples | n/a


@dataclass
class Pair:
    label: str  # "" for a run comparison; "config × scenario" in sweeps
    status: str  # compared | candidate failed | missing in candidate | baseline failed | ...
    fingerprint: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "REGRESSION"]

    @property
    def failed(self) -> bool:
        return self.status == "candidate failed"


@dataclass
class Result:
    baseline: str
    candidate: str
    options: Options
    pairs: list[Pair]
    how: list[str]
    warnings: list[str] = field(default_factory=list)
    #: (label, baseline run dir, candidate run dir) of every compared pair: where quality outputs may be
    quality_dirs: list[tuple[str, Path, Path]] = field(default_factory=list)
    #: quality verdicts where both sides hold greedy outputs, filled by harness.quality.compare
    #: (above this layer): objects with .label, .failed, .short(), .lines(), .to_json()
    quality: list[Any] = field(default_factory=list)

    @property
    def quality_failures(self) -> list[Any]:
        return [q for q in self.quality if q.failed]

    @property
    def regressions(self) -> list[tuple[Pair, Row]]:
        return [(p, r) for p in self.pairs for r in p.regressions]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions or any(p.failed for p in self.pairs) or self.quality_failures else 0

    def verdict_line(self) -> str:
        """The latency verdict, then the quality verdict beside it (when both sides have outputs)."""
        regs = self.regressions
        failed = [p for p in self.pairs if p.failed]
        if not regs and not failed:
            head = "FAIL: latency and throughput: no regression" if self.quality_failures else \
                "PASS: no regression beyond the threshold and the noise"
            return head + self.quality_line()
        parts = []
        if regs:
            names = ", ".join(f"{p.label + ': ' if p.label else ''}{r.label}" for p, r in regs[:8])
            more = f" and {len(regs) - 8} more" if len(regs) > 8 else ""
            parts.append(f"{len(regs)} regression{'s' if len(regs) != 1 else ''} ({names}{more})")
        if failed:
            parts.append(f"{len(failed)} cell{'s' if len(failed) != 1 else ''} failed in the candidate but not in the baseline ({', '.join(p.label for p in failed)})")
        return "FAIL: " + "; ".join(parts) + self.quality_line()

    def quality_line(self) -> str:
        """`; quality PASS|FAIL (...)`, empty when neither side has greedy outputs."""
        if not self.quality:
            return ""
        bad = self.quality_failures
        cells = ", ".join(f"{q.label + ': ' if q.label else ''}{q.short()}" for q in self.quality)
        return f"; quality {'FAIL' if bad else 'PASS'} ({cells})"

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "options": asdict(self.options),
            "verdict": self.verdict_line(),
            "exit_code": self.exit_code,
            "how": self.how,
            "warnings": self.warnings,
            "quality": [q.to_json() for q in self.quality],
            "pairs": [
                {"label": p.label, "status": p.status, "fingerprint": p.fingerprint, "note": p.note,
                 "rows": [asdict(r) for r in p.rows]}
                for p in self.pairs
            ],
        }


# ---------------------------------------------------------------- fingerprints


def _fp(run: RunData) -> dict[str, Any]:
    return run.fingerprint


def fingerprint_check(base: list[RunData], cand: list[RunData]) -> tuple[str, list[str]]:
    """(description, problems). Problems name the differing parts."""
    problems: list[str] = []
    for role, runs in (("baseline", base), ("candidate", cand)):
        missing = [str(r.path) for r in runs if not _fp(r).get("value")]
        if missing:
            problems.append(f"{role} has no workload fingerprint in summary.json ({', '.join(missing[:3])}): cannot tell it did the same work")
        values = {_fp(r).get("value") for r in runs if _fp(r).get("value")}
        if len(values) > 1:
            parts = _diff_parts(_fp(runs[0]), next(_fp(r) for r in runs if _fp(r).get("value") != _fp(runs[0]).get("value")))
            problems.append(f"{role} repeats did not do the same work (differ in {', '.join(parts) or 'fingerprint'})")
    if problems:
        return "unknown", problems
    fb, fc = _fp(base[0]), _fp(cand[0])
    if fb.get("value") == fc.get("value"):
        return f"fingerprints match ({fb.get('value')})", []
    parts = _diff_parts(fb, fc)
    details = []
    for p in parts:
        leaves = _scenario_diffs(base[0].scenario, cand[0].scenario, p)
        if leaves:
            details.append(f"{p} ({'; '.join(leaves)})")
        else:
            same_files = isinstance(base[0].scenario, dict) and base[0].scenario == cand[0].scenario
            hint = ("; the scenario files agree, so the tokenizer or the harness version that hashed them differs"
                    if same_files else "")
            details.append(f"{p} (hash {(fb.get('parts') or {}).get(p, '?')} vs {(fc.get('parts') or {}).get(p, '?')}{hint})")
    return f"fingerprints differ in {', '.join(parts) or 'value'}", [f"workload fingerprints differ in: {', '.join(details) or 'the overall value'}"]


#: fingerprint part -> where it lives in scenario.yaml
_PART_PATHS = {"workload": ("workload",), "sampling": ("sampling",), "load": ("load",), "warmup": ("warmup",),
               "seed": ("seed",), "api": ("target", "api")}


def _scenario_diffs(a: dict[str, Any] | None, b: dict[str, Any] | None, part: str, limit: int = 4) -> list[str]:
    """Leaf-level differences of one fingerprint part, from the runs' scenario.yaml (baseline → candidate)."""
    if not isinstance(a, dict) or not isinstance(b, dict) or part not in _PART_PATHS:
        return []

    def dig(d: Any) -> Any:
        for k in _PART_PATHS[part]:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    out: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                walk(x.get(k), y.get(k), f"{path}.{k}" if path else str(k))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (xi, yi) in enumerate(zip(x, y)):
                walk(xi, yi, f"{path}[{i}]")
        elif x != y:
            out.append(f"{path or part}: {x!r} → {y!r}")

    walk(dig(a), dig(b), ".".join(_PART_PATHS[part]))
    if len(out) > limit:
        out = out[:limit] + [f"{len(out) - limit} more"]
    return out


def _diff_parts(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    pa, pb = a.get("parts") or {}, b.get("parts") or {}
    return [k for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)]


# ---------------------------------------------------------------- per-metric noise


class _SideData:
    """Per-request arrays of one side, computed once and shared by all metrics."""

    def __init__(self, runs: list[RunData]) -> None:
        self.runs = runs
        self.requests = [r.measured_requests() for r in runs]
        self.pooled = [q for reqs in self.requests for q in reqs]
        self.has_requests = all(r.requests for r in runs)
        self._itl: dict[str, Any] = {}
        self._good: list[list[bool]] | None | bool = False

    def field(self, name: str) -> np.ndarray:
        return np.asarray([float(q[name]) for q in self.pooled if not q.get("error") and isinstance(q.get(name), (int, float))])

    def itl_gaps(self):
        if "gaps" not in self._itl:
            parts = []
            offset = 0
            for reqs in self.requests:
                g = stats.itl_gaps(reqs)
                if g is None:
                    self._itl["gaps"] = None
                    break
                parts.append((g[0], g[1] + offset))
                offset += len(reqs)
            else:
                self._itl["gaps"] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])) if parts else None
        return self._itl["gaps"]

    def good_flags(self) -> list[list[bool]] | None:
        if self._good is False:
            flags: list[list[bool]] | None = []
            for run, reqs in zip(self.runs, self.requests):
                slo_of = _slo_lookup(run)
                if slo_of is None:
                    flags = None
                    break
                flags.append([_is_good(q, slo_of(str(q.get("class")))) for q in reqs])  # type: ignore[union-attr]
            self._good = flags
        return self._good  # type: ignore[return-value]


def _slo_lookup(run: RunData):
    sc = run.scenario
    if not isinstance(sc, dict):
        return None
    base = sc.get("slo") if isinstance(sc.get("slo"), dict) else {}
    per = {}
    for c in (sc.get("workload") or {}).get("classes") or []:
        if isinstance(c, dict) and c.get("name"):
            per[str(c["name"])] = {**base, **{k: v for k, v in (c.get("slo") or {}).items() if v is not None}}
    return lambda name: per.get(name, base)


def _is_good(q: dict[str, Any], slo: dict[str, Any]) -> bool:
    if q.get("error"):
        return False
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        limit = slo.get(key)
        if limit is None:
            continue
        v = q.get(key)
        if v is None:
            if key == "tpot_ms":
                continue
            return False
        if float(v) > float(limit):
            return False
    return True


TOO_FEW = "too few requests"


def _bootstrap_test(m: MetricDef, b: _SideData, c: _SideData, opts: Options, rng: np.random.Generator) -> tuple[tuple[float, float] | None, str]:
    """Interval of the relative difference (percent of the baseline's estimate) and a description."""
    B = opts.bootstrap
    if m.kind == "latency" and m.itl is None and m.record_field:
        if not (b.has_requests and c.has_requests):
            return None, "no per-request records"
        xb, xc = b.field(m.record_field), c.field(m.record_field)
        if xb.size < 8 or xc.size < 8:
            return None, f"{TOO_FEW} to resample ({xb.size}/{xc.size}; 8+ each)"
        if m.stat != "mean" and min(xb.size, xc.size) * (1 - float(m.stat) / 100.0) < 1:  # type: ignore[arg-type]
            need = int(np.ceil(1 / (1 - float(m.stat) / 100.0)))  # type: ignore[arg-type]
            return None, f"{TOO_FEW}: the p{m.stat:g} of {min(xb.size, xc.size)} requests is their maximum; it takes {need}+ to resample it"  # type: ignore[str-format]
        if m.stat == "mean":
            pb, db = stats.mean_draws(xb, B, rng)
            pc, dc = stats.mean_draws(xc, B, rng)
        else:
            pb, db = stats.quantile_draws(xb, float(m.stat), B, rng)  # type: ignore[arg-type]
            pc, dc = stats.quantile_draws(xc, float(m.stat), B, rng)  # type: ignore[arg-type]
        if pb == 0:
            return None, "baseline estimate is zero"
        lo, hi = stats.interval((dc - db) / abs(pb) * 100.0, opts.confidence)
        return (lo, hi), f"bootstrap over {xb.size:,}/{xc.size:,} requests"
    if m.kind == "latency" and m.itl:
        gb, gc = (b.itl_gaps(), c.itl_gaps()) if (b.has_requests and c.has_requests) else (None, None)
        if gb is not None and gc is not None:
            n_gaps = max(gb[0].size, gc[0].size)
            # resampling whole requests costs B x gaps; 500 draws place a 95 % interval's ends well enough
            B_itl = int(max(200, min(B, 500, 5e8 // max(1, n_gaps))))
            rb = stats.cluster_quantile_draws(gb, [m.stat], B_itl, rng)[m.stat]  # type: ignore[list-item]
            rc = stats.cluster_quantile_draws(gc, [m.stat], B_itl, rng)[m.stat]  # type: ignore[list-item]
            if rb[0] == 0 or rb[1].size == 0 or rc[1].size == 0:
                return None, "no gaps"
            # a resample that drew no request at all is dropped, so the sides can differ in length
            # (likely with a handful of requests): pair the draws that both have
            n = min(rb[1].size, rc[1].size)
            lo, hi = stats.interval((rc[1][:n] - rb[1][:n]) / abs(rb[0]) * 100.0, opts.confidence)
            return (lo, hi), f"bootstrap by request over {gb[0].size:,}/{gc[0].size:,} gaps"
        hb = [r.hist("itl_token") for r in b.runs]
        hc = [r.hist("itl_token") for r in c.runs]
        if all(h is not None for h in hb + hc):
            nb = sum(r.summary.requests.completed for r in b.runs)
            nc = sum(r.summary.requests.completed for r in c.runs)
            hb0 = _merge(hb)  # type: ignore[arg-type]
            hc0 = _merge(hc)  # type: ignore[arg-type]
            pb, db = stats.hist_quantile_draws(hb0, m.stat, nb, B, rng)  # type: ignore[arg-type]
            _, dc = stats.hist_quantile_draws(hc0, m.stat, nc, B, rng)  # type: ignore[arg-type]
            if pb == 0:
                return None, "baseline estimate is zero"
            lo, hi = stats.interval((dc - db) / abs(pb) * 100.0, opts.confidence)
            return (lo, hi), f"histogram bootstrap, one sample per request ({nb:,}/{nc:,})"
        return None, "no per-request gaps or ITL histograms"
    if m.kind == "throughput" and m.slice_quantity:
        if not (b.has_requests and c.has_requests):
            return None, "no per-request records"
        good_b = good_c = None
        if m.slice_quantity == "good":
            good_b, good_c = b.good_flags(), c.good_flags()
            if good_b is None or good_c is None:
                return None, "SLO unknown (scenario.yaml missing)"
        rb = stats.slice_rates(b.requests, m.slice_quantity, good_b)
        rc = stats.slice_rates(c.requests, m.slice_quantity, good_c)
        if rb.size < 3 or rc.size < 3:
            return None, "too few completions for time slices"
        pb, db = stats.slice_mean_draws(rb, B, rng)
        _, dc = stats.slice_mean_draws(rc, B, rng)
        if pb == 0:
            return None, "baseline estimate is zero"
        lo, hi = stats.interval((dc - db) / abs(pb) * 100.0, opts.confidence)
        return (lo, hi), f"bootstrap over {rb.size}/{rc.size} time slices"
    if m.key == "error_rate":
        kb = sum(r.summary.requests.failed for r in b.runs)
        nb = kb + sum(r.summary.requests.completed for r in b.runs)
        kc = sum(r.summary.requests.failed for r in c.runs)
        nc = kc + sum(r.summary.requests.completed for r in c.runs)
        iv = stats.proportion_diff_interval(kb, nb, kc, nc, opts.confidence)
        return (None, "no requests") if iv is None else ((iv[0] * 100, iv[1] * 100), f"binomial interval over {nb:,}/{nc:,} requests")
    if m.key == "goodput_pct":
        def counts(runs: list[RunData]) -> tuple[int, int]:
            good = total = 0
            for r in runs:
                o = r.summary.goodput.get("overall") if isinstance(r.summary.goodput, dict) else None
                if isinstance(o, dict) and isinstance(o.get("good"), (int, float)) and isinstance(o.get("total"), (int, float)):
                    good += int(o["good"])
                    total += int(o["total"])
            return good, total
        (gb_, nb_), (gc_, nc_) = counts(b.runs), counts(c.runs)
        iv = stats.proportion_diff_interval(gb_, nb_, gc_, nc_, opts.confidence)
        return (None, "no goodput counts") if iv is None else ((iv[0] * 100, iv[1] * 100), f"binomial interval over {nb_:,}/{nc_:,} requests")
    return None, "no noise estimate for this metric"


def _merge(hists: list[Any]) -> Any:
    from harness.report.hdr import Hist

    if len(hists) == 1:
        return hists[0]
    vals = np.concatenate([h.values for h in hists])
    cnts = np.concatenate([h.counts for h in hists])
    order = np.argsort(vals, kind="stable")
    vals, cnts = vals[order], cnts[order]
    uniq, inv = np.unique(vals, return_inverse=True)
    return Hist(uniq, np.bincount(inv, weights=cnts).astype(np.int64))


def compare_runs(base: list[RunData], cand: list[RunData], metrics: list[MetricDef], opts: Options) -> list[Row]:
    b, c = _SideData(base), _SideData(cand)
    rows: list[Row] = []
    for i, m in enumerate(metrics):
        rng = np.random.default_rng([opts.seed, i])
        vb = [v for v in (m.get(r.summary) for r in base) if v is not None]
        vc = [v for v in (m.get(r.summary) for r in cand) if v is not None]
        pct_unit = m.kind != "rate"
        unit = "%" if pct_unit else "pp"
        if not vb or not vc:
            rows.append(Row(m.key, m.label, m.unit, m.better, float(np.mean(vb)) if vb else None, float(np.mean(vc)) if vc else None,
                            None, unit, None, None, [f"missing in the {'baseline' if not vb else 'candidate'}"], None, "n/a"))
            continue
        mb, mc = float(np.mean(vb)), float(np.mean(vc))
        if pct_unit:
            if mb == 0:
                change = 0.0 if mc == 0 else None
            else:
                change = (mc - mb) / abs(mb) * 100.0
        else:
            change = mc - mb
        if change is None:
            rows.append(Row(m.key, m.label, m.unit, m.better, mb, mc, None, unit, None, None, ["baseline is zero"], None, "n/a"))
            continue
        worse = change if m.better == "lower" else -change
        tests: list[str] = []
        beyond: list[bool] = []
        interval, desc = _bootstrap_test(m, b, c, opts, rng)
        if interval is not None:
            lo, hi = interval
            tests.append(f"{desc}: {int(opts.confidence * 100)}% interval [{lo:+.1f}, {hi:+.1f}] {unit}")
            beyond.append(lo > 0 if change > 0 else hi < 0 if change < 0 else False)
        else:
            tests.append(f"no bootstrap ({desc})")
        if len(vb) >= 2 and len(vc) >= 2:
            all_worse, all_better, p = stats.repeats_separated(vb, vc, worse_is_higher=(m.better == "lower"))
            sep = all_worse if worse > 0 else all_better
            tests.append(f"repeats {len(vb)}/{len(vc)}: " + (f"every candidate run {'worse' if worse > 0 else 'better'} than every baseline run (p={p:.2g})" if sep else "ranges overlap"))
            beyond.append(sep)
        beyond_noise = all(beyond) if beyond else None
        threshold = opts.threshold_pct if pct_unit else opts.max_error_pp
        too_few = interval is None and desc.startswith(TOO_FEW)
        if abs(worse) <= threshold:
            verdict = "ok"
        elif too_few and not beyond:
            verdict = "too few samples"  # the data cannot say; not counted as a regression
        elif beyond_noise is False:
            verdict = "within noise"
        else:
            verdict = "REGRESSION" if worse > 0 else "improved"
        rows.append(Row(m.key, m.label, m.unit, m.better, mb, mc, change, unit, worse, interval, tests, beyond_noise, verdict))
    return rows


# ---------------------------------------------------------------- top level


def _how(opts: Options) -> list[str]:
    return [
        f"A metric regresses when it is worse by more than {opts.threshold_pct:g}% (shares such as failed requests: "
        f"by more than {opts.max_error_pp:g} percentage point(s)) AND the difference is beyond the run-to-run noise.",
        f"Noise, per-request records: a {int(opts.confidence * 100)}% bootstrap interval of the difference ({opts.bootstrap} resamples, "
        f"at most 500 for ITL; seed {opts.seed}) "
        "must exclude zero. Latency percentiles resample requests; ITL resamples whole requests' gaps "
        "(or, without per-request gaps, the HDR histogram with one effective sample per request); "
        "throughput resamples time slices of the run; shares use a binomial interval.",
        "Noise, repeats (2+ runs per side): every candidate run must also be worse than every baseline run.",
        "With no noise estimate (single runs without requests.jsonl) the threshold alone decides; a percentile "
        "that is just the largest sample (p99 of fewer than 100 requests) is marked 'too few samples' and not judged.",
        "Values with repeats are the mean of the runs.",
    ]


def _usable(side: Side) -> None:
    for r in side.runs:
        if r.summary.requests.completed == 0:
            raise UserError(f"{side.role} {r.path}: no completed requests (status {r.summary.status}); nothing to compare. "
                            "Check the run's errors (report.md) and re-run it")


def compare(baseline: str, candidate: str, metrics: list[MetricDef], opts: Options, baseline_root: Path | None = None) -> Result:
    bs = load_side(baseline, "baseline", baseline_root)
    cs = load_side(candidate, "candidate", baseline_root)
    if bs.kind != cs.kind:
        raise UserError(f"cannot compare a {'sweep' if bs.sweep else 'run'} ({baseline}) with a {'sweep' if cs.sweep else 'run'} ({candidate}); "
                        "compare a sweep with a sweep (cell by cell) or runs with runs")
    result = Result(bs.describe(), cs.describe(), opts, [], _how(opts))
    if bs.sweep is None:
        _usable(bs)
        _usable(cs)
        desc, problems = fingerprint_check(bs.runs, cs.runs)
        if problems and not opts.force:
            raise UserError(*[f"refusing to compare: {p}" for p in problems],
                            "these runs did not do the same work; pass --force to compare anyway")
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
    return _compare_sweeps(bs.sweep, cs.sweep, metrics, opts, result)  # type: ignore[arg-type]


def _not_complete(label: str, base: list[RunData], cand: list[RunData]) -> list[str]:
    """A partial or failed run measured less (an interrupted window, a dead engine): its numbers
    are not like the other side's, so every comparison that uses one says so up front."""
    out = []
    for role, runs in (("baseline", base), ("candidate", cand)):
        for r in runs:
            st = r.summary.status
            if st != "complete":
                why = f" ({r.summary.status_reason})" if getattr(r.summary, "status_reason", None) else ""
                out.append(f"{label + ': ' if label else ''}{role} {r.path} is a {st.upper()} run{why}: "
                           "its values cover only what was measured before it stopped; re-run it before trusting this comparison")
    return out


def _class_pairs(label: str, base: list[RunData], cand: list[RunData], metrics: list[MetricDef], opts: Options) -> list[Pair]:
    """One pair per request class asked for (`--class`), after the overall one."""
    if not opts.classes:
        return []
    names = [c for r in base for c in r.classes if c != "_all"] if "*" in opts.classes else list(opts.classes)
    known = sorted({c for r in base + cand for c in r.summary.per_class})
    unknown = [n for n in names if n not in known]
    if unknown and "*" not in opts.classes:
        raise UserError(f"--class {', '.join(unknown)}: no such request class in either side; classes: {', '.join(known) or 'none'}")
    out: list[Pair] = []
    for name in dict.fromkeys(names):
        where = f"{label} · class {name}" if label else f"class {name}"
        bv = [r.for_class(name) for r in base]
        cv = [r.for_class(name) for r in cand]
        if any(v is None for v in bv) or any(v is None for v in cv):
            side = "baseline" if any(v is None for v in bv) else "candidate"
            out.append(Pair(where, f"missing in {side}", "", note=f"no class {name!r} there (classes: {', '.join(known) or 'none'})"))
            continue
        if not any(v.summary.requests.completed for v in cv):  # type: ignore[union-attr]
            out.append(Pair(where, "candidate failed", "", note=f"no completed requests of class {name}"))
            continue
        out.append(Pair(where, "compared", "same workload (checked for the whole run)",
                        compare_runs(bv, cv, metrics, opts)))  # type: ignore[arg-type]
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
        raise UserError(*[f"refusing to compare: {r}" for r in refusals[:10]],
                        *([f"... and {len(refusals) - 10} more"] if len(refusals) > 10 else []),
                        "these cells did not do the same work; pass --force to compare anyway")
    result.pairs = pairs
    return result


def _add_quality(result: Result, label: str, base_dir: Path, cand_dir: Path) -> None:
    """Remember where the pair's runs are; harness.quality.compare judges their outputs."""
    result.quality_dirs.append((label, base_dir, cand_dir))


# ---------------------------------------------------------------- rendering


def _fmt_val(v: float | None, unit: str) -> str:
    return fmt_num(v)


def _fmt_change(r: Row) -> str:
    if r.change is None:
        return "—"
    return f"{r.change:+.1f} {r.change_unit}"


def _fmt_interval(r: Row) -> str:
    if r.interval is None:
        return "—"
    return f"[{r.interval[0]:+.1f}, {r.interval[1]:+.1f}]"


def _table_rows(p: Pair) -> list[list[str]]:
    return [[f"{r.label} ({r.unit})", _fmt_val(r.baseline, r.unit), _fmt_val(r.candidate, r.unit), _fmt_change(r), _fmt_interval(r), r.verdict]
            for r in p.rows]


HEADERS = ["metric", "baseline", "candidate", "change", "95% interval", "verdict"]


def render_text(res: Result, verbose: bool = False) -> str:
    out = [
        f"baseline : {res.baseline}",
        f"candidate: {res.candidate}",
        f"threshold: worse by more than {res.options.threshold_pct:g}% (shares such as failed requests: {res.options.max_error_pp:g} percentage point(s)), and beyond noise",
    ]
    for w in res.warnings:
        out.append(f"warning  : {w}")
    for p in res.pairs:
        out.append("")
        if p.label:
            out.append(f"== {p.label}: {p.status}" + (f" ({p.note})" if p.note else ""))
        if p.status != "compared":
            continue
        out.append(f"workload : {p.fingerprint}")
        headers = list(HEADERS)
        headers[4] = f"{int(res.options.confidence * 100)}% interval"
        rows = [headers] + _table_rows(p)
        widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
        for j, row in enumerate(rows):
            out.append("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) if i < 5 else cell for i, cell in enumerate(row)).rstrip())
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        if verbose or any(r.verdict not in ("ok", "n/a") for r in p.rows):
            for r in p.rows:
                if verbose or r.verdict not in ("ok", "n/a"):
                    out.append(f"  {r.label}: {r.verdict}; " + "; ".join(r.tests))
    for q in res.quality:
        out.append("")
        out += q.lines()
    out.append("")
    out.append("How this was decided:")
    out += [f"  - {h}" for h in res.how]
    if res.quality:
        out.append("  - quality: the candidate's greedy outputs scored against the baseline's by the quality block's gate (exit 1 when it fails)")
    out.append("")
    out.append(f"{res.verdict_line()} (exit {res.exit_code})")
    return "\n".join(out) + "\n"


def render_markdown(res: Result, heading_level: int = 3) -> str:
    h = "#" * heading_level
    icon = "✅" if res.exit_code == 0 else "❌"
    out = [f"{h} {icon} Comparison with the baseline", "", f"**{res.verdict_line()}**", "",
           f"- baseline: `{res.baseline}`", f"- candidate: `{res.candidate}`",
           f"- threshold: worse by more than {res.options.threshold_pct:g}% (shares such as failed requests: {res.options.max_error_pp:g} percentage point(s)), and beyond noise", ""]
    for w in res.warnings:
        out.append(f"> ⚠️ {w}")
    if res.warnings:
        out.append("")
    mark = {"REGRESSION": "❌ REGRESSION", "improved": "🟢 improved", "within noise": "〰️ within noise", "too few samples": "❔ too few samples", "ok": "ok", "n/a": "n/a"}
    cells = [p for p in res.pairs if p.label]
    if cells:
        out += ["| cell | status | verdict | changes beyond the threshold |", "|:---|:---|:---|:---|"]
        for p in cells:
            moved = [f"{r.label} {_fmt_change(r)} ({r.verdict})" for r in p.rows if r.verdict not in ("ok", "n/a")]
            verdict = "❌ failed" if p.failed else "❌ regression" if p.regressions else "✅" if p.status == "compared" else "—"
            status = p.status + (f": {p.note}" if p.note and p.status != "compared" else "")
            out.append(f"| {p.label} | {status.replace('|', '/')} | {verdict} | {'; '.join(moved) or '—'} |")
        out += ["", "<details><summary>Per-cell tables</summary>", ""]
    for p in res.pairs:
        if p.status != "compared":
            continue
        if p.label:
            out += [f"**{p.label}**", ""]
        out.append(f"_{p.fingerprint}_")
        out.append("")
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|:---|---:|---:|---:|---:|:---|")
        for row, r in zip(_table_rows(p), p.rows):
            row[-1] = mark.get(r.verdict, r.verdict)
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        out.append("")
    if cells:
        out += ["</details>", ""]
    for q in res.quality:
        out += ["```"] + q.lines() + ["```", ""]
    out += ["<details><summary>How this was decided</summary>", ""] + [f"- {x}" for x in res.how]
    details = [f"- {p.label + ': ' if p.label else ''}{r.label}: {'; '.join(r.tests)}" for p in res.pairs for r in p.rows if r.verdict != "ok"]
    if details:
        out += ["", "Noise tests of the metrics that moved:", ""] + details
    out += ["", "</details>", ""]
    return "\n".join(out)
