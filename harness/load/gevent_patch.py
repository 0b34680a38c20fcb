"""gevent's monkey patching for a load process, with the installed packages' entry points read once.

Importing Locust patches the standard library with gevent (`monkey.patch_all()`). gevent 26 then
asks importlib.metadata for plugin entry points 25 times (before and after each patched module),
and every ask reads the metadata of every installed distribution: about 0.13-0.25 CPU-s of each
load process's start on the 2-core box (185 distributions), a cost paid by every `harness run`,
every worker and every sweep cell. Imported first by the load process's entry modules
(harness.load.main, harness.load.distributed), this does the same patching with one read of the
entry points serving all the asks; Locust's own patch_all then finds the same patching done and
returns. Nothing else changes: the plugins a package registers are found as before.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from gevent import monkey


def _patch_all_reading_entry_points_once() -> None:
    read = metadata.entry_points
    every = read()

    def entry_points(**params: Any) -> Any:  # gevent asks by group: the EntryPoints of that group
        return every.select(**params) if params else every

    metadata.entry_points = entry_points
    try:
        monkey.patch_all()
    finally:
        metadata.entry_points = read


_patch_all_reading_entry_points_once()
