"""Direct scraping of an engine's /metrics page (the default source).

`DirectSource.scrape()` returns a Snapshot or raises TelemetryUnavailable with a one-line reason.
Short timeouts, no retries inside (the session decides what a failure means), a size cap, and
`Accept: text/plain` so engines serving prometheus_client keep the `vllm:` spelling (OpenMetrics
is parsed too when a server insists on it).
"""

from __future__ import annotations

import time

import requests

from harness.limits import METRICS_PAGE
from harness.telemetry.exposition import (
    Snapshot,
    TelemetryUnavailable,
    check_content_type,
    names_in,
    parse,
)

ACCEPT = "text/plain;version=0.0.4;q=1.0, application/openmetrics-text;version=1.0.0;q=0.5, */*;q=0.1"


class DirectSource:
    def __init__(self, url: str, *, connect_timeout_s: float = 1.0, read_timeout_s: float = 2.0) -> None:
        self.url = url
        self.timeout = (connect_timeout_s, read_timeout_s)
        self._session = requests.Session()
        self._session.headers.update({"Accept": ACCEPT, "User-Agent": "harness-telemetry"})
        #: seconds of the last fetch and parse (for the scrape-cost figures)
        self.last_fetch_s = 0.0
        self.last_parse_s = 0.0
        self.last_bytes = 0

    def fetch(self) -> tuple[str, str | None, float]:
        """(body, content_type, unix time of the request)."""
        ts = time.time()
        t0 = time.perf_counter()
        try:
            resp = self._session.get(self.url, timeout=self.timeout, stream=True, allow_redirects=True)
        except requests.exceptions.Timeout:
            raise TelemetryUnavailable(f"{self.url} timed out (> {self.timeout[1]:g} s)", unreachable=True) from None
        except requests.exceptions.ConnectionError as exc:
            raise TelemetryUnavailable(f"{self.url} unreachable ({_short(exc)})", unreachable=True) from None
        except requests.exceptions.RequestException as exc:
            raise TelemetryUnavailable(f"{self.url}: {_short(exc)}", permanent=True) from None
        try:
            if resp.status_code == 404:
                raise TelemetryUnavailable(
                    f"{self.url} returned 404: the engine serves no /metrics (vLLM: on by default; "
                    "SGLang: --enable-metrics; llama.cpp: --metrics), or set telemetry.metrics_url",
                    permanent=True,
                )
            if resp.status_code >= 400:
                permanent = resp.status_code in (401, 403, 405, 501)
                raise TelemetryUnavailable(f"{self.url} returned HTTP {resp.status_code}", permanent=permanent)
            chunks, size = [], 0
            deadline = t0 + self.timeout[0] + self.timeout[1]
            cap = METRICS_PAGE.value
            for chunk in resp.iter_content(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > cap:
                    raise TelemetryUnavailable(
                        f"{self.url} page larger than {cap:,} bytes (set {METRICS_PAGE.env}=N to raise it)",
                        permanent=True,
                    )
                if time.perf_counter() > deadline:
                    raise TelemetryUnavailable(f"{self.url} too slow (body not complete in {deadline - t0:.1f} s)")
        except requests.exceptions.RequestException as exc:
            raise TelemetryUnavailable(f"{self.url}: reading the page failed ({_short(exc)})") from None
        finally:
            resp.close()
        body = b"".join(chunks).decode("utf-8", errors="replace")
        self.last_fetch_s = time.perf_counter() - t0
        self.last_bytes = size
        content_type = resp.headers.get("Content-Type")
        check_content_type(content_type, body[:256])
        return body, content_type, ts

    def scrape(self, wanted: set[str] | None = None) -> tuple[Snapshot, set[str]]:
        """(snapshot, all normalized names on the page). `wanted` filters before parsing."""
        body, content_type, ts = self.fetch()
        t0 = time.perf_counter()
        names = names_in(body)
        snap = parse(body, ts, content_type=content_type, wanted=wanted)
        self.last_parse_s = time.perf_counter() - t0
        if not names:
            raise TelemetryUnavailable(f"{self.url} returned an empty metrics page")
        return snap, names

    def close(self) -> None:
        self._session.close()


def _short(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Caused by ", "NewConnectionError("):
        if marker in text:
            text = text.split(marker, 1)[1]
    return text.strip("()' ")[:160]
