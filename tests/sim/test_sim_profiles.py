"""The shipped calibration equals what bench/sim_fit_h200.py fits from the committed H200 runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_h200_profile_is_the_fit_of_the_committed_runs():
    spec = importlib.util.spec_from_file_location("sim_fit_h200", ROOT / "bench" / "sim_fit_h200.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    from harness.sim.profiles import PROFILES

    fitted = fit.fit(ROOT / "results" / "examples")
    shipped = PROFILES["h200-llama8b-vllm026"]
    assert {k: shipped[k] for k in fitted} == fitted
    # and the fit is physical: below the H200's datasheet (4.8 TB/s, ~990 dense TFLOPS), overheads positive
    assert 2.0 < fitted["sim_hbm_tbps"] < 4.8 and 300 < fitted["sim_tflops"] < 990
    assert (
        fitted["sim_step_overhead_ms"] > 0
        and fitted["sim_seq_overhead_us"] > 0
        and fitted["sim_request_overhead_ms"] > 0
    )
