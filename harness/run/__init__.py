"""One run's lifecycle, shared by every front end: `harness run`, sweeps, capacity search (and tune
through sweeps) call `run_scenario`; the web UI (harness.ui) calls the same steps one by one,
because Locust, not this package, starts and stops its load.

    prepare.start    scenario.yaml; a bad tokenizer, dataset, trace or quality file fails here
    prepare.resolve  embedded simulator or preflight of the URL, prefix-cache reset/salt, fingerprint
    Instruments      engine telemetry, engine-log window, host stall meter: told when the window
                     opens and drains
    modes.MODES      start the load: local processes, distributed Locust, ... (a registry)
    follow.Follower  the load processes' line protocol -> progress, window marks, early stop
    finish           assemble summary.json, conclude (checks, analyses, status), write
    lifecycle        run_scenario: the steps above in order, console table, report, quality pass

Extension points (seams) for new work:

- A post-run analysis that adds a block to summary.json (timeslices, interference, engine-log
  findings, per-turn or per-adapter views): one module in harness/diagnose registering in its
  `ANALYSES` (see harness/diagnose/base.py); `finish.conclude` runs them for every front end.
- A run mode (offline batch, sessions, a fleet of several endpoints): one class registered in
  `harness.run.modes.MODES` that starts load processes speaking the line protocol of
  harness.load.main; `RunOptions.mode` picks it. Its plan comes from `Prepared.plan(...)`.
- Something every run must check after the load (like the too-warm prefix cache): `finish.conclude`.

Layering: this package sits above load, telemetry, results and report and below sweep, capacity,
tune, the web UI and the CLI (README "Layout"; tests/test_layers.py).
"""

from harness.run.lifecycle import run_scenario
from harness.run.options import RunOptions

__all__ = ["RunOptions", "run_scenario"]
