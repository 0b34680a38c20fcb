"""Fabricated run and sweep directories shared by the report tests (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .fabricate import make_run, make_sweep, scenario_dict


@pytest.fixture(scope="session")
def fx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report_fx")
    out = {
        "run_a": make_run(root / "run_a", seed=1),
        "run_b": make_run(root / "run_b", seed=2),  # same workload, other noise
        "run_slow": make_run(root / "run_slow", seed=3, speed=0.7),  # a clearly slower engine
        "run_other": make_run(root / "run_other", seed=4, scenario=scenario_dict(concurrency=32, temperature=0.7)),
        "run_warn": make_run(
            root / "run_warn",
            seed=5,
            failed=6,
            telemetry=False,
            warnings=("client CPU saturated (98 % max): latencies include client delay",),
        ),
        "crashed": make_run(
            root / "crashed",
            seed=6,
            omit=("summary.json", "histograms.json", "engine_metrics.jsonl"),
            truncate_requests=True,
        ),
        "sweep": make_sweep(root / "sweep", n=80),
        "sweep_same": make_sweep(root / "sweep_same", seed=500, n=80),
        "sweep_slow": make_sweep(
            root / "sweep_slow",
            seed=900,
            n=80,
            speed_scale=0.7,
            failed_config="c2-seqs256",
            configs={"c0-base": 1.0, "c1-seqs128": 1.25, "c2-seqs256": 0.9, "c3-seqs512": 1.0},
        ),
    }
    for i in range(3):
        out[f"rep_a{i}"] = make_run(root / "rep_a" / f"r{i}", seed=100 + i, n=120)
        out[f"rep_b{i}"] = make_run(root / "rep_b" / f"r{i}", seed=200 + i, n=120, speed=0.85)
    out["rep_a"] = root / "rep_a"
    out["rep_b"] = root / "rep_b"
    out["root"] = root
    return out
