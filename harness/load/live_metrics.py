"""The load process's half of the live Prometheus metrics: when to flush, and the Finisher hook.

`harness.metrics.exporter.LoadMetrics` accumulates and flushes without touching gevent or Locust;
this module owns the parts that do (only `harness.load` may import them): a greenlet that flushes
once a second when the loop is idle, a final flush at exit, the running-users gauge from Locust's
`test_start`, and `wrap_report`, which the Locust user's Finisher calls per finished request.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from typing import Any

from harness.metrics.exporter import ENV_DIR, LoadMetrics


def start(sink: LoadMetrics, interval_s: float = 1.0) -> LoadMetrics:
    """Flush `sink` every `interval_s` when the gevent loop is idle, and once more at exit.

    gevent and Locust are imported here, not at module level: `wrap_report` without metrics must
    not monkey-patch whoever imports this module (tests, the runner's process)."""
    import gevent

    def loop() -> None:
        while True:
            gevent.sleep(interval_s)
            gevent.idle()
            sink.flush()

    sink.attach(sink.ctrl)
    sink.flush()  # the families exist from the first scrape on
    gevent.spawn(loop)
    atexit.register(sink.flush)
    try:  # running users: Locust fires test_start with the environment before spawning
        import locust

        def on_test_start(environment: Any, **_kw: Any) -> None:
            runner = environment.runner
            sink.users = lambda: runner.user_count

        locust.events.test_start.add_listener(on_test_start)
    except Exception:
        pass
    return sink


_SINK: LoadMetrics | None = None


def wrap_report(report: Callable[[Any], None], ctrl: Any) -> Callable[[Any], None]:
    """The Finisher's report callback, plus `LoadMetrics.observe` when this run exports metrics.

    Returns `report` itself when the runner did not ask for metrics (no HARNESS_METRICS_DIR).
    """
    global _SINK
    if not os.environ.get(ENV_DIR) or not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return report
    if _SINK is None:  # one per process: its metric objects own this process's mmap entries
        _SINK = start(LoadMetrics(ctrl))
    else:
        _SINK.attach(ctrl)
    observe = _SINK.observe

    def both(rec: Any) -> None:
        report(rec)
        observe(rec)

    return both
