"""Decide whether a candidate beats the current best, the way the guide entry of its step does.

Every judgement starts from the same comparison `harness compare` makes of the same cells: the
default metric family (TTFT, ITL, TPOT, E2E, req/s, tok/s, goodput, failed requests), the same
noise tests and Holm's control over that family (harness.compare), at the tune file's
threshold. So a step's "TTFT p50 -45.8% beyond noise" is exactly what `harness compare CUR CAND
--max-regression T%` prints for those cells, and a decision `harness compare` would contradict
cannot happen.

A step then reads that comparison through its Objective, which names what its guide entry says
to compare (prefix caching: TTFT p50 and p99; the token budget: ITL and TTFT; speculation: ITL
and requests/s; ...), and a prior, which says which side the guides put the burden of proof on:

- **the candidate is the default** (a feature the guides keep on: prefix caching, CUDA graphs,
  the engine's chunked prefill; or a return to the engine's default): it is taken unless it is
  worse beyond noise on the step's metrics, the goodput guard or failed requests ("no measured
  harm");
- **the candidate leaves the default** (or moves a value the guides do not prefer): it is taken
  only with a measured gain, some target or goodput better beyond noise, and no harm.

Goodput under the SLOs is the guard of every step: no change that loses goodput beyond noise is
taken. Without an SLO, goodput is plain throughput (requests/s) and the latency steps are judged
on their latency metrics. A judgement that neither rule can settle, because a difference beyond
the threshold is not (yet) beyond noise, is `undecided`: the step buys evidence (another
interleaved repeat of both sides, harness.tune.steps.base.settle) before it calls a tie. In a
closed loop whose time slices are shorter than a request, a goodput difference the slices cannot
decide is decided by the per-request goodput of Little's law (harness.compare.closed_loop) when
it agrees with the measured change. A tie is broken by the capacity under the SLOs when
capacity levels were measured; otherwise the prior's side stays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare import METRICS, Options, Row, compare_runs, resolve
from harness.compare.closed_loop import per_request_goodput
from harness.compare.metrics import DEFAULT_COMPARE, ENGINE
from harness.report.data import load_run
from harness.tune.measure import Measurement

#: the failed-request share is harm in every step, whatever its objective
ALWAYS_HARM = ("error_rate",)
#: metrics the guard reads: goodput under the SLOs, or plain requests/s without an SLO
GOODPUT, THROUGHPUT = "goodput_rps", "rps"


@dataclass(frozen=True)
class Objective:
    """What a step's guide entry says to compare."""

    #: compare metric keys whose improvement beyond noise is a gain (and whose loss is harm)
    targets: tuple[str, ...]
    #: targets the step accepts to lose as the guide's named trade (the token budget's TTFT); the
    #: step weighs them itself, the judge does not count them as harm
    costs: tuple[str, ...] = ()
    #: whether goodput (or req/s) counts as a gain too; it is always the guard against harm
    goodput_gains: bool = True
    #: metrics that may not get worse beyond noise but whose improvement is no gain of this
    #: judgement (the token budget's TTFT when two budgets are weighed on ITL)
    guards: tuple[str, ...] = ()


GOODPUT_ONLY = Objective(targets=())


