"""The decision rules of harness.tune.judge on comparisons whose rows are given: the guides'
priors (the default side is taken unless worse beyond noise; leaving it needs a measured gain),
goodput as the guard, plain requests/s without an SLO, undecided vs tie, and settle() buying
interleaved repeats before it calls a tie. No engine starts here; the sim cases
(test_cases_sim.py, test_rules_sim.py) run the same rules on measured runs."""

from __future__ import annotations

from types import SimpleNamespace

from harness.compare import Row
from harness.tune import judge as J
from harness.tune.steps import base


def row(
    key: str, change: float, verdict: str, better: str = "lower", interval: tuple[float, float] | None = None
) -> Row:
    worse = change if better == "lower" else -change
    label = J._label(key)
    iv = interval or (change - 3, change + 3)
    return Row(
        key,
        label,
        "ms" if better == "lower" else "req/s",
        better,
        100.0,
        100.0 * (1 + change / 100),
        change,
        "%",
        worse,
        iv,
        [],
        verdict in ("REGRESSION", "improved"),
        verdict,
    )


def cmp(guard: str = J.GOODPUT, **rows: Row) -> J.Comparison:
    base_rows = {guard: row(guard, 0.0, "ok", "higher"), "error_rate": row("error_rate", 0.0, "ok")}
    base_rows.update({k.replace("_", "."): r for k, r in rows.items()})
    return J.Comparison({"chat": base_rows}, guard, 5.0, 1.0)


TTFT = J.Objective(targets=("ttft.p50", "ttft.p99"))


def test_the_default_side_is_taken_unless_worse_beyond_noise():
    """Prefix caching on (the guide's default) at a goodput tie: taken, the reason names the rule."""
    j = J.decide(cmp(ttft_p50=row("ttft.p50", -45.8, "improved")), TTFT, "candidate")
    assert j.verdict == "better" and j.rule == "prior" and "the side the guides keep" in j.why
    same = J.decide(cmp(ttft_p50=row("ttft.p50", 1.0, "ok")), TTFT, "candidate")
    assert same.verdict == "better" and same.rule == "prior"  # returning needs no measured gain
    harm = J.decide(cmp(ttft_p99=row("ttft.p99", 30.0, "REGRESSION")), TTFT, "candidate")
    assert harm.verdict == "worse" and "TTFT p99" in harm.why


def test_leaving_the_default_needs_a_measured_gain():
    j = J.decide(cmp(ttft_p50=row("ttft.p50", -20.0, "improved")), TTFT, "incumbent")
    assert j.verdict == "better" and j.rule == "gain" and "better beyond noise on TTFT p50" in j.why
    tie = J.decide(cmp(ttft_p50=row("ttft.p50", -2.0, "ok")), TTFT, "incumbent")
    assert tie.verdict == "tie" and "current flags stay" in tie.why


def test_goodput_is_the_guard_of_every_step():
    c = cmp(ttft_p50=row("ttft.p50", -40.0, "improved"))
    c.rows["chat"][J.GOODPUT] = row(J.GOODPUT, -20.0, "REGRESSION", "higher")
    for prior in ("candidate", "incumbent"):
        j = J.decide(c, TTFT, prior)
        assert j.verdict == "worse" and "goodput" in j.why


def test_undecided_is_not_a_tie_until_settled():
    c = cmp(ttft_p50=row("ttft.p50", -18.7, "within noise", interval=(-37.4, 1.4)))
    assert J.decide(c, TTFT, "incumbent").verdict == "undecided"
    assert J.decide(c, TTFT, "incumbent", settled=True).verdict == "tie"
    # a harm that might be real holds back even the default side until it is settled
    c2 = cmp(ttft_p99=row("ttft.p99", 12.0, "within noise", interval=(-4.0, 28.0)))
    assert J.decide(c2, TTFT, "candidate").verdict == "undecided"
    assert J.decide(c2, TTFT, "candidate", settled=True).verdict == "better"


def test_without_an_slo_the_guard_is_plain_requests_per_second():
    c = cmp(guard=J.THROUGHPUT, ttft_p50=row("ttft.p50", -30.0, "improved"))
    j = J.decide(c, TTFT, "incumbent")
    assert j.verdict == "better" and "requests/s" in j.why and "goodput" not in j.why
    assert J.guard_name(J.THROUGHPUT).startswith("requests/s (no SLO: goodput is plain throughput")


class FakeMeasurement(SimpleNamespace):
    @property
    def runs_per_scenario(self) -> int:
        return self.runs

    @property
    def cell_ids(self) -> list[str]:  # one cell per run, as a sweep names them
        return [f"{self.config_id}__r{r + 1}" for r in range(self.runs)]


