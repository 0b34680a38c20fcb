"""Deterministic generation: request i is a pure function of (seed, i)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import UserError
from harness.scenario import Scenario
from harness.workload.builtin_tokenizer import VOCAB, BuiltinTokenizer
from harness.workload.generator import WorkloadGenerator, expected_prefix_hit_rate
from harness.workload.tokenizers import HFTokenizer, load_tokenizer

MIXED: dict[str, Any] = {
    "name": "g",
    "seed": 42,
    "load": {"concurrency": 4, "requests": 100},
    "workload": {
        "classes": [
            {
                "name": "chat",
                "weight": 6,
                "input_tokens": {"dist": "lognormal", "mean": 300, "sigma": 0.6, "min": 16, "max": 2000},
                "output_tokens": {"dist": "uniform", "min": 8, "max": 64},
            },
            {
                "name": "doc",
                "weight": 3,
                "input_tokens": {"dist": "uniform", "min": 500, "max": 900},
                "output_tokens": {"dist": "normal", "mean": 100, "std": 30, "min": 16, "max": 256},
            },
            {
                "name": "sys",
                "weight": 1,
                "input_tokens": {"dist": "uniform", "min": 120, "max": 160},
                "output_tokens": 10,
                "shared_prefix": {"tokens": 100, "count": 3, "fraction": 0.5},
            },
        ]
    },
}


def _gen(seed: int = 42, data: dict[str, Any] = MIXED, tok=None) -> WorkloadGenerator:
    return WorkloadGenerator(Scenario.model_validate({**data, "seed": seed}), tok)


def test_same_seed_same_requests() -> None:
    a, b = _gen(), _gen()
    assert [a.request(i) for i in range(300)] == [b.request(i) for i in range(300)]


def test_request_is_independent_of_order() -> None:
    g = _gen()
    forward = {i: g.request(i) for i in range(50)}
    backward = {i: _gen().request(i) for i in reversed(range(50))}
    assert forward == backward


def test_other_seed_other_requests() -> None:
    a, b = _gen(1), _gen(2)
    assert [a.request(i).text for i in range(20)] != [b.request(i).text for i in range(20)]


def test_warmup_domain_is_separate() -> None:
    g = _gen()
    measured = [g.request(i) for i in range(50)]
    warm = [g.request(i, warmup=True) for i in range(50)]
    assert all(w.warmup for w in warm) and not any(m.warmup for m in measured)
    assert [w.text for w in warm] != [m.text for m in measured]
    # generating warmup requests first changes nothing in the measured stream
    g2 = _gen()
    for i in range(500):
        g2.request(i, warmup=True)
    assert [g2.request(i) for i in range(50)] == measured


def test_worker_shares_are_disjoint_and_cover_the_stream() -> None:
    """Closed loop hands worker w the indices w, w+n, ...: their union is the single-worker stream."""
    single = [_gen().request(i) for i in range(60)]
    workers = 3
    shares = [[_gen().request(i) for i in range(w, 60, workers)] for w in range(workers)]
    indices = [r.index for share in shares for r in share]
    assert len(indices) == len(set(indices)) == 60
    assert sorted((r for share in shares for r in share), key=lambda r: r.index) == single


def test_class_mix_follows_weights() -> None:
    g = _gen()
    names = [g.request(i).class_name for i in range(3000)]
    shares = {n: names.count(n) / len(names) for n in ("chat", "doc", "sys")}
    # binomial standard error at n=3000 is <= 0.0092; allow 4 of them
    assert shares["chat"] == pytest.approx(0.6, abs=0.037)
    assert shares["doc"] == pytest.approx(0.3, abs=0.037)
    assert shares["sys"] == pytest.approx(0.1, abs=0.037)


def test_prompt_word_count_is_the_intended_token_count() -> None:
    g = _gen()
    tok = BuiltinTokenizer()
    vocab = set(VOCAB)
    for i in range(400):
        r = g.request(i)
        words = (r.prefix + " " + r.text).split()
        assert tok.count(r.prefix) + tok.count(r.text) == r.input_tokens == len(words)
        assert set(words) <= vocab
        cls = next(c for c in g.classes if c.name == r.class_name)
        dist = cls.input_tokens
        if r.prefix_id is None and dist.dist != "fixed":
            assert dist.min <= r.input_tokens <= (dist.max or 10**9)


def test_output_lengths_respect_bounds() -> None:
    g = _gen()
    for i in range(400):
        r = g.request(i)
        if r.class_name == "chat":
            assert 8 <= r.output_tokens <= 64
        elif r.class_name == "doc":
            assert 16 <= r.output_tokens <= 256
        else:
            assert r.output_tokens == 10


def test_shared_prefixes_repeat_exactly() -> None:
    g = _gen()
    reqs = [g.request(i) for i in range(3000) if g.request(i).class_name == "sys"]
    with_prefix = [r for r in reqs if r.prefix_id is not None]
    without = [r for r in reqs if r.prefix_id is None]
    # fraction 0.5 of ~300 sys requests
    assert 0.4 < len(with_prefix) / len(reqs) < 0.6
    assert all(r.prefix == "" for r in without)
    by_id: dict[int, set[str]] = {}
    for r in with_prefix:
        by_id.setdefault(r.prefix_id, set()).add(r.prefix)
        assert len(r.prefix.split()) == 100
        assert r.input_tokens == 100 + len(r.text.split())
    assert set(by_id) == {0, 1, 2}
    assert all(len(texts) == 1 for texts in by_id.values())  # one text per prefix id
    assert len({next(iter(t)) for t in by_id.values()}) == 3  # distinct prefixes
    # the request's own text never repeats a prefix: KV sharing only through the declared prefix
    own_starts = {tuple(r.text.split()[:8]) for r in with_prefix}
    assert len(own_starts) == len(with_prefix)


def test_prefix_longer_than_input_keeps_one_own_token() -> None:
    """A prefix as long as every prompt contradicts input_tokens (which includes it) and is refused
    when the scenario loads; a wide distribution's rare short draw still gets the prefix plus one
    token of its own (harness.workload.context counts the same)."""
    data = {
        **MIXED,
        "workload": {
            "classes": [{"name": "p", "input_tokens": 50, "output_tokens": 4, "shared_prefix": {"tokens": 80}}]
        },
    }
    with pytest.raises(ValueError, match="input_tokens is the whole prompt, the shared prefix included"):
        _gen(data=data)
    wide = {
        **MIXED,
        "workload": {
            "classes": [
                {
                    "name": "p",
                    "input_tokens": {"dist": "lognormal", "mean": 200, "sigma": 1.2},
                    "output_tokens": 4,
                    "shared_prefix": {"tokens": 80},
                }
            ]
        },
    }
    gen = _gen(data=wide)
    short = next(r for r in (gen.request(i) for i in range(400)) if r.input_tokens == 81)
    assert (len(short.prefix.split()), len(short.text.split())) == (80, 1)


def _scenario(classes: list[dict[str, Any]]) -> Scenario:
    return Scenario.model_validate({**MIXED, "workload": {"classes": classes}})


def test_expected_prefix_hit_rate() -> None:
    # shared_prefix.yaml's numbers: 2,000-token prefix used by 90%, prompts 2,100-2,400
    sc = _scenario(
        [
            {
                "name": "a",
                "input_tokens": {"dist": "uniform", "min": 2100, "max": 2400},
                "output_tokens": 64,
                "shared_prefix": {"tokens": 2000, "count": 4, "fraction": 0.9},
            }
        ]
    )
    assert expected_prefix_hit_rate(sc) == pytest.approx(0.9 * 2000 / 2250)
    # only whole 16-token blocks count: 1000 tokens -> 992 cached
    sc = _scenario(
        [{"name": "a", "input_tokens": 2000, "output_tokens": 64, "shared_prefix": {"tokens": 1000, "fraction": 1.0}}]
    )
    assert expected_prefix_hit_rate(sc) == pytest.approx(992 / 2000)
    assert expected_prefix_hit_rate(sc, block_size=1) == pytest.approx(0.5)
    # a class without a prefix dilutes the rate by its weight and length
    sc = _scenario(
        [
            {
                "name": "a",
                "weight": 1,
                "input_tokens": 1601,
                "output_tokens": 8,
                "shared_prefix": {"tokens": 1600, "fraction": 1.0},
            },
            {"name": "b", "weight": 1, "input_tokens": 400, "output_tokens": 8},
        ]
    )
    # prefix=1600 of a 1601-token prompt (one own token); cached 1600 of (1601 + 400) / 2
    assert expected_prefix_hit_rate(sc) == pytest.approx(1600 / 2001)
    assert 0 <= expected_prefix_hit_rate(sc) <= 1
    assert expected_prefix_hit_rate(_scenario([{"name": "a", "input_tokens": 5, "output_tokens": 5}])) is None


def _word_tokenizer(path: Path) -> Path:
    """A real `tokenizers` tokenizer.json: whitespace pre-tokenizer, characters as the vocabulary,
    so each pseudo-word is several tokens and fit() really has to cut."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab[ch] = len(vocab)
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab["##" + ch] = len(vocab)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    out = path / "tokenizer.json"
    tok.save(str(out))
    return out