@dataclass
class Comparison:
    """Incumbent vs candidate per scenario: the rows `harness compare` gives for the same cells."""

    rows: dict[str, dict[str, Row]]
    guard: str
    threshold_pct: float
    max_error_pp: float
    #: scenario -> the per-request (Little's law) test where it decided the guard
    closed_loop: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_dirs: dict[str, list[Path]] = field(default_factory=dict)
    cand_dirs: dict[str, list[Path]] = field(default_factory=dict)

    def direction(self, key: str) -> str:
        """'worse' when any scenario is worse beyond noise, else 'better' when any is better, else 'same'."""
        dirs = [self._dir(s, key) for s in self.rows]
        return "worse" if "worse" in dirs else "better" if "better" in dirs else "same"

    def _dir(self, scenario: str, key: str) -> str:
        loop = self.closed_loop.get(scenario)
        if key == self.guard and loop is not None:
            return loop["direction"]
        row = self.rows[scenario].get(key)
        return row.direction if row is not None else "same"

    def undecided(self, key: str, side: str | None = None) -> bool:
        """A difference the data cannot settle yet on some scenario: beyond the threshold but not
        beyond noise, or too few samples to say (on `side`: 'worse' or 'better' only). More
        evidence could decide it either way; a change within the threshold is settled already."""
        for s, rows in self.rows.items():
            row = rows.get(key)
            if row is None or self._dir(s, key) != "same" or row.worse_by is None:
                continue
            if row.verdict in ("within noise", "too few samples") and (
                side is None or (side == "worse") == (row.worse_by > 0)
            ):
                return True
        return False

    def show(self, key: str) -> str:
        """'TTFT p50 118 -> 64 ms (-45.8%, 95% interval [-56.4, -34.9]%, improved)' per scenario."""
        parts = []
        for s, rows in self.rows.items():
            row = rows.get(key)
            if row is None:
                continue
            where = f"{s}: " if len(self.rows) > 1 else ""
            parts.append(where + show_row(row, self.closed_loop.get(s) if key == self.guard else None))
        return "; ".join(parts)

    def moved(self) -> list[tuple[str, Row]]:
        """Every (scenario, row) beyond noise, improvements and regressions alike."""
        return [(s, r) for s, rows in self.rows.items() for r in rows.values() if r.decided]


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3g}"


def show_row(row: Row, loop: dict[str, Any] | None = None) -> str:
    unit = f" {row.unit}" if row.unit and row.unit != "%" else row.unit
    head = f"{row.label} {_num(row.baseline, row.unit)} -> {_num(row.candidate, row.unit)}{unit}"
    if row.change is None:
        zero = next((t for t in row.tests if "Fisher" in t), None)
        return f"{head} ({zero}; {row.verdict})" if zero else f"{head} ({row.verdict})"
    bits = [f"{row.change:+.1f}{row.change_unit}"]
    if row.interval is not None:
        bits.append(f"95% interval [{row.interval[0]:+.1f}, {row.interval[1]:+.1f}]{row.change_unit}")
    verdict = row.verdict
    if loop is not None:
        verdict = f"{row.verdict} by time slices; {loop['direction'] if loop['direction'] != 'same' else 'a tie'} by {loop['test']}"
    return f"{head} ({', '.join(bits)}, {verdict})"


def guard_key(m: Measurement) -> str:
    """goodput_rps when the runs' scenarios set an SLO, else rps: without one every completed
    request counts as good, goodput is plain throughput and the reason says so."""
    for scenario in m.scenarios:
        for d in m.run_dirs(scenario)[:1]:
            return GOODPUT if _has_slo(d) else THROUGHPUT
    return GOODPUT if m.metric("goodput_req_per_s") is not None else THROUGHPUT


_SLO: dict[str, bool] = {}


def _has_slo(run_dir: Path) -> bool:
    key = str(run_dir)
    if key not in _SLO:
        import yaml

        from harness.compare.slo import has_slo

        try:
            _SLO[key] = has_slo(yaml.safe_load((run_dir / "scenario.yaml").read_text()))
        except (OSError, yaml.YAMLError):
            _SLO[key] = True  # unknown: judge by goodput as before
    return _SLO[key]


def guard_name(key: str) -> str:
    return "goodput" if key == GOODPUT else "requests/s (no SLO: goodput is plain throughput)"


#: (base dirs, cand dirs, threshold) -> rows: a judgement re-asked after nothing changed is free
_CACHE: dict[tuple[Any, ...], tuple[dict[str, Row], dict[str, Any] | None]] = {}


def options(threshold_pct: float) -> Options:
    """`harness compare`'s defaults with the tune's threshold (= `--max-regression T%`)."""
    return Options(threshold_pct=threshold_pct)


