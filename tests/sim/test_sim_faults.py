"""Fault injection: error responses, stalls, mid-stream disconnects, crashes, broken /metrics."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_client import chat_body, post_json, run, stream

BASE = ("--sim-speed", "20", "--max-model-len", "2048")


async def _statuses(url: str, n: int) -> list[int]:
    async with aiohttp.ClientSession() as s:
        outs = await asyncio.gather(*[post_json(s, url, "/v1/completions", {"prompt": "a", "max_tokens": 2})
                                      for _ in range(n)])
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


def test_stall_pauses_every_stream(sim):
    stalled = run(_max_gap(sim(*SCRIPTED, "--fault-stall-every-s", "0.2", "--fault-stall-ms", "500").url))
    steady = run(_max_gap(sim(*SCRIPTED).url))
    assert stalled >= 0.45 and steady < 0.35, (stalled, steady)  # wide: the machine is shared


def test_stall_in_batching_mode(sim):
    # 150 tokens at ~2.2 ms per step last ~0.35 s: at least one stall falls inside the stream
    flags = ("--sim-speed", "4", "--max-model-len", "2048")
    stalled = run(_max_gap(sim(*flags, "--fault-stall-every-s", "0.1", "--fault-stall-ms", "500").url, 150))
    steady = run(_max_gap(sim(*flags).url, 150))
    assert stalled >= 0.45 and steady < 0.35, (stalled, steady)


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
