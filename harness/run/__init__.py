"""One run's lifecycle, shared by every front end: one driver (harness.run.driver.RunDriver) and
one target provider (harness.run.provider.TargetProvider). `harness run`, sweeps and capacity
search (and tune through sweeps) call `run_scenario`, which drives the steps around its load
processes; the web UI (harness.ui) drives the same steps from Locust's events, because Locust, not
this package, starts and stops its load.

    TargetProvider   the server given, else the built-in simulator (and a fleet's replicas), started
                     once and stopped with the provider (also capacity search and `harness quality`)
    RunDriver        prepare (prepare.start: scenario.yaml, a bad tokenizer, dataset, trace or
                     quality file fails here; prepare.resolve: target, preflight, prefix-cache
                     reset/salt, fingerprint) -> instrument (engine telemetry, engine-log window,
                     host stall meter) -> window_start / window_end -> finish (assemble, conclude,
                     write) -> report -> quality pass
    modes.MODES      start the load: local processes, distributed Locust, ... (a registry)
    follow.Follower  the load processes' line protocol -> progress, window marks, early stop
    lifecycle        run_scenario: the driver's steps around the load processes, console table

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

from harness.run.driver import RunDriver
from harness.run.lifecycle import run_scenario
from harness.run.options import RunOptions
from harness.run.provider import Target, TargetProvider

__all__ = ["RunDriver", "RunOptions", "Target", "TargetProvider", "run_scenario"]
