"""`harness compare`'s quality verdict (harness.report.compare finds the pairs; this layer,
above report, judges them), printed beside the latency verdict.

A faster config that answers differently is not a win (the guides: "measure quality and
throughput together, never separately"). When both sides of a comparison hold greedy outputs
(`quality.jsonl`, written by `harness run` with a `quality:` block, by a sweep's quality step or
by `harness quality`), the candidate's outputs are scored against the baseline's with the gate
of the block that produced them, and a failed gate is a regression: compare exits 1.

The gate and the prompts (for expected-answer accuracy) come from the candidate's
`quality.json` (`spec`, `prompts_file`), else the baseline's; when the prompts file is gone the
verdict rests on agreement alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.quality.dataset import QualitySet, load_quality_set
from harness.quality.gate import QualityVerdict, judge
from harness.quality.render import verdict_lines
from harness.quality.runner import SUMMARY_FILE, read_quality_run
from harness.scenario.quality import QualityGate, QualitySpec


@dataclass
class QualityPair:
    label: str  # "" for runs, "config × scenario" for sweeps
    verdict: QualityVerdict
    baseline_dir: Path
    candidate_dir: Path

    @property
    def failed(self) -> bool:
        return self.verdict.failed

    def short(self) -> str:
        return self.verdict.short()

    def lines(self) -> list[str]:
        head = verdict_lines(self.verdict, against=str(self.baseline_dir))
        if self.label:
            head[0] = f"{head[0]} · {self.label}"
        return head

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "baseline": str(self.baseline_dir),
            "candidate": str(self.candidate_dir),
            **self.verdict.to_json(),
        }


def _meta(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / SUMMARY_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _spec(*metas: dict[str, Any]) -> QualitySpec | None:
    for m in metas:
        if isinstance(m.get("spec"), dict):
            try:
                return QualitySpec.model_validate(m["spec"])
            except ValueError:
                continue
    return None


def _prompts(sha: str, *metas: dict[str, Any]) -> QualitySet:
    """The prompt set both sides answered (for expected answers), or an empty set when it is gone
    or changed since (then only agreement is judged)."""
    for m in metas:
        path = m.get("prompts_file") or m.get("prompts")
        if not path:
            continue
        try:
            qset = load_quality_set(str(path), None)
        except UserError:
            continue
        if not sha or qset.sha256 == sha:
            return qset
    return QualitySet(path=Path("-"), sha256=sha, prompts=[])


def compare_quality(label: str, baseline_dir: Path, candidate_dir: Path) -> QualityPair | None:
    """The candidate's quality verdict against the baseline's outputs; None when either side has
    no greedy outputs (a comparison without quality is still a comparison)."""
    base, cand = read_quality_run(baseline_dir), read_quality_run(candidate_dir)
    if base is None or cand is None or not base.outputs or not cand.outputs:
        return None
    bm, cm = _meta(baseline_dir), _meta(candidate_dir)
    spec = _spec(cm, bm)
    gate = spec.gate if spec is not None else QualityGate()
    confidence = spec.confidence if spec is not None else 0.95
    qset = _prompts(cand.prompts_sha256 or base.prompts_sha256, cm, bm)
    verdict = judge(label or candidate_dir.name, qset, base, cand, gate, confidence=confidence)
    return QualityPair(label, verdict, baseline_dir, candidate_dir)


def one_sided(baseline_dir: Path, candidate_dir: Path) -> str | None:
    """A note when only one side has quality outputs (nothing to judge, but say so)."""
    b, c = (d / "quality.jsonl" for d in (baseline_dir, candidate_dir))
    if b.is_file() != c.is_file():
        return f"quality not compared: only the {'baseline' if b.is_file() else 'candidate'} has greedy outputs (quality.jsonl)"
    return None


def judge_comparison(result: Any) -> Any:
    """Fill a `harness.report.compare.Result`'s quality verdicts (and notes for one-sided outputs)
    from the run directories of its compared pairs; returns it."""
    for label, base_dir, cand_dir in result.quality_dirs:
        q = compare_quality(label, base_dir, cand_dir)
        if q is not None:
            result.quality.append(q)
        elif (note := one_sided(base_dir, cand_dir)) is not None:
            result.warnings.append(f"{label + ': ' if label else ''}{note}")
    return result
