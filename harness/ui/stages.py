"""LoadTestShape stages in the web UI: when a shape moves Locust's target user count, a new stage.

Why a module of its own: the stage is a dimension of the results (summary.json `groups.stage`,
one block per stage, and `load.stages` with each stage's seconds), not a detail of the session;
the session only starts the watcher and asks for the spans and the warning when it writes the
summary. The workers label the requests they send with the current stage
(harness.load.messages.Stage), so each block holds only its own stage's requests.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent

log = logging.getLogger("harness.web")


def watch_stages(session: Any) -> None:
    """Forever (a greenlet): a change of the runner's target user count during the warmup or the
    window opens a stage and tells the workers its label."""
    while True:
        gevent.sleep(0.1)
        run = session.run
        if run is None or not run.stages or run.ending or session.state not in ("warmup", "measuring"):
            continue
        users = int(getattr(session.env.runner, "target_user_count", 0) or 0)
        if users != run.stages[-1]["users"]:
            label = str(len(run.stages) + 1)
            run.stages.append({"stage": label, "users": users, "t": time.time()})
            session.collector.stage(label, users)
            log.info("harness: stage %s: %d users", label, users)


def stage_spans(run: Any) -> list[dict[str, Any]]:
    """summary.json load.stages: each stage's users and its seconds inside the measured window
    (the rates of its block are per those seconds)."""
    start = run.window_start if run.window_start is not None else run.stages[0]["t"]
    end = min(t for t in (run.stop_t, run.window_end, time.time()) if t is not None)
    out = []
    for i, st in enumerate(run.stages):
        t0 = max(st["t"], start)
        t1 = run.stages[i + 1]["t"] if i + 1 < len(run.stages) else end
        out.append({"stage": st["stage"], "users": st["users"], "duration_s": round(max(0.0, min(t1, end) - t0), 3)})
    return out


def load_warnings(run: Any) -> list[str]:
    """What the summary says about a load that changed during the test: a shape's stages (each has
    its block) or users changed by hand (the results mix load levels)."""
    if run.stages:
        if len(run.stages) > 1:
            return [
                "LoadTestShape: the overall block mixes its stages ("
                + " -> ".join(f"{s['users']} users" for s in run.stages)
                + "); each stage has its own block (groups.stage)"
            ]
        return []
    if len(set(run.users_seen)) > 1:
        return [
            "the number of users changed during the test ("
            + " -> ".join(map(str, run.users_seen))
            + "): the results mix load levels"
        ]
    return []