def test_settle_buys_interleaved_repeats_then_says_what_it_bought(monkeypatch):
    """Undecided twice, decided on the third look: two rounds of evidence (4 starts) bought, each
    measuring the incumbent and the candidate back to back."""
    inc, cand = FakeMeasurement(runs=1, config_id="base"), FakeMeasurement(runs=1, config_id="cand")
    answers = iter(["undecided", "undecided", "better"])
    undecided_cmp = cmp(ttft_p50=row("ttft.p50", -18.0, "within noise", interval=(-30.0, 2.0)))

    def fake_judge(i, c, t, objective, prior, settled=False):
        v = next(answers)
        return J.Judgement(v, "gain", "why", undecided_cmp, objective)

    monkeypatch.setattr(base, "judge", fake_judge)
    bought: list[list[str]] = []

    def more(step, ms, tag):
        bought.append([m.config_id for m in ms])
        for m in ms:
            m.runs += 1
        return True

    ctx = SimpleNamespace(
        threshold_pct=5.0, tune=SimpleNamespace(measure=SimpleNamespace(evidence_repeats=2)), measure_more=more
    )
    j = base.settle(ctx, "cache-check", inc, cand, TTFT, "incumbent")
    assert j.verdict == "better" and j.evidence == 2
    assert bought == [["base", "cand"], ["base", "cand"]]
    # the judgement names the incumbent cells it read, the bought repeats included
    assert j.against == ["base__r1", "base__r2", "base__r3"]
    assert "bought 2 more interleaved repeats of both sides (4 engine starts), now 3 runs per side" in j.evidence_note


def test_settle_stops_at_the_budget_and_calls_the_tie_with_its_cost(monkeypatch):
    inc, cand = FakeMeasurement(runs=1, config_id="base"), FakeMeasurement(runs=1, config_id="cand")
    undecided_cmp = cmp(ttft_p50=row("ttft.p50", -18.0, "within noise", interval=(-30.0, 2.0)))
    monkeypatch.setattr(
        base,
        "judge",
        lambda i, c, t, o, p, settled=False: J.Judgement(
            "tie" if settled else "undecided", "gain", "why", undecided_cmp, o
        ),
    )
    ctx = SimpleNamespace(
        threshold_pct=5.0,
        tune=SimpleNamespace(measure=SimpleNamespace(evidence_repeats=2)),
        measure_more=lambda step, ms, tag: False,
        _budget_reason="budget: 5 of max_starts 5 engine starts used",
    )
    j = base.settle(ctx, "cache-check", inc, cand, TTFT, "incumbent")
    assert j.verdict == "tie" and j.evidence == 0
    assert "max_starts" in j.evidence_note and "settled as no measured difference" in j.evidence_note
    # the interval reaches 20 points from -18% towards zero: (20 / 18)^2 x 1 run -> 2 runs per side
    assert "deciding it would take about 2 runs per side (2 more engine starts" in j.evidence_note


def _scripted(monkeypatch, verdicts: list[str]) -> list[list[str]]:
    """judge() answers `verdicts` in turn; returns the list the fake measure_more records into."""
    answers = iter(verdicts)
    harm_cmp = cmp(guard=J.THROUGHPUT)
    monkeypatch.setattr(
        base, "judge", lambda i, c, t, o, p, settled=False: J.Judgement(next(answers), "harm", "why", harm_cmp, o)
    )
    return []


def _ctx(bought: list[list[str]], evidence_repeats: int = 2) -> SimpleNamespace:
    def more(step, ms, tag):
        bought.append([m.config_id for m in ms] + [tag])
        for m in ms:
            m.runs += 1
        return True

    return SimpleNamespace(
        threshold_pct=5.0,
        tune=SimpleNamespace(measure=SimpleNamespace(evidence_repeats=evidence_repeats)),
        measure_more=more,
    )


def test_rejecting_the_guides_side_on_one_run_buys_a_confirming_repeat(monkeypatch):
    """Prefix caching on judged worse on one run per side (the vLLM CPU CI run: requests/s -21%
    beside a busy neighbour): one interleaved repeat of both sides is bought, and when the runs
    judged together no longer say worse, the guides' side is taken."""
    inc, cand = FakeMeasurement(runs=1, config_id="off"), FakeMeasurement(runs=1, config_id="on")
    bought = _scripted(monkeypatch, ["worse", "better"])
    j = base.settle(_ctx(bought), "cache-check", inc, cand, TTFT, "candidate")
    assert j.verdict == "better" and j.evidence == 1
    assert bought == [["off", "on", "on-confirm"]]
    assert j.against == ["off__r1", "off__r2"]
    assert "bought a confirming interleaved repeat of both sides (2 engine starts)" in j.evidence_note
    assert "did not confirm it" in j.evidence_note and "now 2 runs per side" in j.evidence_note


