"""Post-run analyses: what the engine's log, memory and timing say about why a config is slow.

Each analysis (one module, registered by name in `ANALYSES`) reads the finished run directory and
returns one block of `summary.json["diagnosis"]`; the findings rules then turn the blocks into
ranked, typed `findings` with the guides' advice. Nothing here runs during the window.

    from harness.diagnose import DiagnoseOptions, diagnose
    diagnose(summary, run_dir, DiagnoseOptions(slice_s=10, engine_log=path, log_window=(a, b)))
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.diagnose import enginelog, interference, memory, timeslices  # noqa: F401 - register the analyses
from harness.diagnose import ttft_parts  # noqa: F401 - registers its findings rule
from harness.diagnose.base import ANALYSES, DiagnoseOptions, RunInputs
from harness.diagnose.enginelog import LogWindow
from harness.diagnose.findings import findings, headline
from harness.results.schema import Finding, RunSummary

__all__ = ["ANALYSES", "DiagnoseOptions", "LogWindow", "diagnose", "headline"]

#: diagnosis blocks whose message belongs in the validity block (they change what the numbers mean)
_VALIDITY = ("timeslices",)


def diagnose(summary: RunSummary, root: Path, options: DiagnoseOptions) -> RunSummary:
    """Run every analysis on the run directory `root`; add `diagnosis`, `findings` and the validity
    lines to `summary` (in place, also returned). An analysis that fails loses its block only."""
    data = summary.model_dump(mode="json")
    inp = RunInputs.load(Path(root), data, options)
    diag: dict[str, Any] = {}
    for name in ANALYSES:
        try:
            block = ANALYSES.get(name).analyze(inp)
        except Exception as exc:  # noqa: BLE001 - a diagnosis bug must never lose the run
            print(f"warning: post-run analysis {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            block = {"error": f"{type(exc).__name__}: {exc}"}
        if block is not None:
            diag[name] = block
            inp.blocks[name] = block
    summary.diagnosis = diag
    summary.findings = findings(data, diag)
    _validity(summary, diag)
    return summary


def _validity(summary: RunSummary, diag: dict[str, Any]) -> None:
    warnings = summary.validity.setdefault("warnings", [])
    log = diag.get("engine_log") or {}
    for line in log.get("warnings") or []:
        warnings.append(line)
    if any(k in (log.get("events") or {}) for k in ("oom", "cuda_error")):
        summary.validity["ok"] = False
    ss = (diag.get("timeslices") or {}).get("steady_state") or {}
    if ss.get("drift"):
        warnings.append(ss["message"])
        summary.validity["ok"] = False


def top(summary: RunSummary | dict[str, Any], n: int = 3) -> list[Finding]:
    raw = summary.findings if isinstance(summary, RunSummary) else (summary.get("findings") or [])
    out = [f if isinstance(f, Finding) else Finding.model_validate(f) for f in raw]
    return out[:n]
