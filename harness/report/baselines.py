"""Baselines: saved results of a deployment configuration, kept with its engine config.

    results/baselines/<name>/
      baseline.json          what was saved, from where, when; scenario, fingerprint, headline numbers
      engine_config.<ext>    the engine config / launch file given with --engine-config (a sweep's
                             sweep.yaml is kept as is)
      summary.json, histograms.json, scenario.yaml, requests.jsonl.gz     (a run)
      index.json, sweep.yaml, summary.csv, runs/<cell>/...                (a sweep: the same per cell)

Per-request records are kept (gzipped) because `compare` needs them for its noise estimate.
The root is `results/baselines` under the current directory, or $HARNESS_BASELINES.
`compare` and `gh-summary` accept `baseline:<name>` wherever they take a directory.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import __version__
from harness.errors import UserError
from harness.report.data import RUN_FILES, find_file, kind_of, load_run
from harness.report.sweep_data import load_sweep

DEFAULT_ROOT = Path("results/baselines")
PREFIX = "baseline:"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: files of a run directory a baseline keeps (requests.jsonl is gzipped)
KEEP = ("summary.json", "histograms.json", "scenario.yaml")


def root_dir(explicit: Path | str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("HARNESS_BASELINES")
    return Path(env) if env else DEFAULT_ROOT


def names(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "baseline.json").is_file())


def resolve(spec: str, root: Path | None = None) -> Path:
    """`baseline:<name>` -> its directory; anything else is returned as a path."""
    if not spec.startswith(PREFIX):
        return Path(spec)
    name = spec[len(PREFIX) :]
    base_root = root_dir(root)
    path = base_root / name
    if not (path / "baseline.json").is_file():
        known = names(base_root)
        choices = f"saved ones: {', '.join(known)}" if known else f"none saved under {base_root} yet"
        raise UserError(
            f"{spec}: no such baseline ({choices}); save one with `harness baseline save RUN_DIR --name {name or 'NAME'}`"
        )
    return path


def _copy_run(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for name in KEEP:
        f = src / name
        if f.is_file():
            shutil.copy2(f, dst / name)
    req = find_file(src, "requests.jsonl")
    if req is not None:
        if req.suffix == ".gz":
            shutil.copy2(req, dst / "requests.jsonl.gz")
        else:
            with req.open("rb") as fin, gzip.open(dst / "requests.jsonl.gz", "wb", compresslevel=6) as fout:
                shutil.copyfileobj(fin, fout)


def _headline(summary: Any) -> dict[str, Any]:
    from harness.compare.metrics import METRICS

    out: dict[str, Any] = {}
    for key in ("ttft.p50", "ttft.p99", "itl.p99", "e2e.p99", "rps", "output_tps", "goodput_rps"):
        v = METRICS[key].get(summary)
        if v is not None:
            out[key] = round(v, 4)
    return out


def save(
    src: Path | str,
    name: str,
    engine_config: Path | str | None = None,
    root: Path | str | None = None,
    force: bool = False,
) -> tuple[Path, list[str]]:
    """Copy a run or sweep directory into the baseline store. Returns (path, notes)."""
    src = Path(src)
    if not NAME_RE.match(name):
        raise UserError(f"--name {name!r}: use letters, digits, '.', '_' and '-' (e.g. llama8b-h100-tp1)")
    kind = kind_of(src) if src.is_dir() else "missing"
    if kind not in ("run", "sweep"):
        raise UserError(
            f"{src}: not a run directory (summary.json) or a sweep directory (index.json); pass what `harness run` or `harness sweep` wrote"
        )
    if engine_config is not None and not Path(engine_config).is_file():
        raise UserError(
            f"--engine-config {engine_config}: no such file; pass the engine's launch/config file (YAML, JSON, a shell script)"
        )
    base_root = root_dir(root)
    dest = base_root / name
    if dest.exists() and not force:
        raise UserError(f"baseline {name!r} exists at {dest}; pass --force to replace it, or choose another --name")
    notes: list[str] = []
    base_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base_root))
    try:
        meta: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "saved_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": str(src.resolve()),
            "harness_version": __version__,
        }
        if kind == "run":
            run = load_run(src)
            if run.summary_derived:
                raise UserError(
                    f"{src}: summary.json is missing or unreadable; a baseline needs a finished run (re-run it, or pick another run)"
                )
            if run.summary.status != "complete":
                notes.append(
                    f"the run's status is {run.summary.status!r}; a baseline is best taken from a complete run"
                )
            _copy_run(src, tmp)
            meta.update(
                scenario=run.name,
                fingerprint=run.fingerprint.model_dump(mode="json"),
                target=run.summary.target.model_dump(mode="json", include={"url", "api", "model"}),
                status=run.summary.status,
                headline=_headline(run.summary),
                has_requests=find_file(src, "requests.jsonl") is not None,
            )
            if not meta["has_requests"]:
                notes.append(
                    "requests.jsonl is missing: comparisons against this baseline cannot estimate per-request noise"
                )
        else:
            sweep = load_sweep(src)
            for fname in ("index.json", "sweep.yaml", "summary.csv"):
                if (src / fname).is_file():
                    shutil.copy2(src / fname, tmp / fname)
            copied = 0
            for cell in sweep.cells:
                if cell.run_dir is None or not cell.run_dir.is_dir():
                    continue
                rel = cell.run_dir.resolve().relative_to(src.resolve())
                _copy_run(cell.run_dir, tmp / rel)
                copied += 1
            meta.update(
                sweep=sweep.name,
                scenario=", ".join(sweep.scenarios),
                configs=sweep.configs,
                cells=len(sweep.cells),
                cells_with_results=copied,
                fingerprint={c.id: c.run.fingerprint.model_dump(mode="json") for c in sweep.cells if c.run is not None},
            )
            if (src / "sweep.yaml").is_file():
                meta["engine_config"] = "sweep.yaml"
        if engine_config is not None:
            ec = Path(engine_config)
            target = f"engine_config{ec.suffix or '.txt'}"
            shutil.copy2(ec, tmp / target)
            meta["engine_config"] = target
            meta["engine_config_source"] = str(ec.resolve())
        elif kind == "run":
            notes.append(
                "no --engine-config given: the baseline does not record the engine's configuration; "
                "pass --engine-config FILE so a later regression can be traced to a config change"
            )
        (tmp / "baseline.json").write_text(json.dumps(meta, indent=2) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest, notes


def list_all(root: Path | str | None = None) -> list[dict[str, Any]]:
    base_root = root_dir(root)
    out = []
    for n in names(base_root):
        try:
            meta = json.loads((base_root / n / "baseline.json").read_text())
        except (OSError, json.JSONDecodeError):
            meta = {"name": n, "kind": "?", "scenario": "(baseline.json unreadable)"}
        meta["path"] = str(base_root / n)
        out.append(meta)
    return out


__all__ = ["DEFAULT_ROOT", "PREFIX", "RUN_FILES", "list_all", "names", "resolve", "root_dir", "save"]
