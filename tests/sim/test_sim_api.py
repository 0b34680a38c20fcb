"""HTTP API of the simulated engine: endpoints, streaming format, errors, /metrics."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_client import chat_body, post_json, run, stream, words
from waiting import wait_until

MAX_LEN = 2048


@pytest.fixture(scope="module")
def srv(sim):
    return sim("--sim-speed", "20", "--max-model-len", str(MAX_LEN), "--num-gpu-blocks-override", "2000")


def test_models_lists_served_name_and_max_model_len(srv):
    status, _, body = srv.get("/v1/models")
    data = json.loads(body)["data"]
    assert status == 200
    assert [m["id"] for m in data] == ["sim-llama-8b"]
    assert data[0]["max_model_len"] == MAX_LEN


def test_health_and_version(srv):
    assert srv.get("/health")[0] == 200
    status, _, body = srv.get("/version")
    assert status == 200 and "version" in json.loads(body)


def test_chat_stream_role_chunk_tokens_usage_done(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            return await stream(
                s,
                srv.url,
                chat_body("one two three", 7, stream_options={"include_usage": True}),
                headers={"X-Request-Id": "req-42"},
            )

    r = run(go())
    assert r.status == 200
    assert r.headers["X-Request-Id"] == "req-42"
    assert r.headers["Content-Type"].startswith("text/event-stream")
    chunks = r.chunks
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = chunks[1:-1]
    assert len(content) == 7
    assert all(len(c["choices"][0]["delta"]["content"].split()) == 1 for c in content)
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 6 + ["length"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}
    assert r.done and r.events[-1][1] == "[DONE]"
    assert all(c["id"].endswith("req-42") and c["object"] == "chat.completion.chunk" for c in chunks)


def test_completion_stream_has_no_role_chunk(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            return await stream(s, srv.url, {"prompt": "a b c d", "max_tokens": 5, "ignore_eos": True}, chat=False)

    r = run(go())
    chunks = r.chunks
    assert len(chunks) == 5 and r.done
    assert all(c["object"] == "text_completion" and len(c["choices"][0]["text"].split()) == 1 for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in c for c in chunks)  # no include_usage, no usage chunk


def test_continuous_usage_stats_on_every_chunk(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            opts = {"include_usage": True, "continuous_usage_stats": True}
            return await stream(s, srv.url, chat_body("x y", 4, stream_options=opts))

    chunks = run(go()).chunks
    assert all("usage" in c for c in chunks)
    completion = [c["usage"]["completion_tokens"] for c in chunks]
    assert completion == [0, 1, 2, 3, 4, 4]  # role, 4 tokens, final usage chunk
    assert all(c["usage"]["prompt_tokens"] == 2 for c in chunks)


def test_non_streaming_chat_counts_words_over_messages(srv):
    body = {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}],
        "max_completion_tokens": 6,
        "ignore_eos": True,
    }

    async def go():
        async with aiohttp.ClientSession() as s:
            return await post_json(s, srv.url, "/v1/chat/completions", body)

    status, _, out = run(go())
    assert status == 200
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
    assert len(out["choices"][0]["message"]["content"].split()) == 6
    assert out["choices"][0]["finish_reason"] == "length"


def test_non_streaming_completion_default_max_tokens_16(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            return await post_json(s, srv.url, "/v1/completions", {"prompt": "hello", "ignore_eos": True})

    status, _, out = run(go())
    assert status == 200 and out["usage"]["completion_tokens"] == 16
    assert len(out["choices"][0]["text"].split()) == 16


def test_request_longer_than_max_model_len_is_400(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            return await post_json(s, srv.url, "/v1/completions", {"prompt": words(2000), "max_tokens": 100})

    status, _, out = run(go())
    assert status == 400
    assert out["error"]["code"] == 400 and "maximum context length" in out["error"]["message"]


def test_unknown_model_is_404(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            return await post_json(s, srv.url, "/v1/chat/completions", {**chat_body("hi", 2), "model": "nope"})

    status, _, out = run(go())
    assert status == 404 and out["error"]["type"] == "NotFoundError"


def test_client_disconnect_aborts_and_frees_kv(srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            r = await stream(s, srv.url, chat_body(words(200), 1500), stop_after=4)
        assert len(r.events) == 4

    run(go())
    key = 'vllm:request_success_total{engine="0",finished_reason="abort",model_name="sim-llama-8b"}'
    m = wait_until(lambda: (lambda m: m if m[key] >= 1 else None)(srv.metrics()), "the abort counted")
    assert m["vllm:num_requests_running"] == 0
    assert m["vllm:kv_cache_usage_perc"] == 0.0


def test_metrics_vllm_names_types_and_labels(srv):
    _, headers, body = srv.get("/metrics")
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
    expect = {
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:cache_config_info": "gauge",
        "vllm:num_preemptions": "counter",
        "vllm:prefix_cache_queries": "counter",
        "vllm:prefix_cache_hits": "counter",
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:request_success": "counter",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:request_queue_time_seconds": "histogram",
    }
    for name, kind in expect.items():
        assert fams[name].type == kind, name
    running = fams["vllm:num_requests_running"].samples[0]
    assert running.labels == {"model_name": "sim-llama-8b", "engine": "0"}
    ttft_les = [s.labels["le"] for s in fams["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
    assert ttft_les[:3] == ["0.001", "0.005", "0.01"] and ttft_les[-1] == "+Inf"
    reasons = {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples if s.name.endswith("_total")}
    assert {"stop", "length", "abort"} <= reasons
    assert not any(n.startswith("vllm:spec_decode") for n in fams)  # only with --speculative-config
    info = fams["vllm:cache_config_info"].samples[0].labels
    assert info["num_gpu_blocks"] == "2000" and info["block_size"] == "16" and info["kv_cache_size_tokens"] == "32000"


def test_metrics_openmetrics_negotiation(srv):
    _, headers, body = srv.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")


def test_reset_prefix_cache(srv):
    async def go():
        async with aiohttp.ClientSession() as s, s.post(srv.url + "/reset_prefix_cache") as r:
            return r.status

    assert run(go()) == 200


@pytest.fixture(scope="module")
def eos_srv(sim):
    return sim("--sim-speed", "50", "--max-model-len", "1024", "--sim-eos-prob", "0.2", "--seed", "3")


def test_ignore_eos_false_stops_early_and_varies(eos_srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            reqs = [
                post_json(s, eos_srv.url, "/v1/completions", {"prompt": "p q", "max_tokens": 60}) for _ in range(12)
            ]
            return await asyncio.gather(*reqs)

    outs = [o for _, _, o in run(go())]
    lengths = [o["usage"]["completion_tokens"] for o in outs]
    assert any(o["choices"][0]["finish_reason"] == "stop" for o in outs)
    assert len(set(lengths)) > 2 and max(lengths) <= 60


def test_min_tokens_is_honoured(eos_srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            reqs = [
                post_json(s, eos_srv.url, "/v1/completions", {"prompt": "p q", "max_tokens": 60, "min_tokens": 25})
                for _ in range(12)
            ]
            return await asyncio.gather(*reqs)

    lengths = [o["usage"]["completion_tokens"] for _, _, o in run(go())]
    assert min(lengths) >= 25


def test_ignore_eos_true_gives_exactly_max_tokens(eos_srv):
    async def go():
        async with aiohttp.ClientSession() as s:
            reqs = [
                post_json(s, eos_srv.url, "/v1/completions", {"prompt": "p q", "max_tokens": 40, "ignore_eos": True})
                for _ in range(6)
            ]
            return await asyncio.gather(*reqs)

    assert [o["usage"]["completion_tokens"] for _, _, o in run(go())] == [40] * 6


@pytest.fixture(scope="module")
def timed(sim):
    return sim("--sim-speed", "20", "--enable-per-request-metrics", "--enable-prompt-tokens-details")


def test_per_request_metrics_ride_on_the_final_usage_chunk(timed):
    """vLLM 0.32's `metrics` object, in the same place: the final usage chunk (streaming) or the
    body (not streaming); its queue + prefill fit inside the client's own time to the first token."""
    prompt = words(200)

    async def go():
        async with aiohttp.ClientSession() as s:
            first = await stream(s, timed.url, chat_body(prompt, 6, stream_options={"include_usage": True}))
            again = await stream(s, timed.url, chat_body(prompt, 6, stream_options={"include_usage": True}))
            plain = await stream(s, timed.url, chat_body(prompt, 6))
            _, _, body = await post_json(s, timed.url, "/v1/chat/completions", chat_body(prompt, 3, stream=False))
            return first, again, plain, body

    first, again, plain, body = run(go())
    m = first.chunks[-1]["metrics"]
    assert set(m) == {
        "time_to_first_token_ms",
        "generation_time_ms",
        "queue_time_ms",
        "mean_itl_ms",
        "tokens_per_second",
    }
    assert m["queue_time_ms"] >= 0 and m["time_to_first_token_ms"] > 0
    client_ttft_ms = (first.events[1][0] - first.sent_ns) / 1e6  # events[0] is the role-only chunk
    assert m["queue_time_ms"] + m["time_to_first_token_ms"] < client_ttft_ms
    assert m["mean_itl_ms"] == pytest.approx(m["generation_time_ms"] / 5)
    assert first.chunks[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert again.chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 192  # 12 whole blocks of 16
    assert not any("metrics" in c for c in plain.chunks)  # no usage chunk asked for: nowhere to put them (as vLLM)
    assert set(body["metrics"]) == set(m)


def test_per_request_metrics_need_log_stats(sim):
    srv = sim("--enable-per-request-metrics", "--disable-log-stats", wait=False)
    assert srv.proc.wait(20) != 0
    assert "--enable-per-request-metrics requires engine statistics logging" in srv.stderr() + srv.stdout()
