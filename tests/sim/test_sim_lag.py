"""The simulator measures its own lag (audit N6): when the process does not get the CPU in time its
steps go out late and its schedule falls behind; /metrics and the log say by how much.

The starved host is made real: the simulator process is stopped (SIGSTOP) for 0.4 s while it
streams, exactly what a busy machine does to it, only longer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import aiohttp
from sim_client import chat_body, run, stream

BASE = ("--sim-speed", "4", "--max-model-len", "2048", "--seed", "3")


async def _streams(url: str, n: int, tokens: int, during=None) -> None:
    async with aiohttp.ClientSession() as s:
        tasks = [asyncio.ensure_future(stream(s, url, chat_body("a b c", tokens))) for _ in range(n)]
        if during is not None:
            await asyncio.sleep(0.3)
            await asyncio.get_running_loop().run_in_executor(None, during)
        results = await asyncio.gather(*tasks)
    assert all(r.done for r in results)


def test_metrics_expose_lag_and_modelled_time(sim):
    srv = sim(*BASE)
    run(_streams(srv.url, 4, 60))
    m = srv.metrics()
    assert m["sim_step_lag_seconds_count"] > 0
    assert m["sim_modelled_seconds_total"] > 0  # the busy time its cost model asked for
    assert "sim_behind_seconds_total" in m and "sim_step_lag_max_seconds" in m
    assert not any(k.startswith("vllm:sim") for k in m)  # not dressed up as a vLLM metric


def test_a_starved_simulator_counts_the_time_it_fell_behind(sim):
    srv = sim(*BASE)
    before = srv.metrics()

    def starve() -> None:
        os.kill(srv.proc.pid, signal.SIGSTOP)
        time.sleep(0.4)
        os.kill(srv.proc.pid, signal.SIGCONT)

    run(_streams(srv.url, 4, 400, during=starve))
    after = srv.metrics()
    behind = after["sim_behind_seconds_total"] - before["sim_behind_seconds_total"]
    assert behind >= 0.35, after  # the 0.4 s it was stopped, lost for good
    assert after["sim_step_lag_max_seconds"] >= 0.35
    srv.stop()
    log = srv.stdout()
    line = next(ln for ln in log.splitlines() if "Simulator lag: fell behind its schedule by" in ln)
    assert float(line.split(" by ", 1)[1].split(" s", 1)[0]) >= 0.35, line


def test_scripted_mode_measures_its_ticks_lateness(sim):
    srv = sim("--scripted-ttft-ms", "5", "--scripted-itl-ms", "5")

    def starve() -> None:
        os.kill(srv.proc.pid, signal.SIGSTOP)
        time.sleep(0.3)
        os.kill(srv.proc.pid, signal.SIGCONT)

    run(_streams(srv.url, 2, 200, during=starve))
    m = srv.metrics()
    assert m["sim_step_lag_max_seconds"] >= 0.25
    assert m["sim_step_lag_seconds_count"] > 0
