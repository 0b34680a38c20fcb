"""Walk the steps in the guide's order and write the tune directory as each step lands.

DIR/tune.json is rewritten after every step (schema below), so an interrupted tune shows what
it decided; `--resume DIR` walks the same steps again: every measurement is a sweep whose
finished cells are kept, the decisions are recomputed from the same data, and only what is
missing runs. DIR/recommended.yaml and DIR/report.html are written at the end.

tune.json = {schema_version, name, tune_file, status, steps: [{step, verdict, reason, tried,
chosen}], final: {flags, command, vs_baseline}, cost: {engine_starts, measured_s, engine_s,
wall_s}}
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.engines import get_kind
from harness.results.models import FILES
from harness.results.models.tune import SavedBaseline, TuneDoc
from harness.sweep.flags import apply_flags, describe, env_of, substitute
from harness.sweep.results import atomic_write
from harness.tune.context import TuneContext
from harness.tune.ledger import Ledger
from harness.tune.load import TuneSpec
from harness.tune.measure import Measurer, flags_key
from harness.tune.steps import STEPS, StepResult
from harness.tune.steps.base import no_slo_note

SCHEMA_VERSION = 1
#: steps after which nothing can be measured when they fail
BLOCKING = ("context-length", "gpu-memory", "baseline")


@dataclass
class TuneOutcome:
    out_dir: Path
    doc: TuneDoc
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(s.verdict == "failed" for s in self.doc.steps) else 0


def engine_command(spec: TuneSpec, flags: dict[str, Any]) -> list[str]:
    """The engine's command line for `flags`, as a shell would take it: the flags' environment
    variables (`env:NAME`, e.g. TGI's PREFIX_CACHING) in front as NAME=value."""
    e = spec.file.engine
    argv = list(e.command) if e.command else get_kind(e.kind).default_command(e)
    values: dict[str, Any] = {"model": e.model, "host": e.host, "python": "python"}
    if e.port != "auto":
        values["port"] = e.port
    env = [f"{k}={v}" for k, v in env_of(flags).items() if v is not None]
    return env + apply_flags(substitute(argv, values), flags)


class Tuner:
    def __init__(
        self, spec: TuneSpec, out_dir: Path, resume: bool = False, show_progress: bool = True, force: bool = False
    ) -> None:
        self.spec = spec
        self.out = out_dir
        self.resume = resume
        self.force = force  # replace an earlier tune's baseline of the same name
        self.show = show_progress
        self.ledger = Ledger(out_dir / "cost.json", spec.file.budget.max_starts, spec.file.budget.max_hours)
        self.measurer = Measurer(spec, out_dir, self.ledger, show_progress, resume)
        self.ctx = TuneContext(spec, self.measurer, self.ledger, dict(spec.file.base))

    def say(self, text: str) -> None:
        if self.show:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def run(self) -> TuneOutcome:
        self.out.mkdir(parents=True, exist_ok=True)
        self._copy_tune_file()
        order = self.spec.file.step_order()
        steps: list[StepResult] = []
        interrupted = False
        blocked: str | None = None
        try:
            for i, name in enumerate(order):
                self.ctx.remaining = order[i + 1 :]
                self.say(f"[tune] step {i + 1}/{len(order)} {name} · {self.ledger.line()}")
                if blocked is not None:
                    result = StepResult(name, "skipped", f"nothing to measure: {blocked}", dict(self.ctx.current))
                else:
                    result = no_slo_note(STEPS.get(name).run(self.ctx))
                steps.append(result)
                if result.verdict == "failed" and name in BLOCKING:
                    blocked = f"step {name} failed ({result.reason[:200]})"
                self.say(f"[tune] ✔ {name}: {result.verdict.upper()} · {result.reason}")
                self._write(steps, "running")
        except KeyboardInterrupt:
            interrupted = True
        # a tune that ran every step but one failed is not "complete": it exits 1, and its
        # tune.json says so (audit R4: a failed step under status complete read as a finished tune)
        failed = any(s.verdict == "failed" for s in steps)
        doc = self._write(steps, "interrupted" if interrupted else "failed" if failed else "complete")
        self.ledger.write()
        if not interrupted:
            self._write_recommended(doc)
            _, unmeasured = self.final_flags()
            if unmeasured:  # said under --quiet too: recommended.yaml is not what the steps chose
                print(f"note: {unmeasured}", file=sys.stderr)
            saved = self._save_baseline()
            if saved is not None:
                doc.final.baseline = SavedBaseline.model_validate(saved)
                atomic_write(self.out / "tune.json", FILES["tune.json"].dumps(doc))
            self._write_report()
        return TuneOutcome(self.out, doc, interrupted)

    # ------------------------------------------------------------ outputs
    def _copy_tune_file(self) -> None:
        target = self.out / "tune.yaml"
        text = self.spec.source.read_text()
        if target.exists() and target.read_text() != text:
            self.say(f"  note: {self.spec.source} changed since {target} was written; finished cells are matched by id")
        target.write_text(text)

    def final_flags(self) -> tuple[dict[str, Any], str]:
        """The flags to recommend and, when they are not the current best, why. The current best
        is recommended only when an engine started with it: a value no start ever ran (a
        max-model-len set before every start crashed) is no recommendation, and the tune file's
        `base` is handed back unchanged instead."""
        current = dict(self.ctx.current)
        m = self.measurer.cache.get(flags_key(current))
        if (m is not None and m.started) or current == dict(self.spec.file.base):
            return current, ""
        return dict(self.spec.file.base), (
            "no engine started with the tuned flags "
            f"({describe(current) or 'the base'}), so the tune file's base is recommended unchanged"
        )

    def _final(self) -> dict[str, Any]:
        flags, _ = self.final_flags()
        return {
            "flags": flags,
            "command": engine_command(self.spec, flags),
            "vs_baseline": getattr(self.ctx, "vs_baseline", None),
        }

    def _write(self, steps: list[StepResult], status: str) -> TuneDoc:
        """tune.json through its model (harness.results.models.tune): a key the model does not
        declare fails here, at the writer, not silently in a reader."""
        doc = TuneDoc.model_validate(
            {
                "schema_version": SCHEMA_VERSION,
                "name": self.spec.file.name,
                "tune_file": str(self.spec.source),
                "status": status,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "expected_load": {self.spec.file.load.path: self.spec.file.load.value},
                "baseline_flags": dict(self.spec.file.base),
                "steps": [s.to_json() for s in steps],
                "final": self._final(),
                "cost": self.ledger.cost(),
            }
        )
        atomic_write(self.out / "tune.json", FILES["tune.json"].dumps(doc))
        return doc

    def _write_recommended(self, doc: TuneDoc) -> None:
        vs = doc.final.vs_baseline.verdict if doc.final.vs_baseline is not None else "not compared"
        _, unmeasured = self.final_flags()
        head = (
            f"# harness tune {self.spec.file.name}: the recommended flags (paste as a sweep/tune `base` block).\n"
            f"# final vs baseline: {vs}; decisions: {self.out / 'tune.json'}\n"
            + (f"# {unmeasured}\n" if unmeasured else "")
        )
        body = yaml.safe_dump({"base": doc.final.flags}, sort_keys=False)
        atomic_write(self.out / "recommended.yaml", head + body)

    def _save_baseline(self) -> dict[str, Any] | None:
        """The final run, saved as the baseline `tune-<name>` with recommended.yaml as its engine
        config (the store: $HARNESS_BASELINES or results/baselines), so later runs compare with
        `harness compare baseline:tune-<name> RUN`. An earlier baseline of that name from another
        tune is kept unless --force (as `harness baseline save` keeps one): later runs may be compared
        with it, and a second tune of the same name silently moved their reference (audit N17)."""
        final = getattr(self.ctx, "final", None)
        if final is None or not final.ok:
            return None
        from harness.report import baselines

        name = f"tune-{self.spec.file.name}"
        earlier = baselines.root_dir() / name / "baseline.json"
        if earlier.is_file() and not self.force:
            try:
                meta = json.loads(earlier.read_text())
            except (OSError, ValueError):
                meta = {}
            if meta.get("source") != str(Path(final.sweep_dir).resolve()):  # a resumed tune replaces its own
                # said under --quiet too: the user expects the baseline to be this tune's
                print(
                    f"note: baseline {name!r} exists ({earlier.parent}, saved {meta.get('saved_at', '?')} from "
                    f"{meta.get('source', '?')}); kept it. To replace it with this tune's final run: --force, or "
                    f"harness baseline save {final.sweep_dir} --name {name} --force",
                    file=sys.stderr,
                )
                return None
        try:
            path, _notes = baselines.save(
                final.sweep_dir, name, engine_config=self.out / "recommended.yaml", force=True
            )
        except Exception as exc:  # the tune's decisions stand without the saved baseline
            self.say(f"  note: final not saved as a baseline: {type(exc).__name__}: {exc}")
            return None
        self.say(
            f"[tune] final saved as baseline {name!r} ({path}); compare later runs with: harness compare baseline:{name} RUN"
        )
        return {"name": name, "path": str(path)}

    def _write_report(self) -> None:
        from harness.report import write_report_or_say
        from harness.tune.report import write_tune_report

        write_report_or_say(
            write_tune_report,
            self.out,
            self.say,  # the decisions stand without the report
            done="[tune] report: {path}",
            failed="  note: report not written: {error}",
        )
