"""Flags in the sweep report paste into a command: the same argv the sweep gave the engine (N10)."""

from __future__ import annotations

import shlex

from harness.report.sweep_view import flags_text
from harness.sweep.flags import render_flag


def test_json_valued_flags_are_json_that_pastes_into_a_command() -> None:
    flags = {
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.6},
        "max-num-seqs": 64,
        "enable-prefix-caching": False,
        "enforce-eager": True,
        "cuda-graph-sizes": [1, 2, 4],
        "served-model-name": "my model",
    }
    text = flags_text(flags)
    assert "{'method'" not in text  # not a Python dict (audit N10)
    assert '--speculative-config \'{"method":"ngram","num_speculative_tokens":3,"acceptance_rate":0.6}\'' in text
    argv = [tok for name, value in flags.items() for tok in render_flag(name, value)]
    assert shlex.split(text) == argv  # what the engine was started with, token for token
