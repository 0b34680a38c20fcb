"""Per-metric noise: a bootstrap of the difference from per-request records (time blocks for
latency, time slices for throughput), a permutation test over repeats, Holm's family-wise
control over the metrics of one comparison; `compare_runs` turns two lists of runs into rows
with verdicts.

A comparison tests a dozen metrics at once. Each at 95% alone, two identical runs raise some
false alarm far more often than 5% of the time; Holm's step-down keeps the chance of any false
alarm in the whole comparison at 5% (docs/reports.md has the A/A and 10%-slower figures).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.compare import stats
from harness.compare.metrics import MetricDef
from harness.compare.model import Options, Row
from harness.compare.runs import RunLike
from harness.compare.slo import meets_slo, slo_lookup
from harness.results.hdr import Hist

# ---------------------------------------------------------------- per-metric noise


class _SideData:
    """Per-request arrays of one side, computed once and shared by all metrics."""

    def __init__(self, runs: Sequence[RunLike]) -> None:
        self.runs = runs
        self.requests = [r.measured_requests() for r in runs]
        self.pooled = [q for reqs in self.requests for q in reqs]
        self.has_requests = all(r.requests for r in runs)
        self._gaps: tuple[np.ndarray, np.ndarray] | None = None
        self._gaps_known = False
        self._good: list[list[bool]] | None = None
        self._good_known = False
        blocks, first = [], 0
        for reqs in self.requests:
            ids = stats.time_blocks(reqs, first)
            blocks.append(ids)
            first = int(ids.max()) + 1 if ids.size else first
        #: each pooled request's time block (stats.time_blocks), numbered apart per run
        self.blocks = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)

    def field(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, time block) of the requests that completed with a number in `name`."""
        keep = [i for i, q in enumerate(self.pooled) if not q.get("error") and isinstance(q.get(name), (int, float))]
        return np.asarray([float(self.pooled[i][name]) for i in keep]), self.blocks[keep]

    def field_runs(self, name: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """field() per run: (values, time block) of each run's requests on their own."""
        out, first = [], 0
        for reqs in self.requests:
            keep = [i for i, q in enumerate(reqs) if not q.get("error") and isinstance(q.get(name), (int, float))]
            out.append((np.asarray([float(reqs[i][name]) for i in keep]), self.blocks[first : first + len(reqs)][keep]))
            first += len(reqs)
        return out

    def itl_gap_runs(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """itl_gaps() per run; None when a run's records lack them."""
        out, offset = [], 0
        for reqs in self.requests:
            g = stats.itl_gaps(reqs)
            if g is None:
                return None
            out.append((g[0], self.blocks[g[1] + offset]))
            offset += len(reqs)
        return out

    def itl_gaps(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(gap ms, time block) of every run's requests, pooled; None when a run's records lack them."""
        if not self._gaps_known:
            self._gaps, self._gaps_known = self._pooled_gaps(), True
        return self._gaps

    def _pooled_gaps(self) -> tuple[np.ndarray, np.ndarray] | None:
        parts = []
        offset = 0
        for reqs in self.requests:
            g = stats.itl_gaps(reqs)
            if g is None:
                return None
            parts.append((g[0], self.blocks[g[1] + offset]))  # clusters: the requests' time blocks
            offset += len(reqs)
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])) if parts else None

    def good_flags(self) -> list[list[bool]] | None:
        """Per run, per request: within its class's SLO; None when a run's scenario is unknown."""
        if not self._good_known:
            self._good, self._good_known = self._judge_good(), True
        return self._good

    def _judge_good(self) -> list[list[bool]] | None:
        flags: list[list[bool]] = []
        for run, reqs in zip(self.runs, self.requests, strict=True):
            slo_of = slo_lookup(run.scenario)
            if slo_of is None:
                return None
            flags.append([meets_slo(q, slo_of(str(q.get("class")))) for q in reqs])
        return flags


TOO_FEW = "too few requests"


#: what a noise test answers: the interval of the change, how it was estimated, its p-value
Test = tuple[tuple[float, float] | None, str, float | None]


def _rel(db: np.ndarray, dc: np.ndarray, pb: float, opts: Options, desc: str) -> Test:
    """Interval and p-value of the relative difference, in percent: each candidate draw over its
    paired baseline draw, minus one. A ratio of positive quantities, so it can never fall below
    -100% (the difference over the baseline's point estimate could, when a resample's baseline
    came out far above it)."""
    n = min(db.size, dc.size)  # a resample that drew no block is dropped: pair what both sides have
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = (dc[:n] / db[:n] - 1.0) * 100.0
    diff = diff[np.isfinite(diff)]
    if diff.size < 10:
        return None, f"{desc}: too few usable resamples", None
    lo, hi = stats.interval(diff, opts.confidence)
    return (lo, hi), desc, stats.p_value(diff)


def _run_mean_draws(
    runs: list[tuple[np.ndarray, np.ndarray]], stat: float | str, B: int, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    """The mean over runs of each run's percentile and its bootstrap draws, each run resampled on
    its own (stratified). The change column of a side with repeats is the mean of its runs'
    values, so the interval must be of that statistic too: a bootstrap of the runs' pooled
    requests estimates another one, and on the vLLM CPU build it printed TPOT p50 +10.6% with
    the interval [+26.3, +140.5]% (two runs of different speed pooled). One run: unchanged."""
    if len(runs) == 1:
        return stats.cluster_quantile_draws(runs[0], [stat], B, rng)[stat]
    each = [stats.cluster_quantile_draws(r, [stat], B, rng)[stat] for r in runs]
    n = min(d.size for _, d in each)
    return float(np.mean([pt for pt, _ in each])), np.mean([d[:n] for _, d in each], axis=0)


def _bootstrap_test(m: MetricDef, b: _SideData, c: _SideData, opts: Options, rng: np.random.Generator) -> Test:
    """Interval of the relative difference (percent of the baseline's estimate), a description
    and the two-sided p-value of 'no difference' (None without a test)."""
    B = opts.bootstrap
    stat = m.stat  # a percentile or "mean": every latency metric has one (harness.compare.metrics)
    if m.kind == "latency" and m.itl is None and m.record_field and stat is not None:
        if not (b.has_requests and c.has_requests):
            return None, "no per-request records", None
        (xb, kb), (xc, kc) = b.field(m.record_field), c.field(m.record_field)
        rb, rc = b.field_runs(m.record_field), c.field_runs(m.record_field)
        least = min(x.size for x, _ in rb + rc)  # the statistic is each run's own percentile
        if least < 8:
            return (
                None,
                f"{TOO_FEW} to resample ({xb.size}/{xc.size}; 8+ each{' run' if len(rb) + len(rc) > 2 else ''})",
                None,
            )
        if stat != "mean" and least * (1 - float(stat) / 100.0) < 1:
            need = int(np.ceil(1 / (1 - float(stat) / 100.0)))
            return (
                None,
                f"{TOO_FEW}: the p{float(stat):g} of {least} requests is their maximum; it takes {need}+ to resample it",
                None,
            )
        pb, db = _run_mean_draws(rb, stat, B, rng)
        _, dc = _run_mean_draws(rc, stat, B, rng)
        if pb == 0:
            return None, "baseline estimate is zero", None
        nb, nc = len(np.unique(kb)), len(np.unique(kc))
        each = ", each run resampled on its own" if len(rb) + len(rc) > 2 else ""
        return _rel(db, dc, pb, opts, f"bootstrap over {xb.size:,}/{xc.size:,} requests in {nb}/{nc} time blocks{each}")
    if m.kind == "latency" and m.itl and stat is not None:
        gb, gc = (b.itl_gaps(), c.itl_gaps()) if (b.has_requests and c.has_requests) else (None, None)
        runs_b, runs_c = (b.itl_gap_runs(), c.itl_gap_runs()) if gb is not None and gc is not None else (None, None)
        if gb is not None and gc is not None and runs_b is not None and runs_c is not None:
            if any(g.size == 0 for g, _ in runs_b + runs_c):
                return None, "no gaps", None
            n_gaps = max(gb[0].size, gc[0].size)
            # resampling whole blocks costs B x gaps; 500 draws place a 95 % interval's ends well enough
            B_itl = int(max(200, min(B, 500, 5e8 // max(1, n_gaps))))
            gap_b = _run_mean_draws(runs_b, stat, B_itl, rng)
            gap_c = _run_mean_draws(runs_c, stat, B_itl, rng)
            if gap_b[0] == 0 or gap_b[1].size == 0 or gap_c[1].size == 0:
                return None, "no gaps", None
            nb, nc = len(np.unique(gb[1])), len(np.unique(gc[1]))
            each = ", each run resampled on its own" if len(runs_b) + len(runs_c) > 2 else ""
            return _rel(
                gap_b[1],
                gap_c[1],
                gap_b[0],
                opts,
                f"bootstrap over {gb[0].size:,}/{gc[0].size:,} gaps in {nb}/{nc} time blocks of requests{each}",
            )
        hb = [h for r in b.runs if (h := r.hist("itl_token")) is not None]
        hc = [h for r in c.runs if (h := r.hist("itl_token")) is not None]
        if len(hb) == len(b.runs) and len(hc) == len(c.runs):  # every run has its ITL histogram
            nb = sum(r.summary.requests.completed for r in b.runs)
            nc = sum(r.summary.requests.completed for r in c.runs)
            pb, db = stats.hist_quantile_draws(_merge(hb), stat, nb, B, rng)
            _, dc = stats.hist_quantile_draws(_merge(hc), stat, nc, B, rng)
            if pb == 0:
                return None, "baseline estimate is zero", None
            return _rel(db, dc, pb, opts, f"histogram bootstrap, one sample per request ({nb:,}/{nc:,})")
        return None, "no per-request gaps or ITL histograms", None
    if m.kind == "throughput" and m.slice_quantity:
        if not (b.has_requests and c.has_requests):
            return None, "no per-request records", None
        good_b = good_c = None
        if m.slice_quantity == "good":
            good_b, good_c = b.good_flags(), c.good_flags()
            if good_b is None or good_c is None:
                return None, "SLO unknown (scenario.yaml missing)", None
        rates_b = stats.slice_rates(b.requests, m.slice_quantity, good_b)
        rates_c = stats.slice_rates(c.requests, m.slice_quantity, good_c)
        if rates_b.size < 3 or rates_c.size < 3:
            return None, "too few completions for time slices", None
        pb, db = stats.slice_mean_draws(rates_b, B, rng)
        _, dc = stats.slice_mean_draws(rates_c, B, rng)
        if pb == 0:
            return None, "baseline estimate is zero", None
        return _rel(db, dc, pb, opts, f"bootstrap over {rates_b.size}/{rates_c.size} time slices")
    if m.engine_counter:
        return _engine_test(m, b.runs, c.runs, opts, rng)
    if m.key == "error_rate":
        failed_b = sum(r.summary.requests.failed for r in b.runs)
        nb = failed_b + sum(r.summary.requests.completed for r in b.runs)
        failed_c = sum(r.summary.requests.failed for r in c.runs)
        nc = failed_c + sum(r.summary.requests.completed for r in c.runs)
        t = stats.proportion_diff_test(failed_b, nb, failed_c, nc, opts.confidence)
        return (
            (None, "no requests", None)
            if t is None
            else ((t[0] * 100, t[1] * 100), f"binomial interval over {nb:,}/{nc:,} requests", t[2])
        )
    if m.key == "goodput_pct":
        (gb_, nb_), (gc_, nc_) = good_counts(b.runs), good_counts(c.runs)
        t = stats.proportion_diff_test(gb_, nb_, gc_, nc_, opts.confidence)
        return (
            (None, "no goodput counts", None)
            if t is None
            else ((t[0] * 100, t[1] * 100), f"binomial interval over {nb_:,}/{nc_:,} requests", t[2])
        )
    return None, "no noise estimate for this metric", None


def engine_slices(run: RunLike, counter: str, denominator: str | None, slices: int = 10) -> list[tuple[float, float]]:
    """(increase of `counter`, increase of `denominator` or seconds) per time slice of the window,
    from engine_metrics.jsonl's scrapes (the last one before the window opens the first slice)."""
    rows = [r for r in (getattr(run, "engine_metrics", None) or []) if r.get("ok", True)]
    pre = [r for r in rows if r.get("phase") == "pre"]
    win = ([pre[-1]] if pre else []) + [r for r in rows if r.get("phase") == "window"]
    pts = [
        (float(r["t"]), r.get(counter), r.get(denominator) if denominator else r["t"])
        for r in win
        if isinstance(r.get("t"), (int, float))
        and isinstance(r.get(counter), (int, float))
        and (denominator is None or isinstance(r.get(denominator), (int, float)))
    ]
    if len(pts) < 4:
        return []
    k = min(slices, len(pts) - 1)
    edges = np.linspace(0, len(pts) - 1, k + 1).round().astype(int)
    out = []
    for a, b in itertools.pairwise(edges):
        if b > a:
            out.append((float(pts[b][1]) - float(pts[a][1]), float(pts[b][2]) - float(pts[a][2])))
    return out


#: a hit rate the run's summary took from another pair of counters (harness.telemetry.block: vLLM
#: looks a waiting request up again at every admission attempt, so under queueing hits/queries
#: weighs requests by their retries and the summary reads cached / prompt tokens instead); the
#: interval must be of the figure the summary reports (an H100 tune said 7% beside a 41% final)
_SUMMARY_SOURCE = {"prompt_tokens_cached": ("prompt_tokens_cached_total", "prompt_tokens_total")}


def engine_counters(m: MetricDef, run: RunLike) -> tuple[str, str | None]:
    """The counters behind engine metric `m` in `run`: the ones its summary figure came from."""
    if m.key == "prefix_hit_rate":
        pc = run.summary.engine.prefix_cache
        source = pc.hit_rate_from if pc is not None else None
        if source in _SUMMARY_SOURCE:
            return _SUMMARY_SOURCE[source]
    return m.engine_counter or "", m.engine_denominator


def _slices(m: MetricDef, runs: Sequence[RunLike]) -> list[tuple[float, float]]:
    return [x for r in runs for x in engine_slices(r, *engine_counters(m, r))]


def _engine_test(
    m: MetricDef, base: Sequence[RunLike], cand: Sequence[RunLike], opts: Options, rng: np.random.Generator
) -> Test:
    """An engine counter's noise: its increase per time slice of the window (scrape to scrape),
    resampled by slice; a share (a hit rate) as the ratio of the resampled sums."""
    sb, sc = _slices(m, base), _slices(m, cand)
    if len(sb) < 3 or len(sc) < 3:
        return None, "no engine scrapes over the window (engine_metrics.jsonl)", None
    B = opts.bootstrap

    def draws(sl: list[tuple[float, float]]) -> tuple[float, np.ndarray]:
        num, den = np.asarray([x[0] for x in sl]), np.asarray([x[1] for x in sl])
        idx = rng.integers(0, len(sl), size=(B, len(sl)))
        scale = 100.0 if m.engine_denominator else 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            point = float(num.sum() / den.sum()) * scale if den.sum() > 0 else float("nan")
            return point, num[idx].sum(axis=1) / den[idx].sum(axis=1) * scale

    pb, db = draws(sb)
    pc, dc = draws(sc)
    if not np.isfinite(pb) or not np.isfinite(pc):
        return None, "the engine counted nothing to divide by", None
    desc = f"bootstrap over {len(sb)}/{len(sc)} time slices of the engine's counters"
    if m.kind == "rate":  # a share: the difference in points
        diff = dc - db
        diff = diff[np.isfinite(diff)]
        lo, hi = stats.interval(diff, opts.confidence)
        return (lo, hi), desc, stats.p_value(diff)
    if pb == 0:
        return None, "baseline counted none", None
    return _rel(db, dc, pb, opts, desc)


def engine_interval(m: MetricDef, runs: Sequence[RunLike], opts: Options) -> tuple[float, float, float] | None:
    """(value, low, high) of an engine counter metric on one side (a hit rate in %, over time
    slices of the engine's counters), or None without scrapes: what one side's figure is worth."""
    sl = _slices(m, runs)
    if len(sl) < 3:
        return None
    num, den = np.asarray([x[0] for x in sl]), np.asarray([x[1] for x in sl])
    if den.sum() <= 0:
        return None
    scale = 100.0 if m.engine_denominator else 1.0
    idx = np.random.default_rng(opts.seed).integers(0, len(sl), size=(opts.bootstrap, len(sl)))
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = num[idx].sum(axis=1) / den[idx].sum(axis=1) * scale
    lo, hi = stats.interval(draws[np.isfinite(draws)], opts.confidence)
    return float(num.sum() / den.sum() * scale), lo, hi


def good_counts(runs: Sequence[RunLike]) -> tuple[int, int]:
    """(requests within the SLOs, requests judged) over runs, from summary.json's goodput block."""
    good = total = 0
    for r in runs:
        if "overall" in r.summary.goodput.model_fields_set:  # a summary rebuilt from requests.jsonl has none
            good += r.summary.goodput.overall.good
            total += r.summary.goodput.overall.total
    return good, total


def _zero_goodput_test(base: Sequence[RunLike], cand: Sequence[RunLike]) -> tuple[str, float] | None:
    """No request of the baseline met the SLOs: goodput has no base for a relative change, so the
    share of good requests is tested instead (one-sided Fisher exact that the candidate's is
    higher; seen on the H200: eager `transformers serve` met the chat SLOs for 0 of 23 requests,
    CUDA graphs for 65 of 65). None when the counts are missing or nothing is good either side."""
    (kb, nb), (kc, nc) = good_counts(base), good_counts(cand)
    if kb != 0 or nb == 0 or nc == 0 or kc == 0:
        return None
    p = stats.fisher_greater(kb, nb, kc, nc)
    return f"0 of {nb} requests within the SLOs vs {kc} of {nc} (one-sided Fisher exact p={p:.2g})", p


def _merge(hists: list[Hist]) -> Hist:
    if len(hists) == 1:
        return hists[0]
    vals = np.concatenate([h.values for h in hists])
    cnts = np.concatenate([h.counts for h in hists])
    order = np.argsort(vals, kind="stable")
    vals, cnts = vals[order], cnts[order]
    uniq, inv = np.unique(vals, return_inverse=True)
    return Hist(uniq, np.bincount(inv, weights=cnts).astype(np.int64))


def compare_runs(
    base: Sequence[RunLike], cand: Sequence[RunLike], metrics: list[MetricDef], opts: Options
) -> list[Row]:
    """One row per metric: the change, its interval, the noise tests and the verdict. A metric is
    beyond noise when its bootstrap p-value, Holm-adjusted over every metric of this comparison
    that has one, is below 1 - confidence (and the interval excludes zero), and, with repeats on
    both sides, every candidate run lies beyond every baseline run."""
    b, c = _SideData(base), _SideData(cand)
    pending: list[dict[str, Any]] = []
    for i, m in enumerate(metrics):
        rng = np.random.default_rng([opts.seed, i])
        vb = [v for v in (m.get(r.summary) for r in base) if v is not None]
        vc = [v for v in (m.get(r.summary) for r in cand) if v is not None]
        pct_unit = m.kind != "rate"
        unit = "%" if pct_unit else "pp"
        if not vb or not vc:
            pending.append(
                {
                    "row": Row(
                        m.key,
                        m.label,
                        m.unit,
                        m.better,
                        float(np.mean(vb)) if vb else None,
                        float(np.mean(vc)) if vc else None,
                        None,
                        unit,
                        None,
                        None,
                        [f"missing in the {'baseline' if not vb else 'candidate'}"],
                        None,
                        "n/a",
                    )
                }
            )
            continue
        mb, mc = float(np.mean(vb)), float(np.mean(vc))
        change: float | None
        if not pct_unit:
            change = mc - mb
        elif mb == 0:
            change = 0.0 if mc == 0 else None
        else:
            change = (mc - mb) / abs(mb) * 100.0
        if change is None:
            zero = _zero_goodput_test(base, cand) if m.key == "goodput_rps" else None
            row = Row(
                m.key,
                m.label,
                m.unit,
                m.better,
                mb,
                mc,
                None,
                unit,
                None,
                None,
                ["baseline is zero"] + ([zero[0]] if zero else []),
                None,
                "n/a",
            )
            pending.append({"row": row, "p": zero[1] if zero else None, "zero": zero is not None})
            continue
        worse = change if m.better == "lower" else -change
        interval, desc, p = _bootstrap_test(m, b, c, opts, rng)
        tests = [
            f"{desc}: {int(opts.confidence * 100)}% interval [{interval[0]:+.1f}, {interval[1]:+.1f}] {unit}"
            if interval is not None
            else f"no bootstrap ({desc})"
        ]
        sep: bool | None = None
        if len(vb) >= 2 and len(vc) >= 2:
            all_worse, all_better, perm_p = stats.repeats_separated(vb, vc, worse_is_higher=(m.better == "lower"))
            sep = all_worse if worse > 0 else all_better
            tests.append(
                f"repeats {len(vb)}/{len(vc)}: "
                + (
                    f"every candidate run {'worse' if worse > 0 else 'better'} than every baseline run (p={perm_p:.2g})"
                    if sep
                    else "ranges overlap"
                )
            )
        row = Row(m.key, m.label, m.unit, m.better, mb, mc, change, unit, worse, interval, tests, None, "", p_value=p)
        pending.append(
            {
                "row": row,
                "p": p,
                "sep": sep,
                "too_few": interval is None and desc.startswith(TOO_FEW),
                "threshold": opts.threshold_pct if pct_unit else opts.max_error_pp,
            }
        )
    tested = [e for e in pending if e.get("p") is not None]
    for e, adj in zip(tested, stats.holm([e["p"] for e in tested]), strict=True):
        e["row"].p_adjusted = adj
        if len(tested) > 1:
            e["row"].tests.append(f"p={e['p']:.2g}, Holm-adjusted over {len(tested)} metrics p={adj:.2g}")
        else:
            e["row"].tests.append(f"p={e['p']:.2g}")
    alpha = 1.0 - opts.confidence
    rows: list[Row] = []
    for e in pending:
        row = e["row"]
        if e.get("zero"):
            row.beyond_noise = row.p_adjusted is not None and row.p_adjusted < alpha
            row.verdict = ("improved" if row.beyond_noise else "within noise") if row.better == "higher" else "n/a"
        elif not row.verdict:
            beyond: list[bool] = []
            if row.interval is not None and row.change is not None:
                lo, hi = row.interval
                side = lo > 0 if row.change > 0 else hi < 0 if row.change < 0 else False
                beyond.append(side and row.p_adjusted is not None and row.p_adjusted < alpha)
            if e.get("sep") is not None:
                beyond.append(bool(e["sep"]))
            row.beyond_noise = all(beyond) if beyond else None
            worse = row.worse_by or 0.0
            if abs(worse) <= e["threshold"]:
                row.verdict = "ok"
            elif e["too_few"] and not beyond:
                row.verdict = "too few samples"  # the data cannot say; not counted as a regression
            elif row.beyond_noise is False:
                row.verdict = "within noise"
            else:
                row.verdict = "REGRESSION" if worse > 0 else "improved"
        rows.append(row)
    return rows
