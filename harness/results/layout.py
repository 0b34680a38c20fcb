"""Run directory paths and crash-safe writes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def default_run_dir(scenario_name: str, root: Path = Path("results")) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = root / f"{stamp}-{scenario_name}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{stamp}-{scenario_name}-{n}"
    return path


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temp file then rename, so a reader never sees half a file."""
    _write_then_rename(path, json.dumps(data, indent=2, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    _write_then_rename(path, text)


def _write_then_rename(path: Path, text: str) -> None:
    """A temp file renamed over `path`; on a write error (a full disk) the half-written temp file
    is removed, its bytes freed, and the error raised with `path` as its file name."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        exc.filename = str(path)
        raise
    os.replace(tmp, path)


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def create(self) -> RunDir:
        """Make the directory; a place that cannot hold it (a file, no permission, a name too long)
        is the user's to fix, so it is a one-line error, not an internal one."""
        from harness.errors import UserError

        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UserError(f"{self.root}: is a file, not a directory; give a directory for the run's files") from None
        except OSError as exc:
            raise UserError(
                f"{self.root}: cannot create the run directory ({exc.strerror}); give another --out"
            ) from None
        return self

    scenario = property(lambda self: self.root / "scenario.yaml")
    summary = property(lambda self: self.root / "summary.json")
    histograms = property(lambda self: self.root / "histograms.json")
    requests = property(lambda self: self.root / "requests.jsonl")
    engine_metrics = property(lambda self: self.root / "engine_metrics.jsonl")
    progress = property(lambda self: self.root / "progress.jsonl")
    plan = property(lambda self: self.root / "load_plan.json")
    load_log = property(lambda self: self.root / "load.log")
    sim_log = property(lambda self: self.root / "sim.log")

    def load_results(self) -> list[Path]:
        return sorted(self.root.glob("load_result*.json"))
