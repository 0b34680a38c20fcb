"""The end-of-run console summary says only what was measured."""

from __future__ import annotations

import io
import json

from harness.results.console import print_summary
from harness.results.schema import RunSummary
from tests.report.fabricate import make_run


def _printed(tmp_path, **scenario_extra) -> str:
    run = make_run(tmp_path / "r")
    data = json.loads((run / "summary.json").read_text())
    data["scenario"].update(scenario_extra)
    out = io.StringIO()
    print_summary(RunSummary.model_validate(data), run, file=out)
    return out.getvalue()


def test_no_goodput_line_without_an_slo(tmp_path):
    """Audit D19: smoke.yaml sets no SLO, yet the console printed 'goodput ... (100.0% of requests
    met the SLOs)': every completed request counts as good when nothing is asked of it."""
    text = _printed(tmp_path, slo_set=False)
    assert "  goodput " not in text and "met the SLOs" not in text
    assert "requests/s" in text  # the rest of the summary is there


def test_goodput_line_with_an_slo(tmp_path):
    text = _printed(tmp_path, slo_set=True)
    assert "met the SLOs" in text


def test_gpu_memory_line_says_why_when_nvml_is_unavailable(tmp_path):
    """Audit D20: without NVML the console printed no GPU-memory line at all (the README says it
    prints one); now the line is there with the reason."""
    run = make_run(tmp_path / "r")
    data = json.loads((run / "summary.json").read_text())
    data["engine"]["gpu_memory"] = {"available": False, "reason": "NVML unavailable: NVML Shared Library Not Found"}
    out = io.StringIO()
    print_summary(RunSummary.model_validate(data), run, file=out)
    assert "GPU memory not available (NVML unavailable: NVML Shared Library Not Found)" in out.getvalue()
    data["engine"]["gpu_memory"] = {"available": True, "used_max_bytes": 30 * 2**30, "total_bytes": 80 * 2**30}
    out = io.StringIO()
    print_summary(RunSummary.model_validate(data), run, file=out)
    assert "GPU memory 30.0 GiB used of 80.0 GiB" in out.getvalue()


def test_gpu_memory_is_printed_once(tmp_path):
    """Audit N20: on the simulator the console printed GPU memory twice ('73.6 GiB used of 80.0 GiB
    (simulated ...)' and, after the class table, '(simulated) 73.60 -> 73.60 GiB over the window')."""
    run = make_run(tmp_path / "r")
    data = json.loads((run / "summary.json").read_text())
    data["engine"]["gpu_memory"] = {
        "available": True,
        "used_max_bytes": int(73.6 * 2**30),
        "total_bytes": 80 * 2**30,
        "simulated": True,
    }
    data["diagnosis"] = {
        "memory": {
            "source": "simulated",
            "samples": 10,
            "growth_gib": 0.0,
            "start_gib": 73.6,
            "end_gib": 73.6,
            "peak_gib": 73.6,
            "margin_gib": 6.4,
        }
    }
    out = io.StringIO()
    print_summary(RunSummary.model_validate(data), run, file=out)
    lines = [ln for ln in out.getvalue().splitlines() if "GPU memory" in ln]
    assert lines == [
        "  GPU memory 73.6 GiB used of 80.0 GiB  (simulated engine's model, not a measurement); "
        "73.60 -> 73.60 GiB over the window (peak 73.60, 6.40 GiB left)"
    ], lines
