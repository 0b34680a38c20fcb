"""Load run and sweep directories for reports and comparisons, tolerating crashed runs.

Any file of a run directory may be missing or cut short (a run that crashed, a copy in
progress). Loading never fails on that: what is missing or damaged is listed in
`RunData.notes`, in words a user can act on, and the report shows those notes at the top.
When `summary.json` is missing, a partial summary is computed from `requests.jsonl`
(harness.report.partial_summary). Sweep directories load in harness.report.sweep_data.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import ValidationError

from harness.errors import UserError
from harness.metrics.table import BY_NAME
from harness.report.partial_summary import summary_from_requests
from harness.results import hdr
from harness.results.models.summary import Fingerprint, GoodputBlock, RunSummary
from harness.results.read import check_version

RUN_FILES = ("summary.json", "histograms.json", "requests.jsonl", "engine_metrics.jsonl", "progress.jsonl")
SWEEP_FILES = ("index.json", "sweep.yaml")


# ---------------------------------------------------------------- small readers
def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open("r", encoding="utf-8", errors="replace")


def find_file(run_dir: Path, name: str) -> Path | None:
    """`name` or its gzipped copy (baselines store requests.jsonl.gz)."""
    for candidate in (run_dir / name, run_dir / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows and the number of unreadable lines (a crashed writer leaves half a last line)."""
    rows: list[dict[str, Any]] = []
    bad = 0
    try:
        with _open_text(path) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    bad += 1
                    continue
                if isinstance(obj, dict):
                    rows.append(obj)
                else:
                    bad += 1
    except (OSError, EOFError) as exc:  # EOFError: a truncated .gz
        bad += 1
        if not rows:
            raise OSError(str(exc)) from exc
    return rows, bad


def read_json(path: Path) -> Any:
    with _open_text(path) as fh:
        return json.load(fh)


# ---------------------------------------------------------------- run data
@dataclass
class RunData:
    path: Path
    summary: RunSummary
    histograms: dict[str, dict[str, str]] = field(default_factory=dict)
    requests: list[dict[str, Any]] | None = None
    engine_metrics: list[dict[str, Any]] | None = None
    progress: list[dict[str, Any]] | None = None
    scenario: dict[str, Any] | None = None  # scenario.yaml as loaded YAML (resolved scenario)
    notes: list[str] = field(default_factory=list)  # what is missing or damaged, for the report
    summary_derived: bool = False  # summary computed from requests.jsonl
    _hist_cache: dict[tuple[str, str], hdr.Hist | None] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.summary.scenario.name or self.path.name

    @property
    def fingerprint(self) -> Fingerprint:
        return self.summary.scenario.fingerprint

    @property
    def classes(self) -> list[str]:
        names = list(self.summary.per_class)
        for key in self.histograms:
            if not key.startswith("_") and key not in names:  # _all, _groups, _sessions are not classes
                names.append(key)
        return names

    def for_class(self, name: str) -> RunData | None:
        """This run seen through one request class: its summary block, requests and histograms in
        place of the run's, so every metric definition and noise test applies unchanged (a
        regression of one class can hide in the overall percentiles of a mixed workload). None
        when the run has no such class."""
        block = self.summary.per_class.get(name)
        if block is None:
            return None
        summary = self.summary.model_copy(
            update={
                "requests": block.requests,
                "tokens": block.tokens,
                "latency_ms": block.latency_ms,
                "tokens_per_chunk": block.tokens_per_chunk,
                "goodput": GoodputBlock(overall=block.goodput),
                "per_class": {},
            }
        )
        requests = None if self.requests is None else [r for r in self.requests if r.get("class") == name]
        return RunData(
            path=self.path,
            summary=summary,
            histograms={"_all": self.histograms.get(name, {})},
            requests=requests,
            engine_metrics=self.engine_metrics,
            progress=self.progress,
            scenario=self.scenario,
            notes=list(self.notes),
            summary_derived=self.summary_derived,
        )

    def measured_requests(self) -> list[dict[str, Any]]:
        """requests.jsonl without warmup requests."""
        return [r for r in (self.requests or []) if not r.get("warmup")]

    def hist(self, metric: str, group: str = "_all") -> hdr.Hist | None:
        """Decoded histogram of `metric` for a class (or `_all`), in the stored unit (ns for
        latencies); falls back to per-request values for ttft/e2e/tpot when histograms.json lacks
        it. None when nothing holds it."""
        key = (group, metric)
        if key not in self._hist_cache:
            self._hist_cache[key] = self._load_hist(metric, group)
        return self._hist_cache[key]

    def _load_hist(self, metric: str, group: str) -> hdr.Hist | None:
        blob = self.histograms.get(group, {}).get(metric)
        if blob:
            try:
                h = hdr.decode(blob)
                return h if h.total else None
            except hdr.HistogramError as exc:
                self.notes.append(f"histograms.json: {group}/{metric} is not a readable HDR histogram ({exc})")
        field_name = BY_NAME[metric].record_field if metric in BY_NAME else None  # harness.metrics.table
        if field_name and self.requests:
            rows = [
                r
                for r in self.measured_requests()
                if not r.get("error") and (group == "_all" or r.get("class") == group)
            ]
            vals = [float(r[field_name]) * 1e6 for r in rows if isinstance(r.get(field_name), (int, float))]
            if vals:
                return hdr.from_values(vals)
        return None

    def window_start(self) -> float | None:
        start = self.summary.window.start
        return float(start) if isinstance(start, (int, float)) else None


