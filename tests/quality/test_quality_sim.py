"""Output quality against the simulated engine over real HTTP: identical configs agree fully, the
fp8 error knob lowers agreement by about the share it sets, speculative decoding stays lossless
under greedy decoding, and the shipped prompt set is answered right by the reference config.

The simulator's greedy text is a function of the prompt (harness/sim/greedy.py), so two servers
with the same flags must give the same tokens; a lossy flag makes a hashed share `e` of the
prompts diverge, so on N prompts the disagreement is e within binomial noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.quality import judge, load_quality_set, run_quality
from harness.run.provider import TargetProvider
from harness.run.target import EmbeddedSim
from harness.scenario.quality import QualityGate, QualitySpec

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "scenarios" / "datasets" / "quality_sim.jsonl"
WORDS = ["the", "of", "cat", "sun", "run", "blue", "tree", "red", "fox", "box", "sky", "map", "pen", "cup"]


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    """name -> a running simulator (started once per module, stopped at its end)."""
    started: dict[str, TargetProvider] = {}
    flags = {
        "a": [],
        "b": [],  # a second process with the same flags as "a"
        "fp8": ["--kv-cache-dtype", "fp8", "--sim-fp8-kv-error", "0.25"],
        "spec": ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.7}'],
    }
    folder = tmp_path_factory.mktemp("sims")

    def get(name: str) -> EmbeddedSim:
        if name not in started:
            started[name] = TargetProvider(["--disable-log-stats", "--sim-speed", "200", *flags[name]], folder / name)
        return started[name].start()

    yield get
    for targets in started.values():
        targets.close()


def plain_set(tmp_path: Path, n: int = 300) -> Path:
    """Prompts of no known form: the simulator continues them up to max_tokens (rare EOS)."""
    lines = [
        json.dumps(
            {"id": f"p{i}", "prompt": " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 5)) + f" {i}"}
        )
        for i in range(n)
    ]
    path = tmp_path / "plain.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def outputs(sim: EmbeddedSim, prompts: Path, out: Path, max_tokens: int = 32):
    spec = QualitySpec(prompts=str(prompts), max_tokens=max_tokens)
    qset = load_quality_set(spec.prompts, None)
    return qset, run_quality(qset, spec, sim.url, out_dir=out)


def test_identical_configs_agree_fully_and_answer_the_shipped_set(sims, tmp_path):
    qset, a = outputs(sims("a"), SHIPPED, tmp_path / "a", max_tokens=32)
    _, b = outputs(sims("b"), SHIPPED, tmp_path / "b", max_tokens=32)
    assert a.errors == 0 and b.errors == 0 and a.logprobs
    v = judge("b", qset, a, b, QualityGate(min_exact_agreement=1.0, max_accuracy_drop=0.0))
    assert v.status == "pass", v.reasons
    assert v.agreement is not None and v.agreement.exact == v.agreement.n == len(qset.prompts)
    assert v.agreement.mean_abs_logprob_diff == 0.0
    assert v.accuracy is not None and v.accuracy.n == qset.with_expected > 0 and v.accuracy.rate == 1.0
    assert (tmp_path / "a" / "quality.jsonl").read_text().count("\n") == len(qset.prompts)  # stored per config


def test_the_fp8_error_knob_lowers_agreement_by_about_the_set_share(sims, tmp_path):
    prompts = plain_set(tmp_path)
    qset, base = outputs(sims("a"), prompts, tmp_path / "a")
    _, fp8 = outputs(sims("fp8"), prompts, tmp_path / "fp8")
    v = judge("fp8", qset, base, fp8, QualityGate(min_exact_agreement=0.95))
    assert v.agreement is not None and v.agreement.n == 300
    disagreement = 1 - (v.agreement.exact_rate or 0)
    # the knob is 0.25; 300 prompts give a binomial sd of 0.025: three of them either side
    assert 0.25 - 0.075 <= disagreement <= 0.25 + 0.075, disagreement
    assert v.status == "fail" and any("exact agreement" in r for r in v.reasons)
    assert (
        v.agreement.mean_abs_logprob_diff and v.agreement.mean_abs_logprob_diff > 0
    )  # a lossy config moves log-probs too
    assert sum(v.agreement.first_divergence.values()) == v.agreement.n - v.agreement.exact


def test_the_fp8_error_knob_lowers_expected_answer_accuracy(sims, tmp_path):
    qset, base = outputs(sims("a"), SHIPPED, tmp_path / "a", max_tokens=32)
    _, fp8 = outputs(sims("fp8"), SHIPPED, tmp_path / "fp8", max_tokens=32)
    v = judge("fp8", qset, base, fp8, QualityGate(max_accuracy_drop=0.01))
    assert v.drop is not None and v.drop.drop > 0 and v.drop.lost > 0 and v.drop.gained == 0
    assert v.accuracy is not None and v.accuracy.rate is not None and v.accuracy.rate < 1.0


def test_speculative_decoding_agrees_fully_under_greedy(sims, tmp_path):
    prompts = plain_set(tmp_path, 100)
    qset, base = outputs(sims("a"), prompts, tmp_path / "a")
    _, spec = outputs(sims("spec"), prompts, tmp_path / "spec")
    v = judge("spec", qset, base, spec, QualityGate(min_exact_agreement=0.95), lossless=True)
    assert v.status == "pass", v.reasons
    assert v.agreement is not None and v.agreement.exact == v.agreement.n == 100


def test_a_lossless_config_that_disagrees_is_an_engine_problem(sims, tmp_path):
    """The same check the other way: had speculation changed tokens (here: fp8 stands in for a
    broken speculative engine), the verdict is an engine problem, not a quality trade-off."""
    prompts = plain_set(tmp_path, 60)
    qset, base = outputs(sims("a"), prompts, tmp_path / "a")
    _, bad = outputs(sims("fp8"), prompts, tmp_path / "fp8")
    v = judge("spec", qset, base, bad, QualityGate(), lossless=True)
    assert v.status == "engine-problem" and not v.passed
    assert "must be lossless" in v.reasons[0]


def test_the_kl_gate_passes_identical_configs_and_fails_the_fp8_knob(sims, tmp_path):
    """Over real HTTP with top log-probs: two servers with the same flags give KL 0 exactly; the fp8
    knob's diverging prompts move the distribution where they diverge, which the KL gate sees."""
    prompts = plain_set(tmp_path, 60)
    spec = QualitySpec(prompts=str(prompts), max_tokens=32, top_logprobs=5)
    qset = load_quality_set(spec.prompts, None)
    a = run_quality(qset, spec, sims("a").url, out_dir=tmp_path / "a")
    b = run_quality(qset, spec, sims("b").url, out_dir=tmp_path / "b")
    fp8 = run_quality(qset, spec, sims("fp8").url, out_dir=tmp_path / "fp8")
    gate = QualityGate(max_kl=0.01)
    same = judge("b", qset, a, b, gate)
    assert same.status == "pass" and same.agreement is not None and same.agreement.kl == 0.0
    lossy = judge("fp8", qset, a, fp8, gate)
    assert lossy.agreement is not None and lossy.agreement.kl is not None
    assert lossy.status == "fail" and any("KL" in r for r in lossy.reasons), (lossy.agreement.kl, lossy.reasons)
