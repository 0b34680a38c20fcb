"""A Locust LoadTestShape of load stages, for the harness's Locust plugin (docs/ui.md):

    locust -f harness/ui/locustfile.py,scenarios/shapes/stages.py --scenario scenarios/mixed.yaml \
        --headless --measured-window 0

Each stage holds a number of users until a time: `HARNESS_STAGES="30:4,60:16,90:8"` (the default)
is 4 users for the first 30 s, 16 until 60 s, 8 until 90 s, then the test ends. The run gets one
summary block per stage (summary.json groups.stage, load.stages) besides the overall one.
"""

from __future__ import annotations

import os

from locust import LoadTestShape


def _stages(text: str) -> list[tuple[float, int]]:
    out = []
    for part in text.split(","):
        until, users = part.split(":")
        out.append((float(until), int(users)))
    return out


class Stages(LoadTestShape):
    stages = _stages(os.environ.get("HARNESS_STAGES", "30:4,60:16,90:8"))

    def tick(self) -> tuple[int, float] | None:
        t = self.get_run_time()
        for until, users in self.stages:
            if t < until:
                return users, float(users)  # every user of a stage starts within a second
        return None
