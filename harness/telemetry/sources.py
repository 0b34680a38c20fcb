"""Where engine metrics come from: one class per source behind the `Source` Protocol.

The session (harness.telemetry.session) owns the thread, the marks, the failure policy and the
records; a source only scrapes and, where the window is not built from live scrapes, answers
for the window at the end. `direct`: GET the engine's /metrics each interval, the window is the
accumulation of those scrapes. `prometheus`: a Prometheus server already scrapes the engine; live
values come from instant queries, the window from range queries after it closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlparse

from harness.engines import Profile, no_metrics_reason
from harness.telemetry.block import build_block, empty_block, gpu_unavailable
from harness.telemetry.direct import DirectSource
from harness.telemetry.exposition import Snapshot, TelemetryUnavailable
from harness.telemetry.window import WindowAccumulator


class Source(Protocol):
    name: str  # the engine block's `source`
    where: str  # for "no ... metrics at WHERE"
    #: True: the window is accumulated from the live scrapes (direct); False: `window_block` builds it
    live_window: bool
    page_bytes: int  # size of the last scraped page (0: not known)

    def check(self) -> None:
        """Before the first scrape; raises TelemetryUnavailable when the source cannot work."""

    def scrape(self, profile: Profile | None, choose: Callable[[set[str]], Profile]) -> tuple[Snapshot, Profile]:
        """One snapshot of the profile's metrics (the profile chosen from the names seen when None)."""

    def budget_s(self) -> float:
        """How long stop() waits for the final scrape."""

    def twin(self) -> Source:
        """The same source on a connection of its own: a mark's scrape (baseline, final) runs at
        once beside a periodic one still in flight (a requests.Session is not shared between threads)."""

    def window_block(self, session: Any) -> dict: ...

    def close(self) -> None: ...


class DirectScrapes:
    name = "direct"
    live_window = True

    def __init__(self, url: str, read_timeout_s: float) -> None:
        self.direct = DirectSource(url, connect_timeout_s=min(3.0, read_timeout_s), read_timeout_s=read_timeout_s)
        self.where = self.direct.url
        self.page_bytes = 0

    def check(self) -> None:
        return None

    def scrape(self, profile: Profile | None, choose: Callable[[set[str]], Profile]) -> tuple[Snapshot, Profile]:
        if profile is None:
            snap, names = self.direct.scrape()
            profile = choose(names)
            snap = Snapshot(ts=snap.ts, samples={k: v for k, v in snap.samples.items() if k in profile.wanted()})
        else:
            snap, _names = self.direct.scrape(profile.wanted())
            if not snap.samples:
                raise TelemetryUnavailable(f"no {profile.name} metrics on {self.direct.url} (profile {profile.name})")
        self.page_bytes = self.direct.last_bytes
        return snap, profile

    def budget_s(self) -> float:
        """The final scrape alone (it does not wait for a periodic one in flight), retried only
        after a quick failure (< 1 s, then 1 s apart), so a hung endpoint costs one timeout."""
        return sum(self.direct.timeout) + 3.0

    def twin(self) -> DirectScrapes:
        return DirectScrapes(self.direct.url, self.direct.timeout[1])

    def window_block(self, session: Any) -> dict:
        raise NotImplementedError("direct scrapes accumulate the window live")

    def close(self) -> None:
        self.direct.close()


