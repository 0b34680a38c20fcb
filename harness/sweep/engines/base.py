"""The engine-kind seam: how to launch, probe, read and reset one kind of serving engine.

One module per kind registers an `EngineKind` in `KINDS`; the executor only talks to this
Protocol. HTTP here is plain urllib with short timeouts: the sweep never imports gevent/locust.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.registry import Registry
from harness.sweep.models import EngineSpec

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Probe:
    ready: bool
    detail: str  # e.g. "GET /health -> 503", "connection refused"


class EngineKind(Protocol):
    name: str
    telemetry_profile: str | None  # passed to the run as its engine_kind hint

    def default_command(self, spec: EngineSpec) -> list[str]: ...

    def default_env(self, spec: EngineSpec) -> dict[str, str]: ...

    def probe(self, base_url: str, spec: EngineSpec) -> Probe: ...

    def startup_facts(self, log_text: str) -> dict[str, Any]: ...

    def reset_prefix_cache(self, base_url: str, spec: EngineSpec) -> str | None:
        """Reset the engine's prefix cache; None when done, else why it could not be."""
        ...


KINDS: Registry[EngineKind] = Registry("engine kind")


# ---------------------------------------------------------------- HTTP helpers
def http_status(url: str, method: str = "GET", timeout: float = 5.0) -> tuple[int | None, str]:
    """(status, short body) or (None, reason) when nothing answered."""
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(300).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(300).decode("utf-8", "replace")
        except Exception:
            body = ""
        return exc.code, body
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, str(reason)
    except Exception as exc:  # a non-HTTP answer (BadStatusLine, ...): not ready, not a crash
        return None, f"{type(exc).__name__}: {exc}"


def probe_get_200(base_url: str, path: str) -> Probe:
    status, body = http_status(base_url.rstrip("/") + path, timeout=5.0)
    if status is None:
        return Probe(False, f"GET {path}: {body}")
    detail = f"GET {path} -> {status}"
    if status != 200 and body.strip():
        detail += f" {body.strip()[:120]}"
    return Probe(status == 200, detail)


def post_reset(base_url: str, path: str) -> str | None:
    status, body = http_status(base_url.rstrip("/") + path, method="POST", timeout=30.0)
    if status is not None and 200 <= status < 300:
        return None
    return f"POST {path} -> {status if status is not None else body}"


# ---------------------------------------------------------------- log facts
def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def num(text: str) -> float | int:
    text = text.replace(",", "")
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


@dataclass(frozen=True)
class Fact:
    pattern: re.Pattern[str]
    keys: tuple[str, ...]  # one per group; "" skips a group
    convert: Callable[[str], Any] = num


def fact(regex: str, *keys: str, convert: Callable[[str], Any] = num) -> Fact:
    return Fact(re.compile(regex), keys, convert)


def int_list(text: str) -> list[int]:
    """`[512, 504, 8]` / `1, 2, 4` -> sorted ints (capture sizes, smallest first)."""
    return sorted(int(x) for x in re.findall(r"\d+", text))


def text_value(text: str) -> str:
    return text.strip().strip("'\"")


def last_matches(regex: str, log_text: str) -> list[re.Match[str]]:
    return list(re.finditer(regex, strip_ansi(log_text)))


def scan_facts(facts: list[Fact], log_text: str) -> dict[str, Any]:
    """The first value of each key found in the log (the log of one engine start)."""
    out: dict[str, Any] = {}
    text = strip_ansi(log_text)
    for f in facts:
        for m in f.pattern.finditer(text):
            for key, value in zip(f.keys, m.groups()):
                if key and value is not None and key not in out:
                    try:
                        out[key] = f.convert(value)
                    except ValueError:
                        out[key] = value
            break
    return out


_PREFIX = re.compile(r"^(?:\([\w ]+pid=\d+\)\s*)?(?:(?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\]\s*)?")
_ERROR_START = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|CUDA out of memory)\b:? .+|^(?:\S+ )*\S*: error: .+")
_GENERIC = ("Engine core initialization failed", "initialization failed")


def failure_hint(log_text: str) -> str | None:
    """The most telling error line of a failed start: the first line that begins with an
    exception (`ValueError: ...`) or an argparse `error:`, log prefixes stripped, warnings
    skipped; the root cause comes before generic wrappers such as 'initialization failed'."""
    hits = []
    for raw in strip_ansi(log_text).splitlines():
        m = _PREFIX.match(raw)
        level = m.group("level") if m else None
        if level in ("INFO", "WARNING", "DEBUG"):
            continue
        line = raw[m.end():].strip() if m else raw.strip()
        if _ERROR_START.match(line):
            hits.append(line)
    specific = [h for h in hits if not any(g in h for g in _GENERIC)]
    if specific:
        return specific[0][:400]
    return hits[-1][:400] if hits else None


class HttpEngine:
    """Shared behaviour: readiness = first 200 on a GET path; reset = a POST path (or none)."""

    name = "http"
    telemetry_profile: str | None = None
    ready_path = "/health"
    reset_path: str | None = None
    facts: list[Fact] = []
    env: dict[str, str] = {}
    #: env var -> folder under a start's cache root: what `harness startup` empties for a cold start
    #: (TorchInductor's and Triton's caches, as `vllm bench startup` does; a kind adds its own)
    cache_env: dict[str, str] = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}

    def default_command(self, spec: EngineSpec) -> list[str]:
        raise NotImplementedError

    def default_env(self, spec: EngineSpec) -> dict[str, str]:
        return dict(self.env)

    def probe(self, base_url: str, spec: EngineSpec) -> Probe:
        return probe_get_200(base_url, self.ready_path)

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        out = scan_facts(self.facts, log_text)
        self.derive_facts(out, log_text)
        return out

    def derive_facts(self, facts: dict[str, Any], log_text: str) -> None:
        """Facts computed from others (capture count from the size list, ...); per kind."""
        sizes = facts.get("cudagraph_sizes")
        if isinstance(sizes, list) and "cudagraph_count" not in facts:
            facts["cudagraph_count"] = len(sizes)

    def reset_prefix_cache(self, base_url: str, spec: EngineSpec) -> str | None:
        if not self.reset_path:
            return f"engine kind {self.name} has no prefix-cache reset endpoint"
        return post_reset(base_url, self.reset_path)