def _fmt_missing(name: str, why: str) -> str:
    return f"{name} {why}"


def _in_baseline(run_dir: Path) -> bool:
    """A run saved by `harness baseline save` (alone, or a cell of a saved sweep)."""
    here = run_dir.resolve()
    return any((d / "baseline.json").is_file() for d in [here, *list(here.parents)[:3]])


#: the metrics a report reads from requests.jsonl when histograms.json lacks them (RunData.hist)
_FALLBACK = tuple(name for name, m in BY_NAME.items() if m.record_field)


def load_run(path: Path | str, requests: bool | None = True) -> RunData:
    """Load a run directory; raises UserError only when nothing usable is there.

    `requests`: read requests.jsonl (every per-request record, as dicts: gigabytes for a long
    run); None reads it only when the report needs it (summary.json or a histogram missing: the
    values are then computed from it) — a finished run's report is built from its summary and
    histograms, so `harness run` finishing a 360,000-request run does not hold them all."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise UserError(
            f"{run_dir}: no such directory; pass a run directory (holding summary.json) or a sweep directory (holding index.json)"
        )
    notes: list[str] = []
    present = [n for n in RUN_FILES if find_file(run_dir, n)]
    if not present:
        raise UserError(
            f"{run_dir}: not a run directory (none of {', '.join(RUN_FILES)} is there); "
            "pass the directory `harness run` wrote"
        )

    def read_requests() -> list[dict[str, Any]] | None:
        return _load_jsonl(
            run_dir,
            "requests.jsonl",
            notes,
            what="per-request records; noise estimates and the fallback summary use them",
        )

    # requests first: a missing summary is rebuilt from them
    records = read_requests() if requests else None
    # a saved baseline keeps no time series by design (harness.report.baselines.KEEP): not worth a note
    series_notes = [] if _in_baseline(run_dir) else notes
    engine_metrics = _load_jsonl(
        run_dir,
        "engine_metrics.jsonl",
        series_notes,
        what="engine telemetry over time; the KV, queue and preemption plots need it",
    )
    progress = _load_jsonl(run_dir, "progress.jsonl", series_notes, what="client progress over time")

    summary: RunSummary | None = None
    derived = False
    spath = find_file(run_dir, "summary.json")
    if spath is None:
        notes.append(
            "summary.json is missing: the run did not finish; the values below are computed from requests.jsonl"
        )
    else:
        try:
            data = read_json(spath)
            check_version(spath, data)  # a newer or older schema: one line naming the version
            summary = RunSummary.model_validate(data)
        except (OSError, json.JSONDecodeError) as exc:
            notes.append(
                f"summary.json is unreadable ({_short(exc)}); the values below are computed from requests.jsonl"
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            notes.append(
                f"summary.json does not match the summary schema ({loc}: {first['msg']}); values below are computed from requests.jsonl"
            )
    if summary is None and requests is None:
        records, requests = read_requests(), True
    if summary is None:
        summary = summary_from_requests(records or [], progress or [])
        derived = True
        if not records:
            notes.append("requests.jsonl is missing or empty too: no latency or throughput values are available")

    histograms: dict[str, dict[str, str]] = {}
    hpath = find_file(run_dir, "histograms.json")
    if hpath is None:
        notes.append(
            "histograms.json is missing: percentile plots use per-request values (TTFT, E2E) and ITL plots are left out"
        )
    else:
        try:
            raw = read_json(hpath)
            if isinstance(raw, dict):
                histograms = normalize_histograms(raw)
            else:
                notes.append(
                    "histograms.json is not an object of {class: {metric: blob}}; percentile plots use per-request values"
                )
        except (OSError, json.JSONDecodeError) as exc:
            notes.append(f"histograms.json is unreadable ({_short(exc)}); percentile plots use per-request values")

    if requests is None and any(m not in histograms.get("_all", {}) for m in _FALLBACK):
        records = read_requests()  # a figure the histograms lack comes from the per-request values
    elif requests is None and find_file(run_dir, "requests.jsonl") is None:
        notes.append(
            "requests.jsonl is missing (per-request records; noise estimates and the fallback summary use them)"
        )

    scenario = None
    sc_path = run_dir / "scenario.yaml"
    if sc_path.is_file():
        try:
            loaded = yaml.safe_load(sc_path.read_text())
            scenario = loaded if isinstance(loaded, dict) else None
        except (OSError, yaml.YAMLError) as exc:
            notes.append(f"scenario.yaml is unreadable ({_short(exc)})")

    if summary.status != "complete" and not derived:
        notes.insert(0, f"run status is {summary.status!r}: values cover only what was measured before it stopped")
    return RunData(
        path=run_dir,
        summary=summary,
        histograms=histograms,
        requests=records,
        engine_metrics=engine_metrics,
        progress=progress,
        scenario=scenario,
        notes=notes,
        summary_derived=derived,
    )


def normalize_histograms(raw: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{group: {metric: base64}} from either shape writers use: the plain one
    ({group: {metric: "HIST..."}}) or the lossless one the runner writes
    ({group: {"hist": {metric: {"hdr": "HIST...", "sum": .., "min": .., "max": ..}}, "counts": ..}})."""
    out: dict[str, dict[str, str]] = {}
    for group, body in raw.items():
        if not isinstance(body, dict):
            continue
        hist = body.get("hist")
        metrics = hist if isinstance(hist, dict) else body
        blobs: dict[str, str] = {}
        for metric, value in metrics.items():
            if isinstance(value, str):
                blobs[str(metric)] = value
            elif isinstance(value, dict) and isinstance(value.get("hdr"), str):
                blobs[str(metric)] = value["hdr"]
        out[str(group)] = blobs
    return out


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def _load_jsonl(run_dir: Path, name: str, notes: list[str], what: str) -> list[dict[str, Any]] | None:
    path = find_file(run_dir, name)
    if path is None:
        notes.append(f"{name} is missing ({what})")
        return None
    try:
        rows, bad = read_jsonl(path)
    except OSError as exc:
        notes.append(f"{name} is unreadable ({_short(exc)})")
        return None
    if bad:
        notes.append(
            f"{name}: {bad} unreadable line(s) skipped (a run that stopped mid-write leaves a partial last line)"
        )
    return rows


# ---------------------------------------------------------------- what a directory is
def kind_of(path: Path) -> str:
    """'sweep', 'run', 'group' (a folder of run directories: repeats) or 'unknown'."""
    if (path / "index.json").is_file():
        return "sweep"
    if any(find_file(path, n) for n in RUN_FILES):
        return "run"
    if path.is_dir() and run_subdirs(path):
        return "group"
    return "unknown"


def run_subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and any(find_file(p, n) for n in RUN_FILES))