def test_a_confirmed_regression_still_rejects_the_guides_side(monkeypatch):
    inc, cand = FakeMeasurement(runs=1, config_id="off"), FakeMeasurement(runs=1, config_id="on")
    bought = _scripted(monkeypatch, ["worse", "worse"])
    j = base.settle(_ctx(bought), "cache-check", inc, cand, TTFT, "candidate")
    assert j.verdict == "worse" and j.evidence == 1 and len(bought) == 1
    assert "the repeat confirmed it" in j.evidence_note


def test_no_confirming_repeat_where_the_rule_does_not_overturn_a_guide_or_repeats_exist(monkeypatch):
    # leaving the default and losing is the expected outcome: nothing to confirm
    inc, cand = FakeMeasurement(runs=1, config_id="cur"), FakeMeasurement(runs=1, config_id="new")
    bought = _scripted(monkeypatch, ["worse", "worse"])
    assert base.settle(_ctx(bought), "max-num-seqs", inc, cand, TTFT, "incumbent").verdict == "worse"
    # measured with repeats already: harness compare needs every run beyond every run
    inc, cand = FakeMeasurement(runs=2, config_id="off"), FakeMeasurement(runs=2, config_id="on")
    assert base.settle(_ctx(bought), "cache-check", inc, cand, TTFT, "candidate").verdict == "worse"
    assert bought == []


def test_without_evidence_repeats_the_unconfirmed_rejection_says_so(monkeypatch):
    inc, cand = FakeMeasurement(runs=1, config_id="off"), FakeMeasurement(runs=1, config_id="on")
    bought = _scripted(monkeypatch, ["worse"])
    j = base.settle(_ctx(bought, evidence_repeats=0), "cache-check", inc, cand, TTFT, "candidate")
    assert j.verdict == "worse" and j.evidence == 0 and bought == []
    assert "not confirmed by a repeat (measure.evidence_repeats 0 allows no repeat)" in j.evidence_note


def test_winning_budgets_are_weighed_on_itl_and_ttft_not_taken_by_size():
    """Guide 001 1.1 'measure both': the H200 tune took 2048 (ITL p99 51.4 ms) over 512 (17.4 ms)
    at equal goodput as 'the largest'. The smaller budget replaces the larger when it is better
    beyond noise on ITL p99 or TPOT p50 and no worse beyond noise on TTFT, goodput or failures;
    the larger holds a tie (a smaller budget only delays long prompts)."""
    from harness.tune.steps import max_num_batched_tokens as budget

    def between(itl: Row, **more: Row):
        seen: list[tuple[int, int]] = []

        def judge(holder, smaller):
            seen.append((holder[0], smaller[0]))
            return J.decide(cmp(itl_p99=itl, **more), budget.BETWEEN, "incumbent", settled=True)

        return judge, seen

    winners = [(512, "m512"), (2048, "m2048")]
    judge_, seen = between(row("itl.p99", -66.2, "improved"), ttft_p99=row("ttft.p99", -2.7, "ok"))
    best, notes = budget.pick(winners, judge_)
    assert winners[best][0] == 512 and seen == [(2048, 512)]  # the largest holds first, the smaller challenges
    assert "ITL p99" in notes[0] and "TTFT p99" in notes[0] and notes[0].endswith("512 holds")
    # same ITL within noise: the larger budget holds (no measured gain for the smaller)
    judge_, _ = between(row("itl.p99", -3.0, "ok"))
    assert winners[budget.pick(winners, judge_)[0]][0] == 2048
    # better ITL but TTFT p99 worse beyond noise: the guide's trade is refused, the larger holds
    judge_, _ = between(row("itl.p99", -40.0, "improved"), ttft_p99=row("ttft.p99", 35.0, "REGRESSION"))
    best, notes = budget.pick(winners, judge_)
    assert winners[best][0] == 2048 and "worse beyond noise on TTFT p99" in notes[0]
    # a TTFT improvement alone is no reason to take the smaller budget (a guard, not a gain)
    judge_, _ = between(row("itl.p99", 1.0, "ok"), ttft_p50=row("ttft.p50", -30.0, "improved"))
    assert winners[budget.pick(winners, judge_)[0]][0] == 2048


