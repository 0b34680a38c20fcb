"""Per-metric noise: a bootstrap of the difference from per-request records, a permutation test
over repeats; `compare_runs` turns two lists of runs into rows with verdicts."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.report import stats
from harness.report.data import RunData
from harness.report.metrics import MetricDef
from harness.report.compare_model import Options, Row


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
