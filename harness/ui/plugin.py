"""The Locust plugin's entry: its command-line flags and each Locust process's role.

Roles, by Locust runner:

- LocalRunner (web UI or headless, one process): a RunSession (harness.ui.session) plus a
  WorkerAgent (harness.load.distributed) that measures in-process.
- MasterRunner (`--processes N`, or `--master` with `harness worker` on other machines): a
  RunSession; each worker process runs a WorkerAgent on its share of the request stream.
- WorkerRunner: a WorkerAgent only.
"""

from __future__ import annotations

from typing import Any

from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from harness.load.distributed import WorkerAgent
from harness.ui.guard import ScenarioChoices
from harness.ui.session import RunSession


def add_arguments(parser: Any) -> None:
    """Locust's init_command_line_parser listener: the plugin's flags (some in the web form)."""
    g = parser  # Locust's parser takes include_in_web_ui only on add_argument itself, not on groups
    listed = ScenarioChoices.from_env("").names()  # harness ui FILE...: the form offers only these
    g.add_argument(
        "--scenario",
        default=listed[0] if listed else "",
        include_in_web_ui=True,
        choices=listed or None,
        help="harness scenario YAML (one of the files the UI was started with): what to send, how fast, "
        "what counts as good",
    )
    g.add_argument(
        "--measured-window",
        default="",
        include_in_web_ui=True,
        help="seconds; empty = the scenario's stop condition; 0 = until Stop",
    )
    g.add_argument(
        "--open-loop-rate",
        default="",
        include_in_web_ui=True,
        help="requests/s, users become the pool that sends at the scheduled times; empty = the scenario's load mode",
    )
    g.add_argument(
        "--warmup",
        default="",
        include_in_web_ui=True,
        help="seconds before the measured window, not measured; empty = the scenario's warmup",
    )
    g.add_argument("--model", default="", include_in_web_ui=False, help="model name (default: the first of /v1/models)")
    g.add_argument(
        "--results", default="results", include_in_web_ui=False, help="where run directories go (default: results/)"
    )
    g.add_argument(
        "--sim-args",
        default="",
        include_in_web_ui=False,
        help='flags for the built-in simulated engine when there is no --host, e.g. "--max-num-seqs 8"',
    )
    g.add_argument(
        "--stop-grace",
        type=float,
        default=30.0,
        include_in_web_ui=False,
        help="seconds in-flight requests may finish after the window ends or Stop (default 30)",
    )
    g.add_argument(
        "--no-telemetry",
        action="store_true",
        default=False,
        include_in_web_ui=False,
        help="do not scrape the engine's /metrics",
    )
    g.add_argument(
        "--no-report",
        action="store_true",
        default=False,
        include_in_web_ui=False,
        help="do not write report.md/html at the end of a test",
    )
    g.add_argument(
        "--no-reset-prefix-cache",
        action="store_true",
        default=False,
        include_in_web_ui=False,
        help="keep the engine's prefix cache between tests (default: reset it before each test, or salt "
        "the prompts where it cannot be reset)",
    )
    g.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        include_in_web_ui=False,
        help="serve the harness_* Prometheus metrics of the current test on this port (0: off); every "
        "worker's requests count, local or on another host",
    )
    g.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        include_in_web_ui=False,
        help="address for --metrics-port (default 127.0.0.1)",
    )
    # the plugin drives real engines: keep the UI on loopback unless told otherwise
    parser.set_defaults(web_host="127.0.0.1")


def on_init(environment: Environment, **_kw: Any) -> None:
    """Locust's init listener: give this process its role."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        WorkerAgent(environment)
        return
    session = RunSession(environment)
    if not isinstance(runner, MasterRunner):
        WorkerAgent(environment)  # after the session: its test_start hands out the plan first
    environment.harness_session = session  # type: ignore[attr-defined]  # our attribute on Locust's Environment
