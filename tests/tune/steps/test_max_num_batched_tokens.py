"""The token-budget step's pick between two winning budgets, on the H200's own cells: vLLM 0.26.0,
the Llama-3-8B shape, 32 users of assist_docs (results/examples/gpu-h200-vllm-tune). Both 512 and
2048 beat the default there; the tune of that day took 2048 as "the largest" at ITL p99 51.4 ms
against 512's 17.4 ms. The rule since then is the guide's "measure both" read as `harness compare
2048-CELL 512-CELL` reads it (ITL p99 -66% beyond noise, nothing worse): 512 holds."""

from __future__ import annotations

from pathlib import Path

from harness.results.models.sweep import SweepIndex
from harness.tune.judge import judge
from harness.tune.measure import Measurement
from harness.tune.steps.max_num_batched_tokens import BETWEEN, pick

ROOT = Path(__file__).resolve().parents[3]
STEPS = ROOT / "results" / "examples" / "gpu-h200-vllm-tune" / "steps"
LEVEL = "concurrency=32"


def measurement(step: str) -> Measurement:
    index = SweepIndex.model_validate_json((STEPS / step / "index.json").read_text())
    (cell,) = index.cells
    return Measurement(dict(cell.flags), cell.config_id, STEPS / step, [cell], LEVEL)


def between(holder: tuple[int, Measurement], smaller: tuple[int, Measurement]):
    """The step's BETWEEN judgement, the smaller budget as the candidate (no more evidence to buy)."""
    return judge(holder[1], smaller[1], 5.0, BETWEEN, "incumbent", settled=True)


def test_the_h200s_smaller_budget_holds_when_it_is_better_beyond_noise() -> None:
    b512, b2048 = measurement("06-max-num-batched-tokens"), measurement("06-max-num-batched-tokens-more")
    assert b512.ok and b2048.ok

    best, notes = pick([(512, b512), (2048, b2048)], between)
    assert best == 0, notes  # 512
    assert notes[0].startswith("512 vs 2048: ") and notes[0].endswith("512 holds"), notes
    rows = between((2048, b2048), (512, b512)).cmp.rows["assist_docs"]
    assert rows["itl.p99"].verdict == "improved"
    assert all(rows[k].verdict != "REGRESSION" for k in ("ttft.p50", "ttft.p99", "tpot.p50"))


def test_a_tie_keeps_the_larger_budget() -> None:
    """The same cells on both sides: no difference beyond noise, and the larger budget holds (a
    smaller one only makes long prompts slower to start)."""
    b2048 = measurement("06-max-num-batched-tokens-more")

    best, notes = pick([(512, b2048), (2048, b2048)], between)
    assert best == 1 and notes[0].endswith("2048 holds"), notes