def test_model_tokenizer_hits_the_token_targets(tmp_path: Path) -> None:
    _word_tokenizer(tmp_path)
    tok = load_tokenizer(str(tmp_path))  # a directory holding tokenizer.json
    assert isinstance(tok, HFTokenizer) and tok.id.startswith("hf-")
    assert tok.count("bab") == 3  # three characters, three tokens
    g = _gen(tok=tok)
    for i in range(40):
        r = g.request(i)
        own = r.input_tokens - (100 if r.prefix_id is not None else 0)
        assert tok.count(r.text) == own
        if r.prefix:
            assert tok.count(r.prefix) == 100
    # same tokenizer file, same id; the id enters the fingerprint, the path does not
    assert load_tokenizer(str(tmp_path / "tokenizer.json")).id == tok.id


def test_tokenizer_path_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        load_tokenizer(str(tmp_path / "none"))
    assert info.value.lines[0].startswith("workload.tokenizer: ")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(UserError) as info:
        load_tokenizer(str(bad))
    assert info.value.lines[0].startswith(f"workload.tokenizer: cannot load {bad}")
    assert isinstance(load_tokenizer(None), BuiltinTokenizer) and isinstance(
        load_tokenizer("builtin"), BuiltinTokenizer
    )


def test_relative_tokenizer_path_resolves_against_the_scenario_dir(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    _word_tokenizer(tmp_path / "tok")
    assert isinstance(load_tokenizer("tok", tmp_path), HFTokenizer)


def test_builtin_tokenizer_round_trip() -> None:
    tok = BuiltinTokenizer()
    ids = [0, 5, 1619, 42]
    text = tok.decode_ids(ids)
    assert tok.count(text) == 4 and tok.encode_ids(text) == ids
    assert len(VOCAB) == len(set(VOCAB)) == 1620


def test_huge_finite_class_weights_still_mix() -> None:
    """Audit R19: two classes of weight 1e308 summed to inf, every share was NaN (numpy printed an
    overflow warning) and all 72 requests went to the last class."""
    import warnings

    data = {
        **MIXED,
        "workload": {
            "classes": [
                {"name": "a", "weight": 1e308, "input_tokens": 16, "output_tokens": 8},
                {"name": "b", "weight": 1e308, "input_tokens": 16, "output_tokens": 8},
            ]
        },
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        gen = _gen(data=data)
        names = [gen.request(i).class_name for i in range(400)]
    assert 150 < names.count("a") < 250, names.count("a")