def compare_measurements(incumbent: Measurement, candidate: Measurement, threshold_pct: float) -> Comparison:
    opts = options(threshold_pct)
    guard = guard_key(incumbent)
    metrics = resolve(None)
    cmp = Comparison({}, guard, threshold_pct, opts.max_error_pp)
    for scenario in incumbent.scenarios:
        bdirs, cdirs = incumbent.run_dirs(scenario), candidate.run_dirs(scenario)
        if not bdirs or not cdirs:
            continue
        key = (tuple(map(str, bdirs)), tuple(map(str, cdirs)), threshold_pct)
        if key not in _CACHE:
            base = [load_run(p) for p in bdirs]
            cand = [load_run(p) for p in cdirs]
            rows = {r.key: r for r in compare_runs(base, cand, metrics, opts)}
            if guard not in rows:
                (rows[guard],) = compare_runs(base, cand, [METRICS[guard]], opts)
            # the engine's counters (preemptions, prefix hits), a family of their own so the
            # default family's rows stay exactly `harness compare`'s
            rows.update({r.key: r for r in compare_runs(base, cand, [METRICS[k] for k in ENGINE], opts)})
            _CACHE[key] = rows, (_closed_loop(rows[guard], base, cand, opts) if guard == GOODPUT else None)
        rows, loop = _CACHE[key]
        if loop is not None:
            cmp.closed_loop[scenario] = loop
        cmp.rows[scenario] = dict(rows)
        cmp.base_dirs[scenario], cmp.cand_dirs[scenario] = bdirs, cdirs
    return cmp


def _closed_loop(row: Row, base: list, cand: list, opts: Options) -> dict[str, Any] | None:
    """A goodput change beyond the threshold that the time slices cannot decide, in a closed
    loop whose slices are shorter than a request: decided by the per-request goodput when it
    and the measured change move beyond the threshold the same way and its interval excludes zero."""
    if row.verdict != "within noise" or row.change is None or abs(row.change) <= opts.threshold_pct:
        return None
    loop = per_request_goodput(base, cand, opts.confidence)
    if loop is None:
        return None
    lo, hi = loop["interval"]
    lch, t = loop["change_pct"], opts.threshold_pct
    direction = "same"
    if row.change > t and lch > t and lo > 0:
        direction = "better"
    elif row.change < -t and lch < -t and hi < 0:
        direction = "worse"
    return {"direction": direction, "test": loop["test"]}


@dataclass
class Judgement:
    verdict: str  # better | worse | tie | undecided | failed
    rule: str  # which rule decided: prior | gain | harm | capacity | tie | failed | quality (steps.base.quality_guard)
    why: str  # the rule in words, with the numbers that decided
    cmp: Comparison | None = None
    objective: Objective = GOODPUT_ONLY
    #: extra interleaved repeats of both sides bought to decide it (harness.tune.steps.base.settle)
    evidence: int = 0
    evidence_note: str = ""
    #: the incumbent's cells this judgement read: a later comparison in the same step may buy the
    #: incumbent more repeats, so its own row lists more cells than this candidate was judged against
    against: list[str] = field(default_factory=list)

    @property
    def by(self) -> str:  # tune.json's vs_current.by
        return self.rule

    @property
    def keys(self) -> list[str]:
        if self.cmp is None:
            return []
        o = self.objective
        return list(dict.fromkeys([*o.targets, *o.costs, *o.guards, self.cmp.guard]))

    def text(self) -> str:
        """The step's metrics and the guard with their intervals, then the rule that decided."""
        if self.cmp is None:
            return self.why
        nums = "; ".join(self.cmp.show(k) for k in self.keys if self.cmp.show(k))
        out = f"{nums}: {self.why}" if nums else self.why
        aside = self.aside()
        out += f". Also beyond noise, not weighed by this step: {aside}" if aside else ""
        return out + (f". {self.evidence_note.rstrip('.')}" if self.evidence_note else "")

    def aside(self) -> str:
        """Every metric of `harness compare`'s default family that moved beyond noise but is not
        among this step's metrics ('TTFT p50 +5.9% [+3.5, +8.3]% REGRESSION'): the step may accept
        the trade, but its reason must not hide what `harness compare` of the same cells prints
        (a budget of 512 tokens that cut ITL p99 while ITL p50 rose +480% read as a clean win)."""
        if self.cmp is None:
            return ""
        shown = set(self.keys)
        if self.cmp.guard == THROUGHPUT:  # without an SLO goodput is requests/s, shown as the guard already
            shown |= {GOODPUT, "goodput_pct"}
        parts = []
        for scenario, row in self.cmp.moved():
            if row.key in shown or row.key not in DEFAULT_COMPARE or row.change is None:
                continue
            where = f"{scenario}: " if len(self.cmp.rows) > 1 else ""
            iv = (
                f" [{row.interval[0]:+.1f}, {row.interval[1]:+.1f}]{row.change_unit}"
                if row.interval is not None
                else ""
            )
            parts.append(f"{where}{row.label} {row.change:+.1f}{row.change_unit}{iv} {row.verdict}")
        return ", ".join(parts)

    @property
    def per_scenario(self) -> dict[str, dict[str, Any]]:
        """tune.json's per-scenario record: the guard's change (as before), plus every metric of
        the comparison with its verdict, interval and adjusted p-value."""
        if self.cmp is None:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for s, rows in self.cmp.rows.items():
            g = rows.get(self.cmp.guard)
            loop = self.cmp.closed_loop.get(s)
            out[s] = {
                "metric": self.cmp.guard,
                "baseline": g.baseline if g else None,
                "candidate": g.candidate if g else None,
                "change_pct": g.change if g else None,
                "interval": list(g.interval) if g and g.interval else None,
                "tests": list(g.tests) + ([loop["test"]] if loop else []) if g else [],
                "compare_verdict": g.verdict if g else None,
                "verdict": self.cmp._dir(s, self.cmp.guard),
                **({"closed_loop": loop["test"]} if loop else {}),
                "metrics": {
                    k: {
                        "label": r.label,
                        "baseline": r.baseline,
                        "candidate": r.candidate,
                        "change": r.change,
                        "unit": r.change_unit,
                        "interval": list(r.interval) if r.interval else None,
                        "verdict": r.verdict,
                        "p_adjusted": r.p_adjusted,
                    }
                    for k, r in rows.items()
                },
            }
        return out


