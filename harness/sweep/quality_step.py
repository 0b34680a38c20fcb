"""The sweep's quality step: greedy outputs once per config, then a verdict per config vs the baseline.

The pass runs after the config's first cell (its warm-up and measured window are over, so no
quality request is measured and none warms the engine for the window), into that cell's run
directory (`runs/<cell>/quality.jsonl`). Once every config ran, each config's outputs are scored
against the baseline config's and judged by the gate; the verdict goes into every index entry of
the config (`entry["quality"]`) and all verdicts into `quality.json` at the sweep's root, where
the closing table, the report and `harness compare` read them.

The quality block comes from the sweep file (`quality:`), else from the first scenario that has
one (paths then relative to that scenario file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.quality import QualityRun, QualitySet, judge_all, load_quality_set, read_quality_run
from harness.quality.passes import quality_pass
from harness.results.models.sweep import Cell as IndexCell
from harness.results.models.sweep import CellQuality
from harness.scenario.quality import QualitySpec
from harness.sweep.plan import Cell, Config, Plan

SWEEP_FILE = "quality.json"


def sweep_quality_spec(plan: Plan) -> tuple[QualitySpec, Path] | None:
    """(block, folder its paths start from), or None when neither the sweep nor a scenario has one."""
    if plan.sweep.quality is not None:
        return plan.sweep.quality, plan.base_dir
    for cell in plan.cells:
        if cell.resolved.quality is not None:
            return cell.resolved.quality, cell.scenario.path.parent
    return None


def baseline_config(plan: Plan, spec: QualitySpec) -> str:
    ids = [c.id for c in plan.configs]
    if spec.baseline is not None:
        if spec.baseline not in ids:
            raise UserError(
                f"quality.baseline {spec.baseline!r} is not a config of this sweep; configs: {', '.join(ids)}"
            )
        return spec.baseline
    return "base" if "base" in ids else ids[0]


class SweepQuality:
    """Built at sweep start (a bad prompts file or baseline name fails before any engine starts)."""

    def __init__(self, plan: Plan, spec: QualitySpec, base_dir: Path) -> None:
        self.plan = plan
        self.spec = spec
        self.base_dir = base_dir
        self.qset: QualitySet = load_quality_set(spec.prompts, base_dir)
        self.baseline_id = baseline_config(plan, spec)

    @classmethod
    def of(cls, plan: Plan) -> SweepQuality | None:
        found = sweep_quality_spec(plan)
        return cls(plan, *found) if found else None

    def has_outputs(self, out_dir: Path, config: Config) -> bool:
        return any((out_dir / c.run_dir / "quality.jsonl").is_file() for c in self.plan.cells_of(config))

    def run_pass(self, out_dir: Path, cell: Cell, base_url: str, model: str | None) -> QualityRun:
        return quality_pass(
            self.spec, self.base_dir, base_url, out_dir / cell.run_dir, model=model, label=cell.config.id
        )

    def outputs(self, out_dir: Path) -> dict[str, tuple[str, QualityRun]]:
        """config id -> (cell id, outputs) of the first cell of each config that has outputs."""
        out: dict[str, tuple[str, QualityRun]] = {}
        for config in self.plan.configs:
            for c in self.plan.cells_of(config):
                run = read_quality_run(out_dir / c.run_dir)
                if run is not None and run.outputs:
                    out[config.id] = (c.id, run)
                    break
        return out

    def score(self, out_dir: Path, entries: dict[str, IndexCell]) -> dict[str, dict[str, Any]]:
        """Verdicts for every config with outputs; written into `entries` (in place) and quality.json."""
        found = self.outputs(out_dir)
        runs = {cid: run for cid, (_, run) in found.items()}
        base_flags = next((c.flags for c in self.plan.configs if c.id == self.baseline_id), {})
        varied = {
            c.id: {k: v for k, v in c.flags.items() if base_flags.get(k) != v}
            | {k: None for k in base_flags if k not in c.flags}
            for c in self.plan.configs
        }
        verdicts = judge_all(
            self.qset, runs, self.baseline_id, self.spec.gate, varied=varied, confidence=self.spec.confidence
        )
        data = {
            cid: {**v.to_json(), "cell": found[cid][0], "outputs": f"runs/{found[cid][0]}/quality.jsonl"}
            for cid, v in verdicts.items()
        }
        for entry in entries.values():
            if entry.config_id in data:
                verdict = data[entry.config_id]
                entry.quality = CellQuality.model_validate(
                    {k: verdict[k] for k in ("status", "passed", "short", "reasons", "cell")}
                    | {
                        "exact_agreement": (verdict.get("agreement") or {}).get("exact_rate"),
                        "accuracy": (verdict.get("accuracy") or {}).get("rate"),
                    }
                )
        doc = {
            "baseline": self.baseline_id,
            "prompts": str(self.qset.path),
            "prompts_sha256": self.qset.sha256,
            "gate": self.spec.gate.model_dump(),
            "configs": data,
        }
        tmp = out_dir / (SWEEP_FILE + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(out_dir / SWEEP_FILE)
        return data


def read_sweep_quality(out_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out_dir / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        return None
