"""One writer per output directory: an exclusive lock a command holds while it writes there.

Why: `--out` was checked for emptiness before anything was created, so two `harness run` (or two
sweeps) started at the same moment both passed the check and both wrote into one directory: one
requests.jsonl with both runs' 104 records under a summary of 52, sweep cells holding both sweeps'
records and a ranking measured while they competed (audit R3). The lock is flock(2) on the
directory itself: no lock file to leave behind or clean up, released by the kernel when the
process ends however it ends (SIGKILL included), and not inherited by the children the command
starts (the descriptor is close-on-exec).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from harness.errors import UserError

#: directories this process holds, resolved path -> open descriptor (kept open: closing releases)
_HELD: dict[Path, int] = {}


class Busy(UserError):
    """Another process holds the directory's lock."""


def lock_dir(path: Path, flag: str = "--out", what: str = "run directory") -> Path:
    """Create `path` if needed and take its lock for the rest of this process (or `unlock_dir`).
    Raises Busy (one line, exit 2) when another command holds it, UserError when it cannot be made."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{path}: is a file, not a directory; give a directory for the {what}'s files") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot create the {what} ({exc.strerror}); give another {flag}") from None
    key = path.resolve()
    if key in _HELD:
        return path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"{path}: cannot open the {what} ({exc.strerror}); give another {flag}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(
            f"{flag} {path}: another harness command is writing into this directory right now; wait for it "
            f"to end, or give another {flag}"
        ) from None
    except OSError:
        os.close(fd)  # a file system without flock (some network mounts): write without the lock
        return path
    _HELD[key] = fd
    return path


def unlock_dir(path: Path) -> None:
    fd = _HELD.pop(Path(path).resolve(), None)
    if fd is not None:
        os.close(fd)