def judge(
    incumbent: Measurement,
    candidate: Measurement,
    threshold_pct: float = 5.0,
    objective: Objective = GOODPUT_ONLY,
    prior: str = "incumbent",
    settled: bool = False,
) -> Judgement:
    """`prior`: 'candidate' when the candidate is the side the guides keep (a default-on feature,
    the engine's default): taken unless worse beyond noise. 'incumbent': the candidate needs a
    gain beyond noise. `settled`: no more evidence will come, so an unsettled difference is no
    measured difference (never 'undecided')."""
    if not candidate.ok:
        return Judgement(
            "failed",
            "failed",
            f"the candidate has no complete run: {candidate.failure or 'did not run'}",
            None,
            objective,
        )
    if not incumbent.ok:
        return Judgement(
            "better",
            "failed",
            f"the current flags have no complete run: {incumbent.failure or 'did not run'}",
            None,
            objective,
        )
    cmp = compare_measurements(incumbent, candidate, threshold_pct)
    return decide(cmp, objective, prior, incumbent, candidate, settled)


def decide(
    cmp: Comparison,
    objective: Objective,
    prior: str,
    incumbent: Measurement | None = None,
    candidate: Measurement | None = None,
    settled: bool = False,
) -> Judgement:
    guard = cmp.guard
    targets = [k for k in objective.targets if k != guard]
    harm_keys = (
        [k for k in targets if k not in objective.costs]
        + [k for k in objective.guards if k != guard]
        + [guard, *ALWAYS_HARM]
    )
    gain_keys = targets + ([guard] if objective.goodput_gains else [])
    harm = [k for k in dict.fromkeys(harm_keys) if cmp.direction(k) == "worse"]
    gains = [k for k in dict.fromkeys(gain_keys) if cmp.direction(k) == "better"]
    maybe_harm = [] if settled else [k for k in dict.fromkeys(harm_keys) if k not in harm and cmp.undecided(k, "worse")]
    maybe_gain = (
        [] if settled else [k for k in dict.fromkeys(gain_keys) if k not in gains and cmp.undecided(k, "better")]
    )

    def names(keys: list[str]) -> str:
        return ", ".join(_label(k) for k in keys)

    def j(verdict: str, rule: str, why: str) -> Judgement:
        return Judgement(verdict, rule, why, cmp, objective)

    if harm:
        return j("worse", "harm", f"worse beyond noise on {names(harm)}")
    if prior == "candidate":
        if maybe_harm:
            return j(
                "undecided",
                "prior",
                f"it is the side the guides keep, taken unless worse beyond noise; {names(maybe_harm)} "
                "moved the wrong way beyond the threshold but not beyond noise",
            )
        won = f"; better beyond noise on {names(gains)}" if gains else ""
        return j(
            "better",
            "prior",
            f"it is the side the guides keep, taken since it is not worse beyond noise on "
            f"{names(list(dict.fromkeys(harm_keys)))}{won}",
        )
    if gains and not maybe_harm:
        return j(
            "better",
            "gain",
            f"better beyond noise on {names(gains)}, not worse beyond noise on "
            f"{names(list(dict.fromkeys(harm_keys)))}: the measured gain leaving the current flags needs",
        )
    if maybe_gain or maybe_harm:
        what = [f"{names(maybe_gain)} better" if maybe_gain else "", f"{names(maybe_harm)} worse" if maybe_harm else ""]
        return j(
            "undecided",
            "gain",
            f"leaving the current flags needs a measured gain; {' and '.join(w for w in what if w)} "
            "beyond the threshold but not beyond noise",
        )
    if gains:  # a gain with an unsettled harm that evidence could not settle: no measured harm
        return j(
            "better",
            "gain",
            f"better beyond noise on {names(gains)}, not worse beyond noise on {names(list(dict.fromkeys(harm_keys)))}",
        )
    cap = _capacity(incumbent, candidate) if incumbent is not None and candidate is not None else None
    if cap is not None:
        return j(cap[0], "capacity", cap[1])
    return j(
        "tie",
        "tie",
        f"no difference beyond noise on {names(list(dict.fromkeys(gain_keys + harm_keys)))}: the current flags stay",
    )