def test_the_reason_names_what_moved_beyond_noise_outside_the_steps_metrics():
    """The storm case's token budget cut ITL p99 while ITL p50 rose +480% beyond noise: the step
    may take that trade, but its reason shows what `harness compare` of the cells prints."""
    budget = J.Objective(targets=("itl.p99",))
    c = cmp(
        itl_p99=row("itl.p99", -60.0, "improved"),
        itl_p50=row("itl.p50", 480.0, "REGRESSION", interval=(8.2, 495.7)),
        ttft_p50=row("ttft.p50", 2.0, "ok"),
    )
    text = J.decide(c, budget, "incumbent").text()
    assert "Also beyond noise, not weighed by this step: ITL p50 +480.0% [+8.2, +495.7]% REGRESSION" in text
    assert "TTFT p50" not in text.split("Also beyond noise")[1]  # within the threshold: not listed
    quiet = J.decide(cmp(itl_p99=row("itl.p99", -60.0, "improved")), budget, "incumbent").text()
    assert "Also beyond noise" not in quiet
    # without an SLO goodput is requests/s, the guard the reason shows already: not listed again
    no_slo = cmp(guard=J.THROUGHPUT, itl_p99=row("itl.p99", -60.0, "improved"))
    no_slo.rows["chat"][J.GOODPUT] = row(J.GOODPUT, 20.0, "improved", "higher")
    assert "goodput" not in J.decide(no_slo, budget, "incumbent").text()


def test_a_candidate_the_quality_gate_fails_is_not_taken_by_any_step(monkeypatch):
    """On an H100 the tune took prefix caching and a 512-token budget while `harness compare` of
    the same cells said quality FAIL (14 of 16 greedy outputs differed): every step's winner now
    passes the tune file's gate first."""
    from harness.quality.gate import QualityVerdict

    inc, cand = FakeMeasurement(runs=1, config_id="base"), FakeMeasurement(runs=1, config_id="cand")
    win = lambda: J.Judgement("better", "gain", "better beyond noise on ITL p99", None, TTFT)  # noqa: E731
    ctx = SimpleNamespace(tune=SimpleNamespace(quality=object()))
    failed = QualityVerdict("cand", "fail", ["exact agreement 12.5% < 95% (14 of 16 outputs differ)"])
    monkeypatch.setattr(base, "quality_verdict", lambda c, i, k: failed)
    j = base.quality_guard(ctx, inc, cand, win())
    assert j.verdict == "worse" and j.rule == "quality"
    assert "quality gate FAIL" in j.why and "14 of 16" in j.why and "better beyond noise on ITL p99" in j.why
    # a verdict that passes, or no outputs to judge, or no quality block: the judgement stands
    monkeypatch.setattr(base, "quality_verdict", lambda c, i, k: QualityVerdict("cand", "pass"))
    assert base.quality_guard(ctx, inc, cand, win()).verdict == "better"
    monkeypatch.setattr(base, "quality_verdict", lambda c, i, k: None)
    assert base.quality_guard(ctx, inc, cand, win()).verdict == "better"
    monkeypatch.setattr(base, "quality_verdict", lambda c, i, k: failed)
    no_block = SimpleNamespace(tune=SimpleNamespace(quality=None))
    assert base.quality_guard(no_block, inc, cand, win()).verdict == "better"
    # a candidate that lost already is not judged again
    lost = J.Judgement("worse", "harm", "worse beyond noise on goodput", None, TTFT)
    assert base.quality_guard(ctx, inc, cand, lost).rule == "harm"


def test_the_final_says_its_quality_against_the_baseline(monkeypatch):
    """Each step gates its winner against the incumbent of the moment; the final reads the chosen
    flags' outputs against the baseline's, as `harness compare` of the two cells does."""
    from harness.quality.gate import QualityVerdict
    from harness.tune.steps import final as F

    base_m, final_m = FakeMeasurement(runs=1, config_id="base"), FakeMeasurement(runs=1, config_id="final")
    ctx = SimpleNamespace(tune=SimpleNamespace(quality=object()))
    failed = QualityVerdict("final", "fail", ["exact agreement 12.5% < 95% (14 of 16 outputs differ)"])
    monkeypatch.setattr(F, "quality_verdict", lambda c, b, f: failed)
    row, line = F.quality_vs_baseline(ctx, base_m, final_m)
    assert row["status"] == "fail" and line.startswith("Quality vs the baseline: FAIL") and "14 of 16" in line
    monkeypatch.setattr(F, "quality_verdict", lambda c, b, f: QualityVerdict("final", "pass"))
    row, line = F.quality_vs_baseline(ctx, base_m, final_m)
    assert row["status"] == "pass" and line.startswith("Quality vs the baseline: PASS")
    from harness.tune.quality import verdict

    monkeypatch.setattr(F, "quality_verdict", verdict)  # the real one: no quality block, nothing to say
    assert F.quality_vs_baseline(SimpleNamespace(tune=SimpleNamespace(quality=None)), base_m, final_m) is None
