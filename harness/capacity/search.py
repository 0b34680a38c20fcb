"""Capacity under the SLOs, searched: the highest load at which enough requests meet every SLO.

The question a capacity plan asks ("how much traffic does this config carry within the SLOs?")
used to be answered by a hand-picked list of load levels. The search finds it with fewer trials:

1. **Bracket.** Run the start level; while it passes multiply the level by `growth` (default 2),
   while it fails divide, until one passing and one failing level are known.
2. **Bisect** between the highest passing and the lowest failing level until they are within
   `precision` of each other (default 5%: (hi - lo) / hi <= 0.05) or the trial budget is spent.
   Integers (concurrency) stop when hi - lo <= 1.
3. **Monotone fit.** Attainment (the share of requests within every SLO) is noisy: a level can
   measure better than a lower one. Pass/fail is read from an isotonic (non-increasing, pool
   adjacent violators) fit of attainment over level, as AIPerf's search does, so one lucky or
   unlucky trial cannot make the passing levels non-contiguous.
4. **Early stop.** An open-loop trial that is over-saturated (in-flight growing while completions
   fall short of the offered rate or TTFT climbs; harness.capacity.saturation) is stopped within
   seconds and counts as failing.
5. **Monotone check.** Before the answer is given, levels whose raw results are not monotone (a
   lower level failed while a higher one passed) are measured once more, and the answer says so;
   when they still disagree the boundary is flagged as uncertain beyond the bracket.

Every trial is like `harness run`: the target's prefix cache is reset first (or the prompts
salted where it cannot be), so no trial is served from the previous trial's cache; each trial's
validity warnings are kept with it (capacity.json), printed with its line and listed in
capacity.md.

Every trial is a normal run directory (`<out>/trial-NN-<knob>-<level>/`, readable by `harness
report` and `compare`); `<out>/capacity.json` (CapacityResult.to_dict) is rewritten after each
trial, so an interrupted search keeps what it measured.

Python API (also used by `harness tune`)::

    from harness.capacity.search import search_capacity, CapacityResult
    result = search_capacity(scenario, Path("results/cap1"), target_url="http://127.0.0.1:8000",
                             attainment=0.95, precision=0.05, max_trials=12)
    result.boundary        # highest level that met the SLOs (None: not even the lowest tried)
    result.first_failing   # lowest level that did not (None: every level tried passed)
    result.trials          # list[Trial] in the order run: level, attainment, passed, saturated, run_dir

`search_levels(evaluate, start=..., ...)` is the pure algorithm over any `evaluate(level) ->
Trial` (tests, or a caller that runs trials its own way, e.g. on a restarted engine).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.compare import slo
from harness.errors import UserError
from harness.results.layout import write_text_atomic
from harness.results.models import FILES
from harness.results.models.capacity import CapacitySearch, SweepCapacity
from harness.results.read import load_capacity
from harness.scenario.loader import apply_overrides, validate
from harness.scenario.models import Scenario

Knob = Literal["rate", "concurrency"]
DEFAULT_ATTAINMENT = 0.95  # the sweep's default slo_attainment (harness.sweep.results)
DEFAULT_PRECISION = 0.05
DEFAULT_MAX_TRIALS = 12


@dataclass
class Trial:
    """One load level measured."""

    level: float
    attainment: float | None  # share of requests (completed + failed) within every SLO; None: nothing finished
    passed: bool = False  # after the monotone fit (see CapacityResult.trials)
    saturated: str | None = None  # why the trial was stopped early (over-saturated), else None
    run_dir: str | None = None
    status: str = "complete"  # the run's status (complete | partial | failed)
    wall_s: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)  # rps, offered, ttft/e2e p99 ms, completed
    warnings: list[str] = field(default_factory=list)  # the run's validity warnings (summary.json validity)
    remeasured: bool = False  # a second measurement of a level whose results were not monotone

    @property
    def score(self) -> float:
        """Attainment as the fit sees it: a saturated or empty trial carried nothing."""
        if self.saturated or self.attainment is None:
            return 0.0
        return self.attainment


@dataclass
class CapacityResult:
    """The boundary with its uncertainty: `boundary` <= capacity < `first_failing`."""

    knob: Knob
    attainment_target: float
    precision: float
    boundary: float | None = None  # highest level that passed (the capacity to plan with)
    first_failing: float | None = None  # lowest level that failed
    trials: list[Trial] = field(default_factory=list)
    converged: bool = False  # the bracket is within `precision` (or 1 for integers)
    stop_reason: str = ""
    wall_s: float = 0.0
    #: levels whose raw results were not monotone (a lower one failed, a higher one passed), what
    #: was re-measured and whether they agree now ("" when the results were monotone)
    monotone_note: str = ""

    @property
    def relative_gap(self) -> float | None:
        """(first_failing - boundary) / first_failing: the search's uncertainty."""
        if self.boundary is None or self.first_failing is None or self.first_failing <= 0:
            return None
        return (self.first_failing - self.boundary) / self.first_failing

    @property
    def saturated_trials(self) -> int:
        return sum(1 for t in self.trials if t.saturated)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["relative_gap"] = self.relative_gap
        out["saturated_trials"] = self.saturated_trials
        return out

    def to_model(self, scenario: str, target: str | None = None) -> CapacitySearch:
        """capacity.json's model (harness.results.models.capacity); `target` only for `harness capacity`."""
        return CapacitySearch.model_validate(
            {"scenario": scenario, **({"target": target} if target is not None else {}), **self.to_dict()}
        )

    def lines(self) -> list[str]:
        """The console/markdown summary: the boundary, then one line per trial by level."""
        unit = "req/s" if self.knob == "rate" else "users"
        head = f"capacity under the SLOs (>= {100 * self.attainment_target:g}% of requests within every SLO): "
        if self.boundary is None:
            head += f"none: even {_fmt(self.first_failing)} {unit} failed" if self.first_failing else "no trial ran"
        elif self.first_failing is None:
            head += f">= {_fmt(self.boundary)} {unit} (every level tried passed)"
        else:
            head += (
                f"{_fmt(self.boundary)} {unit} (fails at {_fmt(self.first_failing)}; "
                f"uncertainty {100 * (self.relative_gap or 0):.1f}%)"
            )
        if self.monotone_note and self.boundary is not None:
            head += f"; {self.monotone_note}"
        out = [
            head,
            f"  {len(self.trials)} trials ({self.saturated_trials} stopped early, over-saturated) in "
            f"{self.wall_s:.0f} s; {self.stop_reason}",
        ]
        for t in sorted(self.trials, key=lambda t: t.level):
            att = "-" if t.attainment is None else f"{100 * t.attainment:.1f}%"
            mark = "pass" if t.passed else "FAIL"
            extra = f"  stopped early: {t.saturated}" if t.saturated else ""
            extra += "  (re-measured)" if t.remeasured else ""
            extra += f"  {len(t.warnings)} validity warning(s)" if t.warnings else ""
            out.append(f"  {_fmt(t.level):>9} {unit:<5} {mark}  within SLO {att:>6}  ({t.wall_s:.0f} s){extra}")
        warned = [t for t in self.trials if t.warnings]
        if warned:
            out.append("validity warnings (read these before the numbers; each trial's summary.json has them):")
            for i, t in enumerate(self.trials, 1):
                for w in t.warnings:
                    out.append(f"  trial {i} at {_fmt(t.level)} {unit}: {w}")
        return out


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if float(v).is_integer() else f"{v:.3g}"