def _label(key: str) -> str:
    if key == GOODPUT:
        return "goodput"
    if key == THROUGHPUT:
        return "requests/s"
    return METRICS[key].label if key in METRICS else key


def _capacity(incumbent: Measurement, candidate: Measurement) -> tuple[str, str] | None:
    """A tie broken by the capacity under the SLOs, when load levels beyond the expected one ran."""
    if not any(len({e.load_level for e in m.complete}) > 1 for m in (incumbent, candidate)):
        return None
    caps_i = {s: incumbent.capacity_value(s) for s in incumbent.scenarios}
    caps_c = {s: candidate.capacity_value(s) for s in incumbent.scenarios}
    shown = ", ".join(f"{s}: {caps_i[s]:g} -> {caps_c[s]:g}" for s in caps_i)
    if all(caps_c[s] >= caps_i[s] for s in caps_i) and any(caps_c[s] > caps_i[s] for s in caps_i):
        return "better", f"a tie at the expected load, broken by the capacity under the SLOs ({shown})"
    if any(caps_c[s] < caps_i[s] for s in caps_i):
        return "worse", f"a tie at the expected load, lost on the capacity under the SLOs ({shown})"
    return None


def repeats_to_decide(cmp: Comparison, keys: list[str], runs_per_side: int) -> int | None:
    """Rough runs per side that would make the undecided intervals among `keys` (a change beyond
    the threshold, not beyond noise) exclude zero at their measured change, intervals narrowing
    as 1/sqrt(runs): the cost of deciding. None when nothing among them is undecided."""
    need = 0.0
    for rows in cmp.rows.values():
        for k in keys:
            r = rows.get(k)
            if (
                r is None
                or r.interval is None
                or r.change is None
                or r.verdict != "within noise"
                or abs(r.change) < 1e-9
            ):
                continue
            # the interval's reach from the change towards zero must shrink below the change itself
            reach = (r.interval[1] - r.change) if r.change < 0 else (r.change - r.interval[0])
            if reach > 0:
                need = max(need, max(1, runs_per_side) * (reach / abs(r.change)) ** 2)
    return math.ceil(need) if need else None
