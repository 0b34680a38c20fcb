"""What the web UI lets a browser choose, and from where: the guard in front of Locust's form.

Locust's /swarm sets any parsed option from the form (the host, and every plugin field), and a
page on another site can POST to a UI on loopback. A scenario names an API key's variable, so a
browser-chosen host would receive the key, and a browser-chosen path would be read and quoted back
in validation errors. So the choices are fixed when the UI starts and the browser only picks:

- scenarios: only the files given on the command line, or the YAML files in a directory named
  there (`ScenarioChoices`); another path is refused without being opened;
- the target: `--target`/`--host`, else the scenario's `target.url`, else the simulated engine;
  a different host in the form is refused (`fixed_target`);
- state-changing requests (POST /swarm, /stop, /stats/reset, ...) must come from the UI's own page:
  a foreign `Origin`, `Referer` or `Sec-Fetch-Site`, or, when the UI listens on loopback, a `Host`
  that is not a loopback name (DNS rebinding), is refused with 403 (`refuse_cross_site`);
- reads are same-origin only: Locust's `CORS(app)` answers every route, the harness's /llm ones
  included, with `Access-Control-Allow-Origin` set to the caller's Origin, so any page a browser on
  the same machine opened could read the live stats, the logs and the run directory's absolute path
  (audit R1). `SameOriginOnly` removes the CORS headers from every response: the UI's own page needs
  none, and a page on another origin can no longer read what it fetches.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from harness.errors import UserError

if TYPE_CHECKING:
    from werkzeug.datastructures import Headers

#: set by `harness ui` for the Locust process: the allowed scenario files, os.pathsep-separated
CHOICES_ENV = "HARNESS_UI_SCENARIOS"
YAML_SUFFIXES = (".yaml", ".yml")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class ScenarioChoices:
    """The scenario files a UI may run, resolved once at start; `pick` never opens another path."""

    def __init__(self, files: list[Path]) -> None:
        self.files = list(dict.fromkeys(f.resolve() for f in files))

    @classmethod
    def from_args(cls, paths: list[str]) -> ScenarioChoices:
        """Files as given, and the YAML files directly inside each directory given."""
        files: list[Path] = []
        for raw in paths:
            path = Path(raw)
            if path.is_dir():
                found = sorted(p for p in path.iterdir() if p.suffix in YAML_SUFFIXES and p.is_file())
                if not found:
                    raise UserError(f"{path}: a directory with no scenario files (*.yaml, *.yml)")
                files.extend(found)
            elif path.is_file():
                files.append(path)
            elif path.exists():
                raise UserError(f"{path}: not a regular file; give a scenario YAML file or a directory of them")
            else:
                raise UserError(f"{path}: no such scenario file or directory")
        return cls(files)

    @classmethod
    def from_env(cls, default: str) -> ScenarioChoices:
        """The Locust side: the list `harness ui` passed, else the one `--scenario` given at start."""
        listed = [p for p in os.environ.get(CHOICES_ENV, "").split(os.pathsep) if p]
        return cls([Path(p) for p in listed] if listed else ([Path(default)] if default else []))

    def to_env(self) -> str:
        return os.pathsep.join(str(f) for f in self.files)

    @property
    def default(self) -> Path | None:
        return self.files[0] if self.files else None

    def names(self) -> list[str]:
        return [str(f) for f in self.files]

    def pick(self, value: str) -> Path:
        """The allowed file `value` names (its path as listed, a relative path to it, or its file
        name when unique); anything else is refused, naming only what the user may pick."""
        text = (value or "").strip()
        if not self.files:
            raise UserError("no scenario: start the UI with a scenario file (harness ui FILE, or --scenario FILE)")
        if not text:
            return self.files[0]
        try:
            resolved = Path(text).resolve()
        except (OSError, ValueError):
            resolved = None
        if resolved in self.files:
            return resolved
        by_name = [f for f in self.files if text in (f.name, f.stem)]
        if len(by_name) == 1:
            return by_name[0]
        shown = ", ".join(f.name for f in self.files[:10]) + (" ..." if len(self.files) > 10 else "")
        raise UserError(
            f"scenario: not one of the scenarios this UI was started with ({shown}); "
            "to run another file, restart harness ui with it"
        )


def _norm_url(url: str | None) -> str:
    return (url or "").strip().rstrip("/")


def fixed_target(cli_host: str | None, scenario_url: str | None, sim_url: str | None) -> tuple[str, str]:
    """(target URL, where it comes from): the command line, else the scenario, else the simulator."""
    if _norm_url(cli_host):
        return _norm_url(cli_host), "--target"
    if _norm_url(scenario_url):
        return _norm_url(scenario_url), "the scenario's target.url"
    if _norm_url(sim_url):
        return _norm_url(sim_url), "the built-in simulated engine"
    return "", ""


def check_form_host(form_host: str | None, target: str, source: str) -> None:
    """The form's Host field may repeat the fixed target, or be empty; it never chooses one."""
    given = _norm_url(form_host)
    if given and given != target:
        raise UserError(
            f"host: the target is fixed to {target or '(none)'} ({source}), not chosen in the form; "
            "to measure another server, restart harness ui with --target URL"
        )


def _host_port(value: str) -> tuple[str, int | None]:
    parts = urlsplit(value if "//" in value else f"//{value}")
    try:
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return (parts.hostname or "").lower(), -1


def _is_loopback_name(host: str) -> bool:
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_cross_site(method: str, headers: Mapping[str, str] | Headers, loopback_only: bool) -> str | None:
    """Why a request must be refused (None: allowed). Browsers send Origin on POSTs and
    Sec-Fetch-Site on every request; tools such as curl send neither and are not a CSRF vector."""
    host_header = headers.get("Host", "")
    host, port = _host_port(host_header)
    if loopback_only and host and not _is_loopback_name(host):
        return f"Host {host_header!r} is not a loopback name (the UI listens on loopback only)"
    if method.upper() in SAFE_METHODS:
        return None
    site = headers.get("Sec-Fetch-Site", "").lower()
    if site and site not in ("same-origin", "none"):
        return f"a {site} request (Sec-Fetch-Site); use the UI's own page"
    for name in ("Origin", "Referer"):
        value = headers.get(name, "")
        if not value:
            continue
        if value == "null":
            return f"{name} null (an opaque origin); use the UI's own page"
        o_host, o_port = _host_port(value)
        scheme = urlsplit(value).scheme or "http"
        if o_port is None:
            o_port = 443 if scheme == "https" else 80
        h_port = port if port is not None else (443 if scheme == "https" else 80)
        if (o_host, o_port) != (host, h_port):
            return f"{name} {value!r} is not this UI ({host_header}); start and stop tests from the UI's own page"
        return None  # Origin checked; Referer only when there is no Origin
    return None


class SameOriginOnly:
    """WSGI middleware: no `Access-Control-*` header leaves the UI, so browsers let only the UI's own
    pages read its answers. It wraps the whole app, so the CORS headers Locust's flask_cors adds in
    its after_request hook and in its wrapped error handlers are removed alike."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info) if exc_info is not None else start_response(status, kept)

        return self.app(environ, start)
