"""Locust's web UI module (`locust.web`: Flask, Werkzeug, Jinja2, Click, ...) imported on first use.

`locust.env` imports `locust.web` for its WebUI class, and with it Locust's whole web stack: about
0.08 CPU-s of every load process's start on the 2-core box, in processes that never serve a page
(a `harness run`'s load processes, the distributed master and its workers). Imported by the load
process's entry modules before Locust, this puts a stand-in in its place: its WebUI imports the
real module when called (`Environment.create_web_ui`, its one caller), and any other attribute
asked of it does the same. Where Locust's environment is already imported (the web UI's own
process, `locust -f harness/ui/locustfile.py`), nothing changes.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAME = "locust.web"


def _real() -> types.ModuleType:
    mod = sys.modules.get(_NAME)
    if mod is None or isinstance(mod, _StandIn):
        sys.modules.pop(_NAME, None)
        mod = importlib.import_module(_NAME)  # also sets the package's `web` attribute
    return mod


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


def WebUI(*args: Any, **kwargs: Any) -> Any:
    return _real().WebUI(*args, **kwargs)


def install() -> None:
    if _NAME in sys.modules or "locust.env" in sys.modules:
        return
    stand_in = _StandIn(_NAME, __doc__)
    stand_in.WebUI = WebUI  # type: ignore[attr-defined]
    sys.modules[_NAME] = stand_in


install()
