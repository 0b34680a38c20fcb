"""The speculative step's rules on real engine figures: the committed H100 run of vLLM 0.26.0 with
ngram speculation (results/examples/gpu-h100-vllm-tune-memory-spec) drafted nothing on a model
with random weights, and the step must say so rather than report no acceptance at all; on the echo
model (results/examples/gpu-h100-vllm-tune-spec-echo) every draft was accepted, and the step must
take it with ITL p99 named as the cost."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.results.models.sweep import SweepIndex
from harness.results.run_metrics import BY_NAME as RUN
from harness.sweep.results import read_run_summary
from harness.tune.judge import judge
from harness.tune.measure import Measurement
from harness.tune.steps.speculative import OBJECTIVE, low_acceptance, tail_cost, tail_cost_too_high, tail_worse

ROOT = Path(__file__).resolve().parents[3]
RUNS = ROOT / "results" / "examples" / "gpu-h100-vllm-tune-memory-spec" / "steps"


def measured(summary) -> SimpleNamespace:
    """The one thing low_acceptance reads of a Measurement: a figure of its runs' summaries."""

    def summary_value(get):
        v = get(summary)
        return None if v is None else float(v)

    return SimpleNamespace(summary_value=summary_value)


def run_of(step: str):
    (run_dir,) = (RUNS / step / "runs").iterdir()
    summary = read_run_summary(run_dir)
    assert summary is not None
    return summary


def test_a_config_that_drafted_nothing_is_refused_and_says_why():
    summary = run_of("10-speculative")
    assert summary.engine.spec_decode is not None and summary.engine.spec_decode.draft_tokens == 0
    why = low_acceptance(measured(summary))
    assert why is not None and "drafted no tokens" in why


def test_a_run_without_speculation_is_not_refused():
    summary = run_of("03-baseline")
    assert low_acceptance(measured(summary)) is None


def test_low_acceptance_is_refused_with_its_figure():
    summary = run_of("10-speculative").model_copy(deep=True)
    assert summary.engine.spec_decode is not None
    summary.engine.spec_decode.acceptance_rate = 0.31
    summary.engine.spec_decode.draft_tokens = 3000
    assert low_acceptance(measured(summary)) == "acceptance 31% below 50%"
    summary.engine.spec_decode.acceptance_rate = 0.72
    assert low_acceptance(measured(summary)) is None


ECHO = ROOT / "results" / "examples" / "gpu-h100-vllm-spec-echo"


def sweep_measurement(config_id: str, level: str) -> Measurement:
    """One config of the committed echo-model sweep at one load (its two repeats)."""
    index = SweepIndex.model_validate_json((ECHO / "index.json").read_text())
    cells = [c for c in index.cells if c.config_id == config_id]
    return Measurement(dict(cells[0].flags), config_id, ECHO, cells, level)


def test_accepted_drafts_are_taken_with_the_tail_named_as_their_cost():
    """vLLM 0.26 on an H100, the echo model, chat at 2 users: ngram drafts accepted at 100% cut TPOT
    p50 by 66% and tripled requests/s while ITL p99 rose 21% beyond noise (a request's tokens before
    its first draft take the speculative path's longer step). The step rejected it on that tail
    ("worse beyond noise on ITL p99": results/examples/gpu-h100-vllm-tune-spec-echo, the decision log
    of the tune before this rule); the tail is the named cost, weighed against the median's gain."""
    off, on = sweep_measurement("no-spec", "concurrency=2"), sweep_measurement("ngram-3", "concurrency=2")
    assert on.summary_value(RUN["spec_acceptance_rate"].get) == 1.0
    j = judge(off, on, 5.0, OBJECTIVE, "incumbent", settled=True)
    assert j.cmp is not None
    rows = j.cmp.rows["chat"]
    assert rows["itl.p99"].verdict == "REGRESSION" and rows["tpot.p50"].verdict == "improved"
    assert j.verdict == "better", j.why
    assert tail_cost_too_high(j) is None
    assert "the named cost: ITL p99 +21% beyond noise" in tail_cost(j)


def test_a_tail_cost_larger_than_the_median_gain_is_refused():
    off, on = sweep_measurement("no-spec", "concurrency=2"), sweep_measurement("ngram-3", "concurrency=2")
    j = judge(off, on, 5.0, OBJECTIVE, "incumbent", settled=True)
    assert j.cmp is not None
    j.cmp.rows["chat"]["tpot.p50"].change = -10.0  # as if the median had gained only 10%
    assert tail_cost_too_high(j) == "ITL p99 worse beyond noise by +21%, more than TPOT p50 improved (10%)"


def test_turning_speculation_off_pays_no_tail_cost():
    """The tail is a cost only of speculating: off with ITL p99 worse beyond noise is refused."""
    on, off = sweep_measurement("ngram-3", "concurrency=2"), sweep_measurement("no-spec", "concurrency=2")
    j = judge(on, off, 5.0, OBJECTIVE, "candidate", settled=True)
    assert j.cmp is not None
    assert tail_worse(j) is None  # off improves the tail here (8.4 -> 6.9 ms)
    row = j.cmp.rows["chat"]["itl.p99"]
    row.verdict, row.change = "REGRESSION", 10.0
    assert tail_worse(j) == "ITL p99 worse beyond noise by +10% without speculation"
