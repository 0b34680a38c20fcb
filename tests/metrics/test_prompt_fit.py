"""Server prompt tokens vs intended: a chat template's constant is tolerated and reported, a real
mismatch (a scale, a constant no template adds, per-request scatter) is named (GPU_VLLM defect 2:
every chat run on real vLLM was invalid for "+8.4 prompt tokens per request")."""

from __future__ import annotations

import random

import pytest

from harness.metrics.prompt_fit import PromptFit


def _fit(pairs: list[tuple[int, int]]) -> PromptFit:
    f = PromptFit()
    for intended, server in pairs:
        f.add(intended, server)
    return f


def test_a_constant_template_offset_is_estimated_and_not_a_mismatch() -> None:
    rng = random.Random(1)
    lengths = [rng.randint(50, 1800) for _ in range(300)]
    f = _fit([(n, n + 9) for n in lengths])
    fit = f.solve()
    assert fit["offset"] == pytest.approx(9.0) and fit["scale_error"] == pytest.approx(0.0, abs=1e-9)
    assert fit["residual_rms"] == pytest.approx(0.0, abs=1e-6)
    assert f.mismatch() == []
    # the builtin tokenizer's scatter of a token or two around it is no mismatch either
    g = _fit([(n, n + 9 + rng.choice((-2, -1, 0, 1, 2))) for n in lengths])
    assert g.mismatch() == [] and g.solve()["offset"] == pytest.approx(9.0, abs=0.5)


def test_one_prompt_length_for_all_reads_the_difference_as_the_offset() -> None:
    f = _fit([(512, 521)] * 40)
    assert f.solve()["offset"] == pytest.approx(9.0) and f.solve()["scale_error"] == 0.0 and f.mismatch() == []


@pytest.mark.parametrize(
    "server, expected",
    [
        (lambda n: round(1.1 * n) + 9, "lengths off by +10.0% in proportion"),
        (lambda n: n + 120, "a constant +120.0 tokens per request, more than a chat template adds"),
    ],
)
def test_a_real_mismatch_is_named(server, expected) -> None:
    rng = random.Random(2)
    f = _fit([(n, server(n)) for n in (rng.randint(50, 1800) for _ in range(200))])
    assert any(expected in m for m in f.mismatch()), f.mismatch()


def test_scatter_beyond_offset_and_scale_is_named() -> None:
    rng = random.Random(3)
    f = _fit([(n, n + 9 + rng.choice((-40, 40))) for n in (rng.randint(300, 500) for _ in range(200))])
    # the scatter is named; the chance slope over a narrow range of lengths is not a scale error
    assert [m.split(" tokens")[0] for m in f.mismatch()] == ["per-request scatter of 39.8"], f.mismatch()


def test_load_processes_merge_exactly() -> None:
    rng = random.Random(4)
    pairs = [(n, round(1.03 * n) + 7) for n in (rng.randint(16, 4000) for _ in range(500))]
    whole, a, b = _fit(pairs), _fit(pairs[:123]), _fit(pairs[123:])
    a.merge(PromptFit.from_dict(b.to_dict()))
    for key, value in whole.solve().items():
        assert a.solve()[key] == pytest.approx(value, rel=1e-9), key
