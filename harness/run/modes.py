"""Run modes: how a run's load is started. One mode = one registered class (`MODES`).

A mode turns a prepared run (harness.run.prepare.Prepared) into load processes that speak the
load process line protocol on stdout (harness.run.follow) and leave `load_result[.wK].json` and
`requests[.wK].jsonl` in the run directory; everything before (prepare) and after (follow,
finish) is shared. Built in: `processes` (`--processes N` local load processes, each a share of
the request stream) and `distributed` (a headless Locust master and N workers). A new mode (an
offline batch, sessions, a fleet of several endpoints) registers here and is chosen by
`RunOptions.mode`; `harness run` and sweeps need no other change.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from harness.load.plan import LoadPlan
from harness.metrics.exporter import ENV_DIR
from harness.registry import Registry
from harness.results.layout import RunDir
from harness.run.follow import signal_group
from harness.run.options import RunOptions
from harness.run.prepare import Prepared
from harness.run.target import free_port
from harness.signals import die_with_parent


@dataclass
class Started:
    procs: list[subprocess.Popen[str]]  # followed: their stdout carries the line protocol
    helpers: list[subprocess.Popen[str]] = field(default_factory=list)  # not followed (distributed workers)
    processes: int = 1  # load processes whose results the summary should hold


class LoadMode(Protocol):
    def start(
        self, prep: Prepared, opts: RunOptions, log: IO[str], env: dict[str, str] | None, started: Started
    ) -> None:
        """Start the load, adding each process to `started` as soon as it runs (a Ctrl-C during
        start-up must find the ones already running)."""


#: --remote-workers: how long the master waits for every worker on another machine to connect
REMOTE_CONNECT_TIMEOUT_S = 300.0
#: merge_worker_files copies the load processes' files in blocks of this many bytes
_COPY_BLOCK = 1 << 20

#: name -> the mode's class (instantiated per run)
MODES: Registry[type[LoadMode]] = Registry("run mode")
_POPEN: dict[str, Any] = {"text": True, "start_new_session": True, "preexec_fn": die_with_parent}


@MODES.register("processes")
class LocalProcesses:
    """`--processes N` load processes (harness.load.main), each sending its share of the stream."""

    def start(
        self, prep: Prepared, opts: RunOptions, log: IO[str], env: dict[str, str] | None, started: Started
    ) -> None:
        workers = started.processes = max(1, opts.processes)
        for worker in range(workers):
            plan = prep.plan(
                worker=worker,
                workers=workers,
                kernel_stamps=opts.kernel_stamps,
                reader=opts.reader,
                stop_grace_s=opts.stop_grace_s,
            )
            plan_path = prep.run_dir.root / (f"load_plan.w{worker}.json" if workers > 1 else "load_plan.json")
            plan.write(plan_path)
            # own session: Ctrl-C reaches us only and we stop the load gracefully; a killed harness
            # (SIGKILL) stops it too (die_with_parent); env: PROMETHEUS_MULTIPROC_DIR with live metrics
            started.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "harness.load.main", str(plan_path)],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    bufsize=1,
                    env=with_secrets(env, plan),
                    **_POPEN,
                )
            )


@MODES.register("distributed")
class Distributed:
    """A headless Locust master (it prints the JSON lines a load process prints) and its workers."""

    def start(
        self, prep: Prepared, opts: RunOptions, log: IO[str], env: dict[str, str] | None, started: Started
    ) -> None:
        workers = started.processes = opts.distributed
        # live metrics (env: the run's PROMETHEUS_MULTIPROC_DIR): the workers ship their counts to the
        # master, which alone writes them, as for workers on other hosts (harness.metrics.exporter)
        plan = prep.plan(
            workers=workers,
            kernel_stamps=opts.kernel_stamps,
            reader=opts.reader,
            stop_grace_s=opts.stop_grace_s,
            live_metrics=env is not None,
        )
        remote = opts.remote_workers
        port = opts.master_port if remote else free_port()
        plan_path = prep.run_dir.plan
        plan.write(plan_path)
        where = (
            ["--bind-host", opts.master_bind_host, "--connect-timeout", str(REMOTE_CONNECT_TIMEOUT_S)] if remote else []
        )
        started.procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "harness.load.distributed",
                    "master",
                    str(plan_path),
                    "--expect-workers",
                    str(workers),
                    "--port",
                    str(port),
                    *where,
                ],
                stdout=subprocess.PIPE,
                bufsize=1,
                stderr=log,
                env=with_secrets(env, plan),
                **_POPEN,
            )
        )
        if remote:  # the workers are on other machines: `harness worker --master-host THIS_HOST`
            return
        worker_env = (
            None if env is None else {k: v for k, v in env.items() if k not in ("PROMETHEUS_MULTIPROC_DIR", ENV_DIR)}
        )
        for _ in range(workers):
            started.helpers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "harness.load.distributed", "worker", "--master-port", str(port)],
                    stdout=log,
                    stderr=log,
                    env=worker_env,
                    **_POPEN,
                )
            )


def with_secrets(env: dict[str, str] | None, plan: LoadPlan) -> dict[str, str] | None:
    """The load process's environment: `env` (None: this process's) plus the plan's credential
    headers, which its file holds masked (harness.scenario.secrets)."""
    extra = plan.secrets_env()
    if not extra:
        return env
    return {**(os.environ if env is None else env), **extra}


def stop_helpers(helpers: list[subprocess.Popen[str]], timeout_s: float = 10.0) -> None:
    """Workers quit when their master does; stop any that did not."""
    deadline = time.monotonic() + timeout_s
    for p in helpers:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(p, signal.SIGTERM)
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                signal_group(p, signal.SIGKILL)


def merge_worker_files(run_dir: RunDir) -> None:
    """--processes N: each load process appends to requests.wK.jsonl (progress.wK.jsonl); the run
    directory's contract is one requests.jsonl (and progress.jsonl), so join them."""
    for name in ("requests", "progress"):
        parts = sorted(run_dir.root.glob(f"{name}.w*.jsonl"))
        if not parts:
            continue
        target = run_dir.root / f"{name}.jsonl"
        tmp = target.with_name(target.name + ".tmp")
        with open(tmp, "wb") as out:  # copied a block at a time: a long run's parts are gigabytes
            if target.exists():
                with open(target, "rb") as src:
                    shutil.copyfileobj(src, out, _COPY_BLOCK)
            for part in parts:
                last = b""
                with open(part, "rb") as src:
                    while block := src.read(_COPY_BLOCK):
                        out.write(block)
                        last = block
                if last and not last.endswith(b"\n"):  # a part cut mid-line still ends its line
                    out.write(b"\n")
        os.replace(tmp, target)
        for part in parts:
            part.unlink()
