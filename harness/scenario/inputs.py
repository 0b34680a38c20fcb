"""How an input file a user names is read: regular files only, up to HARNESS_MAX_INPUT_BYTES.

Why: a dataset, trace or quality file at /dev/zero was read until MemoryError (exit 70 after
23-47 s), a FIFO blocked until killed, and a scenario or tune file's workload at /dev/zero read as
"no such file" (audit R10, R17). Every reader of a user's file (scenario YAML, datasets, traces,
quality prompts, tokenizers) goes through `read_input`, so each of these is one line.
"""

from __future__ import annotations

import stat
from pathlib import Path

from harness.errors import UserError
from harness.limits import INPUT_BYTES

DEVICE = "is a device, a pipe or a socket, not a file"


def input_path(base_dir: Path, rel: str) -> Path:
    """`rel` relative to `base_dir` (unless absolute), resolved where it can be: a symlink loop
    made Path.resolve raise RuntimeError, an internal error (audit R14)."""
    p = Path(rel) if Path(rel).is_absolute() else base_dir / rel
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p.absolute()


def not_a_file(p: Path) -> str | None:
    """Why `p` cannot be read as an input file (missing, a directory, a device), or None."""
    try:
        st = p.stat()
    except FileNotFoundError:
        return "no such file"
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on some Pythons
        return f"cannot read it ({getattr(exc, 'strerror', None) or 'a symlink loop'})"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return DEVICE
    return None


def read_input(p: Path, what: str, hint: str = "paths are relative to the scenario file") -> bytes:
    """The bytes of the input file `p` (named `what` in messages), or a one-line UserError: it
    is missing or unreadable, it is not a regular file, or it is larger than the limit."""
    why = not_a_file(p)
    if why == DEVICE:
        raise UserError(f"{what}: {p} {DEVICE}; give a regular file")
    if why is not None:
        strerror = {"no such file": "No such file or directory", "is a directory, not a file": "Is a directory"}.get(
            why, why.removeprefix("cannot read it (").removesuffix(")")
        )
        raise UserError(f"{what}: cannot read {p} ({strerror}); {hint}")
    problem = INPUT_BYTES.check(p.stat().st_size)
    if problem:
        raise UserError(f"{what}: {p}: {problem}")
    try:
        with open(p, "rb") as f:
            data = f.read(INPUT_BYTES.value + 1)  # a file that grows while it is read stops at the limit too
    except OSError as exc:
        raise UserError(f"{what}: cannot read {p} ({exc.strerror}); {hint}") from None
    problem = INPUT_BYTES.check(len(data))
    if problem:
        raise UserError(f"{what}: {p}: {problem}")
    return data
