"""The shipped startup files plan (configs, commands, the scenario) without starting anything."""

from pathlib import Path

import pytest

from harness.startup.plan import build_startup_plan

FILES = sorted((Path(__file__).resolve().parents[2] / "scenarios" / "startup").glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shipped_startup_file_plans(path):
    plan = build_startup_plan(path)
    assert [c.id for c in plan.configs][:2] == ["base", "enforce-eager=true"]
    assert plan.sweep_plan is not None and all(plan.cell(c) is not None for c in plan.configs)
    assert any("--enforce-eager" in plan.command(c) for c in plan.configs)


def test_both_twins_ship():
    assert {p.name for p in FILES} >= {"sim_eager_vs_graphs.yaml", "vllm_eager_vs_graphs.yaml"}
