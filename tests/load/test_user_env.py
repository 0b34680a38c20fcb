"""What a load process's users share lives on Locust's Environment, not in module globals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Locust monkey-patches the process that imports it: run it in a child process.
SCRIPT = """
import json, sys
from pathlib import Path
import gevent, locust
from locust.env import Environment
from harness.load import user
from harness.load.controller import LoadController
from harness.load.plan import LoadPlan
from harness.scenario import Scenario

root = Path(sys.argv[1])

def controller(name):
    (root / name).mkdir()
    sc = Scenario.model_validate({"name": "t", "load": {"concurrency": 1, "duration_s": 5},
                                  "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]}})
    plan = LoadPlan(scenario=sc.model_dump(mode="json"), target_url="http://127.0.0.1:9", model="m",
                    out_dir=str(root / name))
    return LoadController(plan)

out = {}
a = Environment(user_classes=[user.LLMUser], events=locust.events)
b = Environment(user_classes=[user.LLMUser], events=locust.events)
out["none_before"] = user.load_of(a) is None
run_a, run_b = user.install(a, controller("a")), user.install(b, controller("b"))
out["own_runs"] = user.load_of(a) is run_a and user.load_of(b) is run_b
run_a.stop()  # stopping one run leaves the other handing out work
out["stopped"] = [run_a.stopping.is_set(), run_b.stopping.is_set()]
out["phases"] = [run_a.ctrl.phase, run_b.ctrl.phase]
again = user.install(a, controller("a2"))  # the next test on the same Environment replaces the run
gevent.sleep(0)  # the kill lands at the next turn of the loop
out["replaced"] = user.load_of(a) is again
out["old_greenlets_dead"] = run_a.finisher.greenlet.dead and run_a.prefetcher.dead
out["new_greenlets_alive"] = not again.finisher.greenlet.dead
print(json.dumps(out))
"""


def test_each_environment_holds_its_own_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["none_before"] and out["own_runs"]
    assert out["stopped"] == [True, False]
    assert out["phases"] == ["done", "warmup"]  # nothing was in flight: the stopped run is done at once
    assert out["replaced"] and out["old_greenlets_dead"] and out["new_greenlets_alive"]
