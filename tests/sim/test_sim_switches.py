"""The simulator reads vLLM's switches as vLLM 0.32's `vllm serve` does: `--X` and `--no-X`, and
underscores in an option's name as dashes; `--X=false` is refused by both."""

from __future__ import annotations

import pytest

from harness.sim.cli import build_parser, parse


@pytest.mark.parametrize(
    "argv, eager",
    [
        ([], False),
        (["--enforce-eager"], True),
        (["--no-enforce-eager"], False),
        (["--enforce_eager"], True),
        (["--no_enforce_eager"], False),
        (["--enforce-eager", "--no-enforce-eager"], False),
    ],
)
def test_enforce_eager_spellings(argv: list[str], eager: bool) -> None:
    assert parse(build_parser(), argv).enforce_eager is eager


def test_every_modelled_switch_has_its_no_form() -> None:
    ns = parse(
        build_parser(),
        [
            "--enable-lora",
            "--no-enable-lora",
            "--no-trust-remote-code",
            "--no-enable-prefix-caching",
            "--no-enable-chunked-prefill",
            "--no-enable-prompt-tokens-details",
            "--no-enable-force-include-usage",
            "--no-enable-per-request-metrics",
            "--no-enable-request-id-headers",
            "--no-disable-uvicorn-access-log",
            "--max_num_seqs",
            "8",
        ],
    )
    assert not ns.enable_lora and not ns.enable_prefix_caching and not ns.enable_chunked_prefill
    assert not ns.enable_prompt_tokens_details and not ns.enable_per_request_metrics and ns.max_num_seqs == 8


def test_an_explicit_value_on_a_switch_is_refused_as_vllm_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(build_parser(), ["--enforce-eager=false"])
    assert exit_.value.code == 2 and "ignored explicit argument 'false'" in capsys.readouterr().err
