"""Fault injection: error responses, stalls, mid-stream disconnects, crashes, broken /metrics."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_client import chat_body, post_json, run, stream
from simlag import raw_sim_lag, retry_while_lagging

BASE = ("--sim-speed", "20", "--max-model-len", "2048")


async def _statuses(url: str, n: int) -> list[int]:
    async with aiohttp.ClientSession() as s:
        outs = await asyncio.gather(
            *[post_json(s, url, "/v1/completions", {"prompt": "a", "max_tokens": 2}) for _ in range(n)]
        )
    return [status for status, _, _ in outs]


def test_error_rate_429(sim):
    srv = sim(*BASE, "--fault-error-rate", "1", "--fault-error-status", "429")

    async def go():
        async with aiohttp.ClientSession() as s:
            return await post_json(s, srv.url, "/v1/chat/completions", chat_body("a", 2))

    status, headers, body = run(go())
    assert status == 429 and body["error"]["code"] == 429 and "Retry-After" in headers


def test_partial_error_rate_500(sim):
    statuses = run(_statuses(sim(*BASE, "--fault-error-rate", "0.5", "--seed", "1").url, 40))
    assert 5 <= statuses.count(500) <= 35 and statuses.count(200) == 40 - statuses.count(500)


def test_no_errors_without_the_fault(sim):
    assert set(run(_statuses(sim(*BASE).url, 20))) == {200}


def test_disconnect_cuts_streams_mid_way(sim):
    srv = sim(*BASE, "--fault-disconnect-rate", "1")

    async def go():
        async with aiohttp.ClientSession() as s:
            return await asyncio.gather(*[stream(s, srv.url, chat_body("a b", 50)) for _ in range(5)])

    for r in run(go()):
        assert not r.done
        assert r.error is not None
        assert 1 <= len(r.token_times()) < 50


async def _max_gap(url: str, n: int = 100) -> float:
    async with aiohttp.ClientSession() as s:
        r = await stream(s, url, chat_body("a", n))
    assert r.done
    return max(r.itls_s())


SCRIPTED = ("--scripted-ttft-ms", "5", "--scripted-itl-ms", "5", "--max-model-len", "2048")


def _stall_and_steady(sim, flags: tuple[str, ...], every_s: str, tokens: int) -> None:
    """A stalled and a steady simulator stream `tokens` tokens each. The stalled stream lasts longer
    than a stall period plus a stall, so a stall falls between two of its tokens whenever its clock
    started (a lower bound: cannot flake); the steady stream's largest gap is below the stall only
    while the simulator keeps its schedule, so a miss is retried once when it fell behind, then
    fails with the lag figure."""
    stalled_srv = sim(*flags, "--fault-stall-every-s", every_s, "--fault-stall-ms", "500")
    assert run(_max_gap(stalled_srv.url, tokens)) >= 0.45
    steady_srv: list = []

    def attempt() -> None:
        steady_srv[:] = [sim(*flags)]
        steady = run(_max_gap(steady_srv[0].url, tokens))
        assert steady < 0.35, steady

    retry_while_lagging(attempt, lambda: raw_sim_lag(steady_srv[0].metrics()))


def test_stall_pauses_every_stream(sim):
    _stall_and_steady(sim, SCRIPTED, "0.2", 300)  # 300 x 5 ms = 1.5 s > 0.2 + 0.5 s


def test_stall_in_batching_mode(sim):
    _stall_and_steady(sim, ("--sim-speed", "4", "--max-model-len", "2048"), "0.1", 400)  # ~2.2 ms a step: ~0.9 s


def test_crash_after_requests(sim):
    srv = sim(*BASE, "--fault-crash-after-requests", "2")
    assert run(_statuses(srv.url, 1)) == [200]
    assert run(_statuses(srv.url, 1)) == [200]
    assert srv.proc.wait(10) == 1
    assert "EngineDeadError" in srv.stderr()


def test_crash_after_seconds(sim):
    srv = sim(*BASE, "--fault-crash-after-s", "0.3")
    assert srv.proc.wait(60) == 1  # unasked: no request was sent
    assert "EngineDeadError" in srv.stderr()


@pytest.mark.parametrize("mode", ["junk", "html", "absent"])
def test_broken_metrics(sim, mode):
    status, headers, body = sim(*BASE, "--fault-metrics", mode).get("/metrics")
    if mode == "absent":
        assert status == 404
    elif mode == "html":
        assert status == 200 and headers["Content-Type"].startswith("text/html")
    else:
        assert status == 200
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(body.decode()))


def test_slow_metrics(sim):
    srv = sim(*BASE, "--fault-metrics", "slow", "--fault-metrics-delay-s", "0.5")
    t0 = time.monotonic()
    status, _, body = srv.get("/metrics")
    assert status == 200 and b"vllm:num_requests_running" in body
    assert time.monotonic() - t0 >= 0.45  # a lower bound the 0.5 s delay guarantees (less a clock tick)
