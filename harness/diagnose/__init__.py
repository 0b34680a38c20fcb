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

from pydantic import ValidationError

from harness.diagnose import (  # each module registers its analysis on import
    enginelog,
    interference,
    memory,
    timeslices,
    ttft_parts,
)
from harness.diagnose.base import ANALYSES, DiagnoseOptions, RunInputs
from harness.diagnose.enginelog import LogWindow
from harness.diagnose.findings import findings, headline
from harness.results.models.diagnosis import Diagnosis, EngineLogBlock, TimeslicesBlock
from harness.results.models.summary import RunSummary

__all__ = [
    "ANALYSES",
    "DiagnoseOptions",
    "LogWindow",
    "diagnose",
    "enginelog",
    "headline",
    "interference",
    "memory",
    "timeslices",
    "ttft_parts",
]

#: diagnosis blocks whose message belongs in the validity block (they change what the numbers mean)
_VALIDITY = ("timeslices",)


def diagnose(summary: RunSummary, root: Path, options: DiagnoseOptions) -> RunSummary:
    """Run every analysis on the run directory `root`; add `diagnosis`, `findings` and the validity
    lines to `summary` (in place, also returned). An analysis that fails loses its block only."""
    inp = RunInputs.load(Path(root), summary, options)
    diag: dict[str, Any] = {}
    for name in ANALYSES:
        try:
            block = ANALYSES.get(name).analyze(inp)
        except Exception as exc:  # a diagnosis bug must never lose the run
            print(f"warning: post-run analysis {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            block = {"error": f"{type(exc).__name__}: {exc}"}
        if block is not None:
            diag[name] = block
            inp.blocks[name] = block
    summary.diagnosis = _typed(diag)
    summary.findings = findings(summary, summary.diagnosis)
    _validity(summary, summary.diagnosis)
    return summary


def _typed(diag: dict[str, Any]) -> Diagnosis:
    """The blocks as summary.json's model (harness.results.models.diagnosis); a block the model does
    not describe (an analysis changed without its model) becomes its error, never a lost run."""
    try:
        return Diagnosis.model_validate(diag)
    except ValidationError:
        pass
    out: dict[str, Any] = {}
    for name, block in diag.items():
        try:
            Diagnosis.model_validate({name: block})
            out[name] = block
        except ValidationError as exc:
            err = exc.errors()[0]
            why = f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            print(
                f"warning: post-run analysis {name}: its block does not match harness/results/models/diagnosis.py ({why})",
                file=sys.stderr,
            )
            out[name] = {"error": f"block does not match its model: {why}"}
    return Diagnosis.model_validate(out)


def _validity(summary: RunSummary, diag: Diagnosis) -> None:
    warnings = summary.validity.warnings
    log = diag.engine_log
    if isinstance(log, EngineLogBlock):
        warnings.extend(log.warnings)
        if any(k in log.events for k in ("oom", "cuda_error")):
            summary.validity.ok = False
    ts = diag.timeslices
    if isinstance(ts, TimeslicesBlock) and ts.steady_state.drift:
        warnings.append(ts.steady_state.message or "not in steady state")
        summary.validity.ok = False
