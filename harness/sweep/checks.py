"""Plan-time checks of a sweep file that `--plan` must catch before anything starts.

Each used to pass the plan and fail later or silently: a 10^8-config grid was expanded until
MemoryError; `engine.cwd` naming no directory passed `--plan`, then every config failed with
"cannot start 'python3': No such file or directory" (the interpreter exists, the cwd does not);
an unknown `{placeholder}` went to the engine literally.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from harness.errors import UserError
from harness.limits import SWEEP_CELLS
from harness.sweep.models import SweepFile

#: what Plan.command fills in the argv, and the executor in engine.env
COMMAND_PLACEHOLDERS = ("port", "model", "host", "python", "replica", "devices")
ENV_PLACEHOLDERS = ("port", "model", "host", "replica", "devices")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def config_count_bound(sweep: SweepFile) -> int:
    """How many configs `vary` makes at most, without making them."""
    vary = sweep.vary
    if vary.mode == "list":
        return len(vary.configs)
    if vary.mode == "grid":
        return math.prod(len(v) for v in vary.flags.values())
    return 1 + sum(len(v) for v in vary.flags.values())


def check_size(sweep: SweepFile, source: str) -> None:
    configs = config_count_bound(sweep)
    levels = max(1, sum(len(v) for v in sweep.loads.values()))
    cells = configs * len(sweep.scenarios) * levels * sweep.repeats
    problem = SWEEP_CELLS.check(cells)
    if problem:
        raise UserError(
            f"{source}: vary: {configs:,} config(s) x {len(sweep.scenarios)} scenario(s) x {levels} load "
            f"level(s) x {sweep.repeats} repeat(s): {problem}"
        )


def check_placeholders(sweep: SweepFile, source: str) -> None:
    spec = sweep.engine
    for i, token in enumerate(spec.command or []):
        for name in _PLACEHOLDER.findall(token):
            if name not in COMMAND_PLACEHOLDERS:
                raise UserError(
                    f"{source}: engine.command[{i}]: unknown placeholder {{{name}}}; the command takes "
                    + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS)
                )
    for key, value in spec.env.items():
        for name in _PLACEHOLDER.findall(value):
            if name not in ENV_PLACEHOLDERS:
                raise UserError(
                    f"{source}: engine.env.{key}: unknown placeholder {{{name}}}; env values take "
                    + ", ".join(f"{{{p}}}" for p in ENV_PLACEHOLDERS)
                )


def check_cwd(sweep: SweepFile, base_dir: Path, source: str) -> None:
    cwd = sweep.engine.cwd
    if cwd is None:
        return
    path = Path(cwd) if Path(cwd).is_absolute() else base_dir / cwd
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "no such directory"
        raise UserError(f"{source}: engine.cwd: {cwd}: {what} (relative paths are relative to the sweep file)")


def check_sweep(sweep: SweepFile, base_dir: Path, source: str) -> None:
    check_size(sweep, source)
    check_placeholders(sweep, source)
    check_cwd(sweep, base_dir, source)
