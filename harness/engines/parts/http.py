"""Plain urllib HTTP for readiness probes and cache resets, with short timeouts.

The sweep and startup drivers call these between runs, never during one, so there is no gevent
here (only harness.load and the web UI import it): one blocking request at a time is all they need.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """One readiness probe's answer."""

    ready: bool
    detail: str  # e.g. "GET /health -> 503", "connection refused"


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
    """Ready = the first 200 on a GET path; a non-200 answer's body is kept for the progress line."""
    status, body = http_status(base_url.rstrip("/") + path, timeout=5.0)
    if status is None:
        return Probe(False, f"GET {path}: {body}")
    detail = f"GET {path} -> {status}"
    if status != 200 and body.strip():
        detail += f" {body.strip()[:120]}"
    return Probe(status == 200, detail)


def post_reset(base_url: str, path: str) -> str | None:
    """POST a reset path: None when it answered 2xx, else what it answered."""
    status, body = http_status(base_url.rstrip("/") + path, method="POST", timeout=30.0)
    if status is not None and 200 <= status < 300:
        return None
    return f"POST {path} -> {status if status is not None else body}"