class PrometheusScrapes:
    name = "prometheus"
    live_window = False
    page_bytes = 0

    def __init__(self, url: str, selector: Any, timeout_s: float) -> None:
        from harness.telemetry.promql import PrometheusSource

        self._args = (url, selector, timeout_s)
        self.prom = PrometheusSource(url, selector, timeout_s=timeout_s)
        self.where = f"Prometheus {self.prom.url} (selector {self.prom.matchers or 'none'})"

    def check(self) -> None:
        self.prom.check()

    def scrape(self, profile: Profile | None, choose: Callable[[set[str]], Profile]) -> tuple[Snapshot, Profile]:
        if profile is None:
            profile = choose(self.prom.detect_names())
        p = profile
        return self.prom.instant(p, p.gauge_names() | set().union(*p.counters.values(), *p.summed_counters.values())), p

    def budget_s(self) -> float:
        return self.prom.timeout_s + 1.0

    def twin(self) -> PrometheusScrapes:
        return PrometheusScrapes(*self._args)

    def close(self) -> None:
        self.prom.prom.close()

    def window_block(self, session: Any) -> dict:
        """The engine block from range queries over the session's marked window."""
        prom = self.prom
        t0 = session._t0
        t1 = session._t1 or time.time()
        base = {
            "source": "prometheus",
            "expected_hit_rate": session.expected_hit_rate,
            "extra_telemetry": session._telemetry_extra(),
        }
        if t0 is None:
            return empty_block(
                missing_reason="mark_window_start was never called", gpu_memory=session._gpu_block(), **base
            )
        try:
            if session._profile is None:
                session._profile = session._choose_profile(prom.detect_names())
            profile = session._profile
            names = profile.wanted()
            interval = prom.scrape_interval(profile, names, t1) or 15.0
            caught_up = prom.wait_past(profile, names, t1, max_wait_s=min(60.0, 1.5 * interval + 1.0))
            acc = None
            for snap in prom.window_snapshots(profile, names, t0, t1):
                if acc is None:
                    acc = WindowAccumulator(profile, snap)
                else:
                    acc.add(snap, gauges=snap.ts <= t1)  # the scrape after t1 closes the counters only
            gpu = self._gpu(session, profile, names, t0, t1)
        except TelemetryUnavailable as exc:
            session._warn(exc.reason, permanent=True)
            return empty_block(
                missing_reason=exc.reason,
                profile=session._profile and session._profile.name,
                gpu_memory=session._gpu_block(),
                **base,
            )
        if acc is None or acc.scrapes < 2:
            return empty_block(
                missing_reason=f"Prometheus {prom.url} holds fewer than 2 scrapes of the engine in the window",
                profile=profile.name,
                gpu_memory=gpu,
                scrapes=acc.scrapes if acc else 0,
                **base,
            )
        reason = None
        if not caught_up:
            reason = "Prometheus had not scraped the engine after the window end; the window ends at its last scrape"
        base["extra_telemetry"]["prometheus_interval_s"] = interval
        return build_block(acc, window_s=t1 - t0, scrapes=acc.scrapes, missing_reason=reason, gpu_memory=gpu, **base)

    def _gpu(self, session: Any, profile: Profile, names: set[str], t0: float, t1: float) -> dict:
        prom = self.prom
        hosts = set()
        try:
            for _job, instance in prom.last_scrapes(profile, names):
                host = urlparse(f"//{instance}").hostname
                if host:
                    hosts.add(host)
            dcgm = prom.gpu_memory(t0, t1 + 1, hosts)
        except TelemetryUnavailable:
            dcgm = None
        if dcgm is not None:
            return dcgm
        nv = session._gpu_block()
        if nv.get("available"):
            return nv
        return gpu_unavailable(
            f"no DCGM_FI_DEV_FB_USED series for the engine's hosts on Prometheus; NVML: {nv['reason']}"
        )


def choose_source(config: Any, target_url: str | None, engine_kind: str | None) -> tuple[Source | None, str | None]:
    """The run's source, or None and why there is none: disabled, a Prometheus server that cannot
    be used, an engine kind without /metrics (unless `metrics_url` names one), no URL at all."""
    read_timeout = float(config.timeout_s)
    if not config.enabled:
        return None, "telemetry disabled (telemetry.enabled: false)"
    if config.prometheus:
        try:
            return PrometheusScrapes(config.prometheus, config.selector, read_timeout), None
        except TelemetryUnavailable as exc:
            return None, exc.reason
    absent = no_metrics_reason(engine_kind)
    if absent and not config.metrics_url:
        return None, absent
    url = config.metrics_url or (target_url.rstrip("/") + "/metrics" if target_url else None)
    if url:
        return DirectScrapes(url, read_timeout), None
    return None, "no target URL and no telemetry.metrics_url"
