"""Like with like: the two sides' workload fingerprints, and the scenario parts that differ."""

from __future__ import annotations

from typing import Any

from harness.report.data import RunData
from harness.results.models.summary import Fingerprint

# ---------------------------------------------------------------- fingerprints


def _fp(run: RunData) -> Fingerprint:
    return run.fingerprint


def fingerprint_check(base: list[RunData], cand: list[RunData]) -> tuple[str, list[str]]:
    """(description, problems). Problems name the differing parts."""
    problems: list[str] = []
    for role, runs in (("baseline", base), ("candidate", cand)):
        missing = [str(r.path) for r in runs if not _fp(r).value]
        if missing:
            problems.append(
                f"{role} has no workload fingerprint in summary.json ({', '.join(missing[:3])}): cannot tell it did the same work"
            )
        values = {_fp(r).value for r in runs if _fp(r).value}
        if len(values) > 1:
            parts = _diff_parts(_fp(runs[0]), next(_fp(r) for r in runs if _fp(r).value != _fp(runs[0]).value))
            problems.append(f"{role} repeats did not do the same work (differ in {', '.join(parts) or 'fingerprint'})")
    if problems:
        return "unknown", problems
    fb, fc = _fp(base[0]), _fp(cand[0])
    if fb.value == fc.value:
        return f"fingerprints match ({fb.value})", []
    parts = _diff_parts(fb, fc)
    details = []
    for p in parts:
        leaves = _scenario_diffs(base[0].scenario, cand[0].scenario, p)
        if leaves:
            details.append(f"{p} ({'; '.join(leaves)})")
        else:
            same_files = isinstance(base[0].scenario, dict) and base[0].scenario == cand[0].scenario
            hint = (
                "; the scenario files agree, so the tokenizer or the harness version that hashed them differs"
                if same_files
                else ""
            )
            details.append(f"{p} (hash {fb.parts.get(p, '?')} vs {fc.parts.get(p, '?')}{hint})")
    return f"fingerprints differ in {', '.join(parts) or 'value'}", [
        f"workload fingerprints differ in: {', '.join(details) or 'the overall value'}"
    ]


#: fingerprint part -> where it lives in scenario.yaml
_PART_PATHS = {
    "workload": ("workload",),
    "sampling": ("sampling",),
    "load": ("load",),
    "warmup": ("warmup",),
    "seed": ("seed",),
    "api": ("target", "api"),
}


def _scenario_diffs(a: dict[str, Any] | None, b: dict[str, Any] | None, part: str, limit: int = 4) -> list[str]:
    """Leaf-level differences of one fingerprint part, from the runs' scenario.yaml (baseline → candidate)."""
    if not isinstance(a, dict) or not isinstance(b, dict) or part not in _PART_PATHS:
        return []

    def dig(d: Any) -> Any:
        for k in _PART_PATHS[part]:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    out: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                walk(x.get(k), y.get(k), f"{path}.{k}" if path else str(k))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                walk(xi, yi, f"{path}[{i}]")
        elif x != y:
            out.append(f"{path or part}: {x!r} → {y!r}")

    walk(dig(a), dig(b), ".".join(_PART_PATHS[part]))
    if len(out) > limit:
        out = [*out[:limit], f"{len(out) - limit} more"]
    return out


def _diff_parts(a: Fingerprint, b: Fingerprint) -> list[str]:
    pa, pb = a.parts, b.parts
    return [k for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)]
