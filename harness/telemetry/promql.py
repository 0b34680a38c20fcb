"""Prometheus server mode: the same canonical quantities from a Prometheus that scrapes the engine.

Queries go through prometheus-api-client. Every metric is selected as
`{__name__=~"vllm[:_](kv_cache_usage_perc|...)", <selector>}`: prometheus_client 0.26 escapes `:`
to `_` in OpenMetrics sample lines, so a Prometheus that negotiated OpenMetrics stored
`vllm_kv_cache_usage_perc` (client_python #1177); older setups stored `vllm:`. Both match.

The window is read as raw samples (a range-vector selector evaluated at the window's end, in
chunks), rebuilt into one Snapshot per Prometheus scrape timestamp and fed to the same
WindowAccumulator as direct scraping: baseline = the last sample at or before the window start,
end = for each target, its first scrape at or after the window end (waited for, bounded).
No `rate()`/`increase()`: their extrapolation would not match direct deltas.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections import defaultdict
from collections.abc import Iterator

import requests
from urllib3.util.retry import Retry

from harness.engines import Profile, detect_regex
from harness.telemetry.exposition import (
    Labels,
    Snapshot,
    TelemetryUnavailable,
    labels_key,
    normalize,
)

DCGM_NAMES = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_TOTAL")
MIB = 1024 * 1024


def parse_selector(selector: str | None) -> str:
    """`job="vllm"` or `{job="vllm", instance=~"a.*"}` -> `job="vllm", instance=~"a.*"` (or "")."""
    if not selector:
        return ""
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.rstrip(",").strip()
    if text and not re.match(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"', text):
        raise TelemetryUnavailable(
            f'telemetry.selector {selector!r} is not a PromQL label matcher list (e.g. job="vllm")', permanent=True
        )
    return text


def http_error(url: str, text: str) -> TelemetryUnavailable:
    """A one-line reason from prometheus-api-client's 'HTTP Status Code N (b'body')' message."""
    m = re.match(r"HTTP Status Code (\d+)", text)
    if not m:
        return TelemetryUnavailable(f"Prometheus query failed: {text[:200]}")
    status = int(m.group(1))
    detail = re.search(r'"error"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
    if detail:  # a Prometheus API error: our query (or the selector) is wrong; retrying won't help
        return TelemetryUnavailable(
            f"Prometheus rejected the query (HTTP {status}): {detail.group(1)[:200]}", permanent=True
        )
    if status in (401, 403):
        return TelemetryUnavailable(f"Prometheus {url} refused access (HTTP {status})", permanent=True)
    if status >= 500 and status not in (501, 505):
        return TelemetryUnavailable(f"Prometheus {url} answered HTTP {status}")
    return TelemetryUnavailable(f"{url} is not a Prometheus API (HTTP {status} on /api/v1/query)", permanent=True)


def target_of(labels: Labels) -> tuple[str, str]:
    d = dict(labels)
    return d.get("job", ""), d.get("instance", "")


class PrometheusSource:
    def __init__(self, url: str, selector: str | None = None, *, timeout_s: float = 3.0) -> None:
        from prometheus_api_client import PrometheusConnect

        self.url = url.rstrip("/")
        self.matchers = parse_selector(selector)
        self.timeout_s = timeout_s
        # no retries inside the client: a dead server must cost one short timeout, not a storm
        self.prom = PrometheusConnect(
            url=self.url, disable_ssl=True, retry=Retry(total=0), timeout=timeout_s, method="POST"
        )

    # ------------------------------------------------------------------ plumbing
    def _query(self, query: str, at: float | None = None) -> list[dict]:
        params = {} if at is None else {"time": f"{at:.3f}"}
        try:
            return self.prom.custom_query(query, params=params)
        except (requests.exceptions.JSONDecodeError, ValueError, KeyError, TypeError) as exc:  # 200, not the API
            raise TelemetryUnavailable(f"{self.url} is not a Prometheus API ({exc})", permanent=True) from None
        except requests.exceptions.Timeout:
            raise TelemetryUnavailable(
                f"Prometheus {self.url} timed out (> {self.timeout_s:g} s)", unreachable=True
            ) from None
        except requests.exceptions.ConnectionError:
            raise TelemetryUnavailable(f"Prometheus {self.url} unreachable", unreachable=True) from None
        except requests.exceptions.RequestException as exc:
            raise TelemetryUnavailable(f"Prometheus {self.url}: {exc}") from None
        except Exception as exc:  # PrometheusApiClientException: "HTTP Status Code N (body)"
            raise http_error(self.url, str(exc)) from None

    def selector(self, name_regex: str, extra: str = "") -> str:
        parts = [f'__name__=~"{name_regex}"']
        if self.matchers:
            parts.append(self.matchers)
        if extra:
            parts.append(extra)
        return "{" + ", ".join(parts) + "}"

    @staticmethod
    def name_regex(profile: Profile, names: set[str]) -> str:
        suffixes = sorted({profile.strip_prefix(n) for n in names})
        return profile.prom_prefix + "(" + "|".join(re.escape(s) for s in suffixes) + ")"

    # ------------------------------------------------------------------ API
    def check(self) -> None:
        """Raise TelemetryUnavailable unless the server answers a trivial query."""
        result = self._query("vector(1)")
        if not isinstance(result, list):
            raise TelemetryUnavailable(f"{self.url} answered an unexpected query result", permanent=True)

    def detect_names(self) -> set[str]:
        """Normalized engine metric names currently present under the selector."""
        result = self._query(f"count by (__name__) ({self.selector(detect_regex())})")
        return {normalize(r["metric"].get("__name__", "")) for r in result}

    def instant(self, profile: Profile, names: set[str]) -> Snapshot:
        """Latest values (for live displays and the time series), one Snapshot at 'now'."""
        now = time.time()
        snap = Snapshot(ts=now)
        for r in self._query(self.selector(self.name_regex(profile, names)), at=now):
            value = float(r["value"][1])
            if not math.isnan(value):
                snap.add(normalize(r["metric"]["__name__"]), labels_key(r["metric"]), value)
        return snap

    def raw(self, name_regex: str, start: float, end: float, *, extra: str = "", chunk_s: float = 1800.0) -> dict:
        """Raw samples in (start, end]: {(normalized name, labels): [(ts, value), ...]} sorted by ts."""
        series: dict[tuple[str, Labels], list[tuple[float, float]]] = defaultdict(list)
        sel = self.selector(name_regex, extra)
        lo = start
        while lo < end:
            hi = min(end, lo + chunk_s)
            rng = max(1, math.ceil((hi - lo) * 1000))
            for r in self._query(f"{sel}[{rng}ms]", at=hi):
                key = (normalize(r["metric"].get("__name__", "")), labels_key(r["metric"]))
                for ts, v in r.get("values", []):
                    ts, v = float(ts), float(v)
                    if lo < ts <= hi and not math.isnan(v):
                        series[key].append((ts, v))
            lo = hi
        for samples in series.values():
            samples.sort()
        return dict(series)

    def _probe_names(self, profile: Profile, names: set[str]) -> set[str]:
        """A few gauges every scrape of the engine carries (to find scrape timestamps)."""
        probe = {n for n in names if n in profile.gauge_names() and not n.endswith("_info")}
        return probe or names

    def last_scrapes(
        self, profile: Profile, names: set[str], lookback_s: float = 120.0
    ) -> dict[tuple[str, str], float]:
        """Timestamp of each target's latest scrape (raw samples: no timestamp(), whose dropped
        names would collide across metrics)."""
        now = time.time()
        out: dict[tuple[str, str], float] = {}
        for (_name, labels), samples in self.raw(
            self.name_regex(profile, self._probe_names(profile, names)), now - lookback_s, now + 1
        ).items():
            tgt = target_of(labels)
            out[tgt] = max(out.get(tgt, 0.0), samples[-1][0])
        return out

    def wait_past(self, profile: Profile, names: set[str], t_end: float, max_wait_s: float) -> bool:
        """Wait (bounded) until every target has been scraped at or after t_end."""
        deadline = time.time() + max_wait_s
        while True:
            last = self.last_scrapes(profile, names)
            if last and min(last.values()) >= t_end:
                return True
            if time.time() >= deadline:
                return False
            time.sleep(0.2)

    def scrape_interval(self, profile: Profile, names: set[str], at: float) -> float | None:
        """Median gap between a gauge's samples over the last two minutes (None if unknown)."""
        data = self.raw(self.name_regex(profile, self._probe_names(profile, names)), at - 120, at)
        gaps: list[float] = []
        for samples in data.values():
            ts = [t for t, _ in samples]
            gaps.extend(b - a for a, b in itertools.pairwise(ts))
        if not gaps:
            return None
        gaps.sort()
        return gaps[len(gaps) // 2]

    def window_snapshots(
        self, profile: Profile, names: set[str], t0: float, t1: float, *, lookback_s: float = 330.0
    ) -> Iterator[Snapshot]:
        """Baseline at t0, one Snapshot per scrape timestamp in (t0, t_final], t_final = the
        latest of the targets' first scrapes at or after t1. Values carry forward between scrapes."""
        data = self.raw(self.name_regex(profile, names), t0 - lookback_s, max(t1, time.time()) + 1)
        first_after: dict[tuple[str, str], float] = {}
        for (_name, labels), samples in data.items():
            tgt = target_of(labels)
            ts_after = next((ts for ts, _ in samples if ts >= t1), None)
            if ts_after is not None:
                first_after[tgt] = min(first_after.get(tgt, ts_after), ts_after)
        t_final = max(first_after.values()) if first_after else t1
        events: list[tuple[float, tuple[str, Labels], float]] = []
        for key, samples in data.items():
            events.extend((ts, key, v) for ts, v in samples if ts <= t_final)
        events.sort(key=lambda e: e[0])
        current: dict[tuple[str, Labels], float] = {}

        def snapshot(ts: float) -> Snapshot:
            snap = Snapshot(ts=ts)
            for (name, labels), value in current.items():
                snap.add(name, labels, value)
            return snap

        i = 0
        while i < len(events) and events[i][0] <= t0:
            current[events[i][1]] = events[i][2]
            i += 1
        if current:
            yield snapshot(t0)
        while i < len(events):
            ts = events[i][0]
            while i < len(events) and events[i][0] == ts:
                current[events[i][1]] = events[i][2]
                i += 1
            yield snapshot(ts)

    def gpu_memory(self, t0: float, t1: float, engine_hosts: set[str]) -> dict | None:
        """DCGM framebuffer memory over the window, or None when no DCGM series are found."""
        name_regex = "|".join(DCGM_NAMES)
        attempts = []
        if self.matchers:
            attempts.append(("selector", ""))
        if engine_hosts:
            hosts = "|".join(re.escape(h) for h in sorted(engine_hosts))
            attempts.append(("host", f'instance=~"({hosts})(:[0-9]+)?"'))
        for mode, extra in attempts:
            saved = self.matchers
            if mode == "host":
                self.matchers = ""
            try:
                data = self.raw(name_regex, t0, t1, extra=extra)
            finally:
                self.matchers = saved
            if data:
                return dcgm_block(data)
        return None


def dcgm_block(data: dict) -> dict | None:
    per: dict[tuple, dict] = defaultdict(lambda: {"used": [], "free": [], "total": []})
    for (name, labels), samples in data.items():
        d = dict(labels)
        key = (d.get("Hostname") or d.get("instance", ""), d.get("gpu", ""), d.get("UUID", ""))
        field = {"DCGM_FI_DEV_FB_USED": "used", "DCGM_FI_DEV_FB_FREE": "free", "DCGM_FI_DEV_FB_TOTAL": "total"}[name]
        per[key][field].extend(v for _, v in samples)
    per_gpu = []
    for (host, gpu, uuid), v in sorted(per.items()):
        if not v["used"]:
            continue
        used_max = max(v["used"]) * MIB
        if v["total"]:
            total = max(v["total"]) * MIB
        elif v["free"]:
            total = (v["used"][-1] + v["free"][-1]) * MIB  # DCGM: used + free (+ reserved)
        else:
            total = None
        per_gpu.append(
            {
                "host": host,
                "index": gpu,
                "uuid": uuid,
                "used_max_bytes": int(used_max),
                "total_bytes": None if total is None else int(total),
            }
        )
    if not per_gpu:
        return None
    totals = [g["total_bytes"] for g in per_gpu]
    return {
        "available": True,
        "source": "dcgm",
        "used_max_bytes": sum(g["used_max_bytes"] for g in per_gpu),
        "total_bytes": sum(totals) if all(t is not None for t in totals) else None,
        "per_gpu": per_gpu,
    }
