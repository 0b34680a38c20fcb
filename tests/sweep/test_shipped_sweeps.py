"""Every sweep file shipped under scenarios/sweeps/ validates and plans (its scenarios exist,
its overrides and links are valid); vLLM files have a sim twin."""

from pathlib import Path

import pytest

from harness.sweep.plan import build_plan
from harness.sweep.render import render_plan

SWEEPS = Path(__file__).resolve().parents[2] / "scenarios" / "sweeps"
FILES = sorted(SWEEPS.glob("*.yaml"))


def test_there_are_sweep_files():
    names = {p.stem for p in FILES}
    for step in ("max_num_seqs", "max_num_batched_tokens", "prefix_caching", "fp8_kv_cache", "gpu_memory_utilization"):
        assert f"vllm_{step}" in names and f"sim_{step}" in names, step


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shipped_sweep_plans(path):
    plan = build_plan(path)
    assert plan.cells
    text = render_plan(plan)
    assert "Nothing was started" in text
    if plan.sweep.engine.kind == "sim":
        # runs here in minutes, not hours
        for cell in plan.cells:
            assert (cell.resolved.load.duration_s or 0) <= 15, cell.id


def test_the_readmes_first_sweep_ranks_its_configs_at_one_load():
    """README's first sweep example must end with an answer (audit N12): its configs linked the
    client's concurrency to the flag (8/32/128 users), so it ended 'configs NOT ranked'. Every
    cell now serves the same client load, which is what the ranking needs."""
    readme = (SWEEPS.parents[1] / "README.md").read_text()
    first = next(line.split()[2] for line in readme.splitlines() if line.startswith("harness sweep scenarios/sweeps/"))
    plan = build_plan(SWEEPS.parents[1] / first)
    loads = {(c.resolved.load.concurrency, c.resolved.load.rate) for c in plan.cells}
    assert len({c.config.id for c in plan.cells}) >= 3 and len(loads) == 1, loads


def test_sweep_code_never_imports_locust_or_gevent():
    import subprocess
    import sys

    code = (
        "import sys, harness.cli.sweep, harness.sweep.execute, harness.sweep.plan, harness.sweep.render, harness.run;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('locust','gevent')]; print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
