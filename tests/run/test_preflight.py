"""Preflight of a target before any load: model resolution, auth, continuous-usage probe, failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
from rawhttp import RawServer, chunked, sse_head

from harness.errors import TargetError
from harness.run.target import preflight
from harness.scenario import Scenario


def _scenario(**target) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "p",
            "target": target,
            "load": {"concurrency": 1, "requests": 1},
            "workload": {"classes": [{"name": "a", "input_tokens": 3, "output_tokens": 2}]},
        }
    )


def _json(status: str, data: object) -> list:
    body = json.dumps(data).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return [("request",), ("send", head.encode() + body), ("close",)]


SSE_OK = [
    ("request",),
    (
        "send",
        sse_head("Transfer-Encoding: chunked\r\nConnection: close\r\n")
        + chunked(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'),
    ),
    ("close",),
]
MODELS = _json("200 OK", {"data": [{"id": "m1", "max_model_len": 4096}, {"id": "m2"}]})


def test_fake_server(fake_openai) -> None:
    info = preflight(fake_openai.url + "/", None, _scenario())
    assert info["model"] == "ok" and info["models"] == ["ok", "chatml", "scaled"] and info["continuous_usage"] is True


def test_key_and_headers_reach_every_preflight_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PF_KEY", "sk-pf")
    with RawServer([MODELS, SSE_OK]) as server:
        info = preflight(server.url, None, _scenario(api_key_env="PF_KEY", headers={"X-Route": "blue"}))
        reqs = [r.decode("latin-1") for r in server.requests]
    assert info["model"] == "m1" and info["max_model_len"] == 4096 and info["continuous_usage"] is True
    assert reqs[0].startswith("GET /v1/models ") and reqs[1].startswith("POST /v1/chat/completions ")
    for r in reqs:
        assert "Authorization: Bearer sk-pf" in r and "X-Route: blue" in r


def test_probe_body_is_shaped_like_the_scenario() -> None:
    sc = Scenario.model_validate(
        {
            "name": "p",
            "load": {"concurrency": 1, "requests": 1},
            "sampling": {"temperature": 0.3, "seed": 4, "extra_body": {"min_tokens": 2}},
            "workload": {"classes": [{"name": "a", "input_tokens": 3, "output_tokens": 2}]},
        }
    )
    with RawServer([MODELS, SSE_OK]) as server:
        preflight(server.url, "m2", sc)
        body = json.loads(server.requests[1].partition(b"\r\n\r\n")[2])
    assert body["model"] == "m2" and body["stream"] is True and body["ignore_eos"] is True
    assert (body["temperature"], body["seed"], body["min_tokens"]) == (0.3, 4, 2)
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def test_continuous_usage_refused_falls_back() -> None:
    with RawServer([MODELS, _json("400 Bad Request", {"error": {"message": "unknown field"}}), SSE_OK]) as server:
        info = preflight(server.url, "m1", _scenario())
        second = json.loads(server.requests[2].partition(b"\r\n\r\n")[2])
    assert info["continuous_usage"] is False and second["stream_options"] == {"include_usage": True}


def test_continuous_usage_off_sends_one_probe() -> None:
    with RawServer([MODELS, SSE_OK]) as server:
        info = preflight(server.url, "m1", _scenario(continuous_usage="off"))
        assert server.connections == 2
    assert info["continuous_usage"] is False


@pytest.mark.parametrize(
    "scripts,expected",
    [
        ([_json("401 Unauthorized", {"error": "no key"})], "refused the request (401); set target.api_key_env"),
        ([MODELS, _json("403 Forbidden", {})], "refused the request (403)"),
        ([MODELS, _json("404 Not Found", {"detail": "Not Found"})], "answered 404"),
        ([_json("200 OK", {"data": []})], "/v1/models lists no model; give one with --model or target.model"),
        (
            [
                MODELS,
                _json("400 Bad Request", {"error": {"message": "ignore_eos is not allowed"}}),
                _json("400 Bad Request", {"error": {"message": "ignore_eos is not allowed"}}),
            ],
            "ignore_eos is not allowed",
        ),
    ],
)
def test_failures_are_one_line(scripts: list, expected: str) -> None:
    with RawServer(scripts) as server, pytest.raises(TargetError) as info:
        preflight(server.url, None if len(scripts) == 1 else "m1", _scenario())
    (line,) = info.value.lines
    assert expected in line and "\n" not in line


def test_refusal_names_the_unset_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PF_UNSET", raising=False)
    with RawServer([_json("401 Unauthorized", {})]) as server, pytest.raises(TargetError) as info:
        preflight(server.url, None, _scenario(api_key_env="PF_UNSET"))
    assert info.value.lines == [
        f"target {server.url} refused the request (401); target.api_key_env names PF_UNSET, which is not set"
    ]
    monkeypatch.setenv("PF_UNSET", "wrong")
    with RawServer([MODELS, _json("401 Unauthorized", {})]) as server, pytest.raises(TargetError) as info:
        preflight(server.url, "m1", _scenario(api_key_env="PF_UNSET"))
    assert info.value.lines == [
        f"target {server.url} refused the request (401) with the key in PF_UNSET; check the key"
    ]
    assert "wrong" not in info.value.lines[0]


def test_models_endpoint_missing_still_works_with_a_model() -> None:
    with RawServer([_json("404 Not Found", {"detail": "Not Found"}), SSE_OK, SSE_OK]) as server:
        info = preflight(server.url, "given", _scenario())
    assert info["model"] == "given" and info["models"] == []


# ---- a 200 is not a passed probe unless it is a stream the run can read (audit Low 12)
def _raw200(head: str, body: bytes) -> list:
    return [
        ("request",),
        (
            "send",
            (f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body,
        ),
        ("close",),
    ]


@pytest.mark.parametrize(
    "answer, says",
    [
        (_raw200("Content-Type: text/html\r\n", b"<html><h1>Welcome to nginx!</h1></html>"), "HTML page"),
        (
            _raw200("Content-Type: application/json\r\n", b'{"choices": [{"message": {"content": "hi"}}]}'),
            "ignored stream: true",
        ),
        (_raw200("Content-Type: text/event-stream\r\nContent-Encoding: gzip\r\n", b"\x1f\x8b\x08junk"), "gzip-encoded"),
        (_raw200("Content-Type: text/event-stream\r\n", b'data: {"choices": ["x"]}\n\ndata: [DONE]\n\n'), "malformed"),
        (
            _raw200("Content-Type: text/event-stream\r\n", b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'),
            "incomplete",
        ),
        (_raw200("Content-Type: text/event-stream\r\n", b": only a comment\n\n"), "without any data"),
    ],
    ids=["html", "json", "gzip", "junk_event", "no_end", "no_data"],
)
def test_a_200_that_is_not_a_usable_stream_fails_the_probe(answer: list, says: str) -> None:
    with RawServer([MODELS, answer]) as server, pytest.raises(TargetError) as exc:
        preflight(server.url, "m1", _scenario(continuous_usage="off"))
    assert "answered a test request with 200 but" in str(exc.value) and says in str(exc.value)


def test_never_ending_probe_stream_hits_the_probe_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe has its own total deadline (audit High 2: preflight hung forever on an endless stream)."""
    from harness.client import probe

    monkeypatch.setattr(probe, "PROBE_DEADLINE_S", 1.0)
    endless = (
        [("request",), ("send", sse_head())]
        + [("send", chunked(b'data: {"choices":[{"delta":{"content":"t"}}]}\n\n')[:-5]), ("sleep", 0.02)] * 400
        + [("hold",)]
    )
    with RawServer([MODELS, endless]) as server, pytest.raises(TargetError) as exc:
        preflight(server.url, "m1", _scenario(continuous_usage="off"))
    assert "within 1 s" in str(exc.value) and "timeout" in str(exc.value)


