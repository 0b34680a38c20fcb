"""One quality pass as runs, sweeps and the CLI do it: read the block's prompts, send them, store.

Kept apart from `runner` so callers that only hold a scenario (or a sweep file) and a URL need
one call: `quality_pass(spec, base_dir, url, out_dir)`."""

from __future__ import annotations

from pathlib import Path

from harness.quality.dataset import load_quality_set
from harness.quality.runner import QualityRun, run_quality, write_summary
from harness.scenario.quality import QualitySpec


def quality_pass(
    spec: QualitySpec,
    base_dir: Path | None,
    target_url: str,
    out_dir: Path,
    *,
    model: str | None = None,
    headers: dict[str, str] | None = None,
    label: str | None = None,
) -> QualityRun:
    """Greedy outputs of every prompt of `spec` from `target_url`, written to `out_dir`
    (`quality.jsonl`, `quality.json`). Raises UserError for a bad prompts file."""
    qset = load_quality_set(spec.prompts, base_dir)
    run = run_quality(qset, spec, target_url, model=model, headers=headers, out_dir=out_dir)
    prompts = str(qset.path.resolve())  # absolute: `harness compare` finds the expected answers from any folder
    run.meta.update(
        {
            "prompts": prompts,
            "spec": spec.model_dump(mode="json"),
            "prompts_file": prompts,
            **({"config": label} if label else {}),
        }
    )
    write_summary(out_dir, run.summary())
    return run
