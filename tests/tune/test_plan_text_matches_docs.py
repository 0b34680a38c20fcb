"""`harness tune --plan` and docs/tune.md say the same (audit N15: the plan said 'raise below 50%
KV' and '(0.85, 0.75, 0.6)' where the docs, and the code, say 'KV below 85%' and '0.85, 0.75, 0.6,
0.5'). The plan's text is built from the steps' own constants; every figure in it is in the
step's row of the docs table."""

from __future__ import annotations

import re
from pathlib import Path

from harness.tune.steps import gpu_memory, max_num_seqs
from harness.tune.steps.base import STEPS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tune.md"


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"\| `([a-z-]+)` \|(.*)", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_every_figure_of_the_plan_is_in_the_docs_row_of_its_step() -> None:
    rows = _rows()
    for name in STEPS:
        summary = STEPS.get(name).summary
        assert name in rows, f"docs/tune.md has no row for step {name}"
        missing = [n for n in re.findall(r"\d+(?:\.\d+)?%?", summary) if n not in rows[name]]
        assert not missing, f"step {name}: the plan says {missing} that docs/tune.md's row does not: {summary!r}"


def test_the_plan_states_what_the_steps_do() -> None:
    fractions = ", ".join(map(str, gpu_memory.FALLBACK_FRACTIONS))
    assert fractions == "0.85, 0.75, 0.6, 0.5"
    assert fractions in STEPS.get("gpu-memory").summary and fractions in _rows()["gpu-memory"]
    assert "KV below 85%" in STEPS.get("max-num-seqs").summary and "KV below 85%" in _rows()["max-num-seqs"]
    assert max_num_seqs.RAISE_BELOW_KV == 0.85