def test_prompts_that_cannot_fit_the_served_context_are_refused_before_any_load() -> None:
    """Issue 19 item 4: the shipped long_prompt_short_output.yaml against a 4096-token vLLM sent
    2,659 requests that all failed with 400 'maximum context length'."""
    sc = Scenario.model_validate(
        {
            "name": "p",
            "load": {"concurrency": 1, "requests": 1},
            "workload": {
                "classes": [
                    {"name": "fits", "input_tokens": 1000, "output_tokens": 64},
                    {
                        "name": "long",
                        "input_tokens": {"dist": "uniform", "min": 3000, "max": 6000},
                        "output_tokens": {"dist": "uniform", "min": 16, "max": 64},
                    },
                ]
            },
        }
    )
    with RawServer([MODELS]) as server, pytest.raises(TargetError) as err:
        preflight(server.url, None, sc)
    lines = err.value.args
    assert len(lines) == 1 and lines[0].startswith(
        "workload.classes[1] (long): prompts of up to 6000 tokens + 64 output"
    )
    assert "max_model_len 4096" in lines[0] and "max 4032" in lines[0]


def test_the_shipped_long_prompt_scenario_against_a_short_context_sim_exits_2(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            "scenarios/long_prompt_short_output.yaml",
            "--sim-args",
            "--max-model-len 4096",
            "--duration",
            "2",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "workload.classes[0] (summarize)" in err[0] and "max_model_len 4096" in err[0], proc.stderr
    assert not (tmp_path / "r" / "requests.jsonl").exists() or not (tmp_path / "r" / "requests.jsonl").read_text()


def test_the_targets_tokens_per_builtin_word_come_from_its_tokenize() -> None:
    """Issue 19 item 4: without a tokenizer, prompts were sized in built-in words, which a model's
    tokenizer splits into several tokens each. The scale comes from the target's POST /tokenize."""
    from harness.run.target import CALIBRATION_WORDS, calibrate_tokens

    answer = _json("200 OK", {"count": 2 * CALIBRATION_WORDS + 7, "max_model_len": 4096})
    with RawServer([answer]) as server:
        scale = calibrate_tokens(server.url, "m1", _scenario())
        req = server.requests[0].decode("latin-1")
    assert req.startswith("POST /tokenize ") and '"model": "m1"' in req
    assert scale == round((2 * CALIBRATION_WORDS + 7) / CALIBRATION_WORDS, 3)
    with RawServer([_json("404 Not Found", {"detail": "Not Found"})]) as server:
        assert calibrate_tokens(server.url, "m1", _scenario()) is None  # no /tokenize: sized as before


def test_a_calibrated_scale_draws_fewer_words_for_the_same_target_tokens() -> None:
    from harness.workload.builtin_tokenizer import BuiltinTokenizer
    from harness.workload.generator import WorkloadGenerator

    base = {
        "name": "p",
        "load": {"concurrency": 1, "requests": 1},
        "workload": {"classes": [{"name": "a", "input_tokens": 3000, "output_tokens": 8}]},
    }
    plain = WorkloadGenerator(Scenario.model_validate(base)).request(0)
    scaled_sc = Scenario.model_validate({**base, "workload": {**base["workload"], "token_scale": 2.5}})
    scaled = WorkloadGenerator(scaled_sc).request(0)
    count = BuiltinTokenizer().count
    assert count(plain.text) == 3000 and count(scaled.text) == 1200
    assert plain.input_tokens == scaled.input_tokens == 3000  # the intended length, in the target's tokens


@pytest.mark.parametrize("ctype", [b"text/event-stream", b"application/json"])
def test_a_never_ending_tokenize_answer_is_no_calibration_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, ctype: bytes
) -> None:
    """The audit's never_ends server answers every POST with an endless stream: reading the
    /tokenize answer to its end held `harness run` forever before the window."""
    import socket
    import threading

    import harness.run.target as tg

    monkeypatch.setattr(tg, "TOKENIZE_DEADLINE_S", 1.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: " + ctype + b"\r\n\r\n")
        try:
            while not stop.is_set():
                conn.sendall(b'data: {"x": 1}\n\n')
                stop.wait(0.01)
        except OSError:
            pass
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        assert tg.calibrate_tokens(f"http://127.0.0.1:{listener.getsockname()[1]}", "m", _scenario()) is None
    finally:
        stop.set()
        listener.close()


@pytest.mark.parametrize("kind", ["endless", "huge", "gzip"])
def test_a_models_answer_without_end_or_too_large_is_one_line(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Audit R8: GET /v1/models had no size or time bound: an endless body held `harness run` in
    preflight until killed (RSS rising), a 200 MB one was read whole (666 MB); a gzip answer read
    as "lists no model"."""
    import gzip

    import harness.run.target as tg

    monkeypatch.setattr(tg, "MAX_ANSWER_BYTES", 1 << 20)
    monkeypatch.setattr(tg, "ANSWER_DEADLINE_S", 2.0)
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if kind == "endless":  # a trickle that never ends, under the size bound: the deadline ends it
        script = [("request",), ("send", (head + "Transfer-Encoding: chunked\r\n\r\n").encode())]
        script += [("send", chunked(b'{"data": [' + b" " * 100)[:-5]), ("sleep", 0.05)] * 200 + [("hold",)]
        says = "the answer took longer than 2 s"
    elif kind == "huge":
        body = b'{"data": [' + b" " * (2 << 20) + b"]}"
        script = [("request",), ("send", (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body), ("close",)]
        says = "the answer is larger than 1 MiB"
    else:  # a server that compresses unasked: decoded, within the bound
        body = gzip.compress(json.dumps({"data": [{"id": "m1"}]}).encode())
        script = [
            ("request",),
            ("send", (head + f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body),
            ("close",),
        ]
        with RawServer([script, SSE_OK]) as server:
            assert preflight(server.url, None, _scenario(continuous_usage="off"))["model"] == "m1"
        return
    with RawServer([script]) as server, pytest.raises(TargetError) as exc:
        preflight(server.url, None, _scenario())
    assert len(exc.value.lines) == 1 and "GET " in exc.value.lines[0] and says in exc.value.lines[0], exc.value.lines