# ---------------------------------------------------------------- the algorithm
def isotonic_decreasing(values: list[float]) -> list[float]:
    """Pool adjacent violators: the closest non-increasing sequence (least squares, equal weights)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            m2, n2 = blocks.pop()
            m1, n1 = blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    out: list[float] = []
    for mean, count in blocks:
        out.extend([mean] * int(count))
    return out


def classify(trials: list[Trial], target: float) -> tuple[float | None, float | None]:
    """Mark each trial passed/failed from the monotone fit; return (highest pass, lowest fail)."""
    by_level = sorted(trials, key=lambda t: t.level)
    fitted = isotonic_decreasing([t.score for t in by_level])
    lo = hi = None
    for t, f in zip(by_level, fitted, strict=True):
        t.passed = f >= target and not t.saturated
        if t.passed:
            lo = t.level
        elif hi is None:
            hi = t.level
    if lo is not None and hi is not None and hi < lo:  # cannot happen with a monotone fit; be safe
        hi = None
    return lo, hi


#: a higher level may measure this much more attainment than a lower one before it counts as a
#: contradiction (a share of ~100 requests moves by a few points run to run)
MONOTONE_SLACK = 0.10


def non_monotone(trials: list[Trial], target: float) -> list[tuple[float, float]]:
    """(lower level, higher level) pairs of the raw results (a level's repeats averaged) that
    contradict 'more load, fewer requests within the SLOs': the lower failed while the higher
    passed, or the higher kept more than MONOTONE_SLACK more of its requests within the SLOs
    (the audit's 11.8 -> 0.0% and 12.3 -> 41.0%)."""
    by: dict[float, list[float]] = {}
    for t in trials:
        by.setdefault(t.level, []).append(t.score)
    levels = sorted(by)
    mean = {lv: sum(v) / len(v) for lv, v in by.items()}
    return [
        (a, b)
        for i, a in enumerate(levels)
        for b in levels[i + 1 :]
        if mean[a] < target <= mean[b] or mean[b] > mean[a] + MONOTONE_SLACK
    ]


def search_levels(
    evaluate: Callable[[float], Trial],
    *,
    start: float,
    attainment: float = DEFAULT_ATTAINMENT,
    precision: float = DEFAULT_PRECISION,
    max_trials: int = DEFAULT_MAX_TRIALS,
    growth: float = 2.0,
    integer: bool = False,
    min_level: float | None = None,
    max_level: float | None = None,
    knob: Knob = "rate",
    on_trial: Callable[[CapacityResult], None] | None = None,
) -> CapacityResult:
    """Bracket then bisect over `evaluate(level)`; see the module docstring."""
    if start <= 0 or growth <= 1 or not 0 < attainment <= 1 or precision <= 0 or max_trials < 1:
        raise UserError("capacity search: start > 0, growth > 1, 0 < attainment <= 1, precision > 0, max_trials >= 1")
    floor = min_level if min_level is not None else (1.0 if integer else start / 1024)
    result = CapacityResult(knob=knob, attainment_target=attainment, precision=precision)
    t0 = time.monotonic()
    tried: set[float] = set()

    def run(level: float) -> None:
        trial = evaluate(level)
        trial.level = level
        result.trials.append(trial)
        tried.add(level)
        result.boundary, result.first_failing = classify(result.trials, attainment)
        result.wall_s = time.monotonic() - t0
        if on_trial is not None:
            on_trial(result)

    def norm(level: float) -> float:
        return float(max(1, round(level))) if integer else float(f"{level:.3g}")

    def narrow_enough(lo: float, hi: float) -> bool:
        return (integer and hi - lo <= 1) or (hi - lo) / hi <= precision

    level = norm(start)
    while True:
        if len(result.trials) >= max_trials:
            result.stop_reason = f"trial budget ({max_trials}) spent"
            break
        run(level)
        lo, hi = result.boundary, result.first_failing
        if lo is not None and hi is not None:
            if narrow_enough(lo, hi):
                result.converged = True
                result.stop_reason = (
                    f"boundary within {100 * precision:g}%" if not integer or hi - lo > 1 else "adjacent levels"
                )
                break
            mid = norm(math.sqrt(lo * hi)) if not integer else float((int(lo) + int(hi)) // 2)
            if mid in tried or not lo < mid < hi:
                result.converged = True
                result.stop_reason = "no level left between the bracket"
                break
            level = mid
        elif hi is None:  # everything so far passed: go up
            assert lo is not None
            nxt = norm(max(lo * growth, lo + 1) if integer else lo * growth)
            if max_level is not None and nxt > max_level:
                if lo >= max_level:
                    result.stop_reason = f"the highest level allowed ({_fmt(max_level)}) passed"
                    break
                nxt = norm(max_level)
            level = nxt
        else:  # everything so far failed: go down
            nxt = norm(hi / growth)
            if nxt < floor or nxt in tried:
                result.stop_reason = f"even the lowest level tried ({_fmt(hi)}) failed"
                break
            level = nxt
    _remeasure(result, run, attainment, _fmt)
    result.wall_s = time.monotonic() - t0
    return result


def _remeasure(
    result: CapacityResult, run: Callable[[float], None], attainment: float, fmt: Callable[[float | None], str]
) -> None:
    """Levels whose raw results are not monotone are measured once more before the answer is
    given (one lucky or unlucky trial, a warm cache, a busy host); the answer says what was
    re-measured, and that the boundary is uncertain when they still disagree."""
    bad = non_monotone(result.trials, attainment)
    if not bad:
        return
    levels = sorted({lv for pair in bad for lv in pair})
    score = {t.level: t.score for t in result.trials}
    shown = ", ".join(
        f"{fmt(a)}: {100 * score[a]:.0f}% vs {fmt(b)}: {100 * score[b]:.0f}% within the SLOs" for a, b in bad[:4]
    )
    for lv in levels:
        run(lv)
        result.trials[-1].remeasured = True
    still = non_monotone(result.trials, attainment)
    if still:
        result.monotone_note = (
            f"NOT monotone in load ({shown}); re-measured {', '.join(map(fmt, levels))} and they still "
            "disagree: the boundary is uncertain beyond the bracket (a noisy or busy target; run longer trials)"
        )
    else:
        result.monotone_note = (
            f"results were not monotone in load ({shown}); re-measured {', '.join(map(fmt, levels))}: now monotone"
        )


# ---------------------------------------------------------------- trials as runs
def has_slo(scenario: Scenario) -> bool:
    """Whether any SLO limit is set: harness.compare's reading, the one tune and compare use."""
    return slo.has_slo(scenario.model_dump(mode="json"))


def scenario_at(scenario: Scenario, knob: Knob, level: float) -> Scenario:
    """The scenario with its load level replaced (the other load mode cleared)."""
    value: float | int = int(level) if knob == "concurrency" else float(level)
    data = apply_overrides(scenario.model_dump(mode="json", exclude_none=True), {f"load.{knob}": value})
    data.get("load", {}).pop("offline", None)  # a searched level is online load
    return validate(Scenario, data, f"{scenario.name} at {knob} {level:g}")


@dataclass
class TrialSettings:
    """How each trial runs (RunOptions' fields that matter for a search)."""

    target_url: str | None = None  # None: the caller started nothing; search_capacity starts a sim
    model: str | None = None
    engine_kind: str | None = None
    scenario_path: str | None = None
    processes: int = 1
    early_stop: bool = True
    write_report: bool = False  # `harness report <trial dir>` writes one later
    stop_grace_s: float = 5.0  # a stopped (saturated) trial does not wait long for its queue
    labels: dict[str, str] = field(default_factory=dict)
    show_progress: bool = False
    print_trials: bool = False


def run_trial(scenario: Scenario, knob: Knob, level: float, out_dir: Path, settings: TrialSettings) -> Trial:
    """One level as a normal run directory; early stop on over-saturation (open loop)."""
    from harness.capacity.saturation import SaturationDetector
    from harness.run import RunOptions, run_scenario

    trial_scenario = scenario_at(scenario, knob, level)
    watch = None
    if settings.early_stop and knob == "rate":
        load = trial_scenario.load
        window = load.duration_s or ((load.requests or 0) / level if level else 30.0)
        watch = SaturationDetector(
            offered_rps=level,
            run_dir=out_dir,
            arrivals_end_s=load.duration_s,
            min_duration_s=min(30.0, max(3.0, 0.2 * window)),
        ).observe
    opts = RunOptions(
        out_dir=out_dir,
        target_url=settings.target_url,
        model=settings.model,
        engine_kind=settings.engine_kind,
        show_progress=settings.show_progress,
        write_report=settings.write_report,
        processes=settings.processes,
        scenario_path=settings.scenario_path,
        labels={**settings.labels, "capacity_level": f"{level:g}"},
        stop_grace_s=settings.stop_grace_s,
        watch=watch,
        reset_prefix_cache=True,  # like `harness run`: no trial is served from the last trial's cache
    )
    t0 = time.monotonic()
    try:
        summary = run_scenario(trial_scenario, opts)
    except UserError as exc:
        return Trial(
            level=level,
            attainment=None,
            run_dir=str(out_dir),
            status="failed",
            wall_s=time.monotonic() - t0,
            figures={"error": " ".join(exc.lines)[:300]},
        )
    frac = summary.goodput.overall.fraction
    lat = summary.latency_ms
    warnings = list(summary.validity.warnings)
    return Trial(
        warnings=warnings,
        level=level,
        attainment=frac,
        saturated=summary.load.stopped_early,
        run_dir=str(out_dir),
        status=summary.status,
        wall_s=time.monotonic() - t0,
        figures={
            "completed": summary.requests.completed,
            "failed": summary.requests.failed,
            "rps": summary.requests.rps,
            "output_tok_s": summary.tokens.output_per_s,
            "ttft_p99_ms": lat["ttft"].p99 if "ttft" in lat else None,
            "e2e_p99_ms": lat["e2e"].p99 if "e2e" in lat else None,
        },
    )


def search_capacity(
    scenario: Scenario,
    out_dir: Path,
    *,
    knob: Knob | None = None,
    start: float | None = None,
    attainment: float = DEFAULT_ATTAINMENT,
    precision: float = DEFAULT_PRECISION,
    max_trials: int = DEFAULT_MAX_TRIALS,
    growth: float = 2.0,
    max_level: float | None = None,
    target_url: str | None = None,
    sim_args: list[str] | None = None,
    settings: TrialSettings | None = None,
) -> CapacityResult:
    """Search `scenario`'s capacity against `target_url` (None: one simulated engine started with
    `sim_args` serves every trial). `knob` defaults to the scenario's load mode (rate for open
    loop, concurrency for closed), `start` to its level. Trials go to `out_dir/trial-NN-...`;
    `out_dir/capacity.json` is rewritten after each. Raises UserError without an SLO."""
    from harness.run.provider import TargetProvider

    if not has_slo(scenario):
        raise UserError(
            f"scenario {scenario.name}: capacity needs an SLO to judge levels by; "
            "add e.g. `slo: {ttft_ms: 500, tpot_ms: 50}`"
        )
    settings = settings or TrialSettings()
    load = scenario.load
    knob = knob or ("rate" if load.rate is not None else "concurrency")
    if start is None:
        start = load.rate if knob == "rate" else load.concurrency
        if start is None:
            start = 1.0 if knob == "rate" else 4
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # the target provider: the URL, else one built-in simulator (out_dir/sim.log) for every trial
    targets = TargetProvider(sim_args, out_dir, settings.engine_kind)
    target = targets.provide(scenario, target_url or settings.target_url)
    scenario = target.applied(scenario)  # a fleet of simulators: every trial sends to all of them
    url = target.url
    settings.engine_kind = target.engine_kind
    settings.target_url = url
    counter = [0]

    def evaluate(level: float) -> Trial:
        counter[0] += 1
        trial_dir = out_dir / f"trial-{counter[0]:02d}-{knob}-{level:g}"
        trial = run_trial(scenario, knob, level, trial_dir, settings)
        if settings.print_trials:
            att = "-" if trial.attainment is None else f"{100 * trial.attainment:.1f}%"
            note = f"  stopped early: {trial.saturated}" if trial.saturated else ""
            print(
                f"trial {counter[0]}: {knob} {level:g}: {att} within the SLOs ({trial.wall_s:.0f} s){note}", flush=True
            )
            for w in trial.warnings:
                print(f"  WARNING trial {counter[0]}: {w}", flush=True)
        return trial

    def save(result: CapacityResult) -> None:
        write_text_atomic(out_dir / "capacity.json", FILES["capacity.json"].dumps(result.to_model(scenario.name, url)))

    try:
        result = search_levels(
            evaluate,
            start=float(start),
            attainment=attainment,
            precision=precision,
            max_trials=max_trials,
            growth=growth,
            integer=knob == "concurrency",
            max_level=max_level,
            knob=knob,
            on_trial=save,
        )
    finally:
        targets.close()
    save(result)
    (out_dir / "capacity.md").write_text("\n".join(result.lines()) + "\n")
    return result


def load_result(path: Path) -> CapacitySearch | SweepCapacity:
    """capacity.json of a search directory (for reports)."""
    return load_capacity(path)
