"""`harness ui SCENARIO`: Locust's web UI with the harness plugin (live LLM metrics, run directories).

Also registers `harness worker`, a load process for a master on another machine (`harness ui
--master ...` or `locust -f harness/ui/locustfile.py --master ...`).

Both replace this process with the load process (os.execv), so Ctrl-C goes straight to Locust and
nothing here imports gevent. Flags this command does not know are passed to Locust unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.errors import UserError

LOCUSTFILE = Path(__file__).resolve().parent.parent / "ui" / "locustfile.py"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        help="Locust's web UI with live LLM metrics (TTFT, ITL, TPOT, tokens/s, engine KV) and run directories",
        description="Start Locust's web UI with the harness plugin. Each test started from the form writes a run "
        "directory (summary.json, histograms.json, requests.jsonl, report) like `harness run`; the LLM "
        "tabs and the /llm dashboard update live. Unknown flags go to Locust (see `locust --help`).",
    )
    p.add_argument(
        "scenario",
        nargs="+",
        metavar="SCENARIO",
        help="scenario YAML file(s), or a directory of them: the only scenarios the web form can run "
        "(the first is the form's default)",
    )
    p.add_argument("--target", help="base URL of an OpenAI-compatible server (default: start the simulated engine)")
    p.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    p.add_argument("--web-host", default="127.0.0.1", help="address the web UI binds to (default 127.0.0.1; '*' = all)")
    p.add_argument("--web-port", type=int, default=8089, help="web UI port (default 8089)")
    p.add_argument("--web-login", action="store_true", help="require a login (Locust's --web-login, passed through)")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        metavar="N",
        help="N local worker processes (Locust forks them; they talk to the master on loopback, on a free "
        "port); each measures its share, the UI merges them",
    )
    p.add_argument(
        "--master",
        action="store_true",
        help="wait for workers from other machines (`harness worker --master-host THIS_HOST`)",
    )
    p.add_argument("--master-bind-host", default="*", help="with --master: address workers connect to (default: all)")
    p.add_argument("--master-bind-port", type=int, default=5557, help="with --master: port (default 5557)")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve live harness_* Prometheus metrics (docs/grafana.md) on PORT while tests run (0: off); "
        "workers on other hosts count like local ones",
    )
    p.add_argument(
        "--metrics-host", default="127.0.0.1", metavar="HOST", help="address for --metrics-port (default 127.0.0.1)"
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="where run directories go (default results/)")
    p.add_argument("--sim-args", default="", help='flags for the simulated engine, e.g. "--max-num-seqs 8"')
    p.add_argument(
        "--stop-grace",
        type=float,
        default=30.0,
        help="seconds in-flight requests may finish after Stop or the window's end (default 30)",
    )
    p.add_argument("--no-telemetry", action="store_true", help="do not scrape the engine's /metrics")
    p.add_argument("--no-report", action="store_true", help="do not write report.md/html at the end of a test")
    p.add_argument(
        "--no-reset-prefix-cache",
        action="store_true",
        help="keep the engine's prefix cache between tests (default: reset it at the start of every test, "
        "or salt the prompts where it cannot be reset)",
    )
    p.set_defaults(func=run, passthrough=True)

    w = sub.add_parser(
        "worker",
        help="a load process for a harness master on another machine (harness ui --master, locust --master)",
        description="Connect to a master and measure the share of the request stream it hands out. The master "
        "merges every worker's HDR histograms losslessly and writes the run directory.",
    )
    w.add_argument("--master-host", default="127.0.0.1", help="the master's address (default 127.0.0.1)")
    w.add_argument("--master-port", type=int, default=5557, help="the master's port (default 5557)")
    w.set_defaults(func=run_worker)


def locust_argv(args: argparse.Namespace) -> list[str]:
    """The `locust` command line for `harness ui` arguments (the allowed scenarios go in the
    environment: `ui_environment`)."""
    from harness.limits import check_processes
    from harness.scenario import load_scenario
    from harness.ui.guard import ScenarioChoices

    choices = ScenarioChoices.from_args(list(args.scenario))
    scenario = choices.default
    assert scenario is not None
    load_scenario(scenario)  # a broken scenario fails here, one line per problem
    if args.processes < 0:
        raise UserError("--processes must be >= 0")
    check_processes(args.processes, "--processes")
    if args.processes and args.master:
        raise UserError("--processes starts local workers and --master waits for remote ones; use one of them")
    argv = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--scenario",
        str(scenario.resolve()),
        "--web-host",
        args.web_host,
        "--web-port",
        str(args.web_port),
        "--results",
        str(args.results),
        "--stop-grace",
        str(args.stop_grace),
    ]
    if args.target:
        argv += ["--host", args.target]
    if args.model:
        argv += ["--model", args.model]
    if args.sim_args:
        argv.append(f"--sim-args={args.sim_args}")
    if args.web_login:
        argv.append("--web-login")
    if args.processes:
        from harness.run.target import free_port

        port = str(free_port())  # local workers only: loopback, and no fixed port to collide on
        argv += [
            "--processes",
            str(args.processes),
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            port,
            "--master-port",
            port,
        ]
    if args.master:
        argv += [
            "--master",
            "--master-bind-host",
            args.master_bind_host,
            "--master-bind-port",
            str(args.master_bind_port),
        ]
    if args.metrics_port:
        if not 0 < args.metrics_port < 65536:
            raise UserError(f"--metrics-port {args.metrics_port}: not a port number")
        argv += ["--metrics-port", str(args.metrics_port), "--metrics-host", args.metrics_host]
    if args.no_telemetry:
        argv.append("--no-telemetry")
    if args.no_reset_prefix_cache:
        argv.append("--no-reset-prefix-cache")
    if args.no_report:
        argv.append("--no-report")
    return argv + list(getattr(args, "rest", []) or [])


def ui_environment(args: argparse.Namespace) -> dict[str, str]:
    """The Locust process's environment: the scenarios the form may run (fixed at start)."""
    from harness.ui.guard import CHOICES_ENV, ScenarioChoices

    return {**os.environ, CHOICES_ENV: ScenarioChoices.from_args(list(args.scenario)).to_env()}


def run(args: argparse.Namespace) -> int:
    argv = locust_argv(args)
    env = ui_environment(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)
    return 0  # not reached


def run_worker(args: argparse.Namespace) -> int:
    argv = [
        sys.executable,
        "-m",
        "harness.load.distributed",
        "worker",
        "--master-host",
        args.master_host,
        "--master-port",
        str(args.master_port),
    ]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
    return 0  # not reached
