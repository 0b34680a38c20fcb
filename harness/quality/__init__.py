"""Output quality beside speed: greedy outputs per config, scored against a baseline and answers.

The API other parts (sweeps, `harness tune`, `harness compare`) use:

    from harness.quality import load_quality_set, run_quality, judge, read_quality_run
    qset = load_quality_set(spec.prompts, base_dir)          # QualitySet (UserError on a bad file)
    run = run_quality(qset, spec, "http://127.0.0.1:8000", out_dir=cell_dir)   # QualityRun;
                                                              # writes quality.jsonl + quality.json
    verdict = judge("fp8", qset, baseline_run, run, spec.gate,
                    lossless=expects_lossless(varied_flags))  # QualityVerdict
    verdict.status   # "baseline" | "pass" | "fail" | "engine-problem" | "not-judged"
    verdict.passed   # False: never rank this config best
    verdict.reasons  # one line each, why
    verdict.agreement.exact_rate, .mean_common_prefix, .first_divergence, .mean_abs_logprob_diff
    verdict.accuracy.rate, verdict.drop.drop/.low/.high, verdict.prompts_needed

`spec` is a `harness.scenario.quality.QualitySpec` (the `quality:` block of a scenario, sweep or
tune file). Modules: dataset (the JSONL file), matching (exact/contains/regex/choice), runner
(requests to one server), score (agreement, accuracy, drop with intervals), gate (the verdict).
"""

from harness.quality.dataset import QualityPrompt, QualitySet, load_quality_set, parse_quality_set
from harness.quality.gate import QualityVerdict, expects_lossless, judge, judge_all
from harness.quality.runner import QualityOutput, QualityRun, read_quality_run, run_quality
from harness.quality.score import Accuracy, AccuracyDrop, Agreement, accuracy, accuracy_drop, agreement

__all__ = [
    "Accuracy",
    "AccuracyDrop",
    "Agreement",
    "QualityOutput",
    "QualityPrompt",
    "QualityRun",
    "QualitySet",
    "QualityVerdict",
    "accuracy",
    "accuracy_drop",
    "agreement",
    "expects_lossless",
    "judge",
    "judge_all",
    "load_quality_set",
    "parse_quality_set",
    "read_quality_run",
    "run_quality",
]
