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
