"""`harness run`: a run that never started leaves --out as it found it.

Why: a wrong --model (or a target that is down) failed the preflight with the right one-line error
but left scenario.yaml, and with the built-in simulator its sim.log, in --out, in a directory the
run had itself created (audit N7). What the run created is removed again when the load never
started (no load plan was written); what was there before is never touched, a directory is
removed only when this run made it and it is empty, and a file the error names (`see
<out>/sim.log`) is kept so the user can read it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.results.lock import unlock_dir


def _first_missing(path: Path) -> Path | None:
    """The topmost directory of `path` that does not exist yet (what creating it would make)."""
    missing = None
    for p in [path, *path.parents]:
        if p.exists():
            break
        missing = p
    return missing


@dataclass(frozen=True)
class OutBefore:
    """--out just before the run writes into it: what a run that never started must restore."""

    out: Path
    made_from: Path | None  # the topmost directory the run created (None: --out existed)
    entries: frozenset[str]

    @staticmethod
    def missing_part(out: Path) -> Path | None:
        """Call before anything creates --out: the directory a run would create."""
        return _first_missing(Path(out))

    @classmethod
    def take(cls, out: Path, made_from: Path | None) -> OutBefore:
        out = Path(out)
        return cls(out, made_from, frozenset(p.name for p in out.iterdir()) if out.is_dir() else frozenset())

    def started(self) -> bool:
        """The load started once a load plan is written (harness.run.modes): from then on the
        directory holds the run's record, whatever happens next."""
        return any(self.out.glob("load_plan*.json"))

    def restore(self, error: BaseException) -> list[Path]:
        """After `error` ended a run that never started: remove what it created in --out (but a
        file the error names), then --out and the parents it created if empty. Returns what is kept."""
        if self.started() or not self.out.is_dir():
            return []
        text = " ".join(str(line) for line in getattr(error, "lines", None) or [error])
        kept = []
        for path in sorted(self.out.iterdir()):
            if path.name in self.entries:
                continue
            if str(path) in text or str(path.resolve()) in text:
                kept.append(path)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if self.made_from is not None:
            unlock_dir(self.out)
            for d in [self.out, *self.out.parents]:
                try:
                    d.rmdir()  # only when empty
                except OSError:
                    break
                if d == self.made_from:
                    break
        return kept
