"""The speculative step's acceptance rule on real engine figures: the committed H100 run of vLLM
0.26.0 with ngram speculation (results/examples/gpu-h100-vllm-tune-memory-spec) drafted nothing
on a model with random weights, and the step must say so rather than report no acceptance at all."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.sweep.results import read_run_summary
from harness.tune.steps.speculative import low_acceptance

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
