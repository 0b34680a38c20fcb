"""Resolve the target: start the embedded simulated engine, or check a given URL before load.

Preflight fails fast with one line naming the fix (unreachable target, unknown model, wrong
API path) instead of a run full of errors, and probes whether the server accepts
`continuous_usage_stats` (exact tokens per chunk) when the scenario says `auto`.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path
from typing import Any

from harness.engines import Tokenize, tokenize_for
from harness.errors import TargetError
from harness.scenario.models import Scenario
from harness.signals import die_with_parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: an answer to GET /v1/models (or /health) larger or slower than this is not a server's list of
#: models: an endless body held `harness run` in preflight until killed, a 200 MB one took 666 MB
#: (audit R8); the POST probe and /tokenize have their own bounds
MAX_ANSWER_BYTES = 8 << 20
ANSWER_DEADLINE_S = 20.0


def _http(
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """(status, body) of one request; the body is read up to MAX_ANSWER_BYTES and within
    ANSWER_DEADLINE_S (gzip decoded within the same bound), else a TargetError naming the URL."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, _bounded_body(resp, method, url)
    except urllib.error.HTTPError as exc:
        return exc.code, _bounded_body(exc, method, url)


def _bounded_body(resp: Any, method: str, url: str) -> bytes:
    deadline = time.monotonic() + ANSWER_DEADLINE_S
    chunks: list[bytes] = []
    size = 0
    read = getattr(resp, "read1", resp.read)  # read1: what has arrived, so a slow drip meets the deadline too
    while True:
        chunk = read(1 << 16)
        if not chunk:
            break
        size += len(chunk)
        chunks.append(chunk)
        if size > MAX_ANSWER_BYTES:
            raise TargetError(
                f"{method} {url}: the answer is larger than {MAX_ANSWER_BYTES >> 20} MiB; is this an "
                "OpenAI-compatible server?"
            )
        if time.monotonic() > deadline:
            raise TargetError(
                f"{method} {url}: the answer took longer than {ANSWER_DEADLINE_S:.0f} s to arrive; is "
                "this an OpenAI-compatible server?"
            )
    raw = b"".join(chunks)
    if (resp.headers.get("Content-Encoding") or "").lower() in ("gzip", "x-gzip", "deflate"):
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib: a server that compresses unasked
        try:
            raw = inflate.decompress(raw, MAX_ANSWER_BYTES + 1)
        except zlib.error:
            raise TargetError(f"{method} {url}: a compressed answer that does not decompress") from None
        if len(raw) > MAX_ANSWER_BYTES or inflate.unconsumed_tail:
            raise TargetError(f"{method} {url}: the answer decompresses to more than {MAX_ANSWER_BYTES >> 20} MiB")
    return raw


def refuses_connections(url: str, timeout_s: float = 2.0) -> str | None:
    """Why a TCP connection to `url`'s host and port fails now (None: it connects)."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def reporting_args(args: list[str]) -> list[str]:
    """The built-in simulator reports what vLLM can be asked to: each request's cached prompt
    tokens (`--enable-prompt-tokens-details`) and its own timing of the request
    (`--enable-per-request-metrics`, which vLLM refuses beside `--disable-log-stats`), so every
    run on it carries the cache outcome and the TTFT split per request."""
    out = list(args)
    if "--enable-prompt-tokens-details" not in out:
        out.append("--enable-prompt-tokens-details")
    if "--enable-per-request-metrics" not in out and "--disable-log-stats" not in out:
        out.append("--enable-per-request-metrics")
    return out


class EmbeddedSim:
    """The built-in simulated engine as a child process on a free loopback port (reporting cached
    tokens and per-request timings: `reporting_args`)."""

    label = "the simulated engine"  # harness.run.follow.WatchedEngine

    def __init__(self, args: list[str], log_path: Path, ready_timeout_s: float = 60.0) -> None:
        self.args = reporting_args(args)
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> EmbeddedSim:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.sim", "--host", "127.0.0.1", "--port", str(self.port), *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a killed harness takes its simulator with it
        )
        try:
            ready = self._wait_ready()
        except BaseException:  # Ctrl-C / SIGTERM while it starts: the caller holds no handle yet
            self.stop()
            raise
        if ready:
            return self
        self.stop()
        raise TargetError(
            f"the simulated engine was not ready within {self.ready_timeout_s:.0f} s; see {self.log_path}"
        )

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
                raise TargetError(f"the simulated engine exited at startup (code {self.proc.returncode})", *tail)
            try:
                if _http("GET", self.url + "/health", timeout=1.0)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def preflight(url: str, model: str | None, scenario: Scenario) -> dict[str, Any]:
    """Check the target answers; resolve the model; probe continuous usage. Returns facts."""
    base = url.rstrip("/")
    try:
        status, body = _http("GET", base + "/v1/models", headers=_auth_headers(scenario))
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TargetError(f"target {base}: cannot connect ({reason}); start the engine or fix --target") from None
    if status in (401, 403):
        raise TargetError(_refused(base, status, scenario))
    if status != 200 and base.endswith("/v1"):
        root = base.removesuffix("/v1")
        raise TargetError(
            f"target {base}: {status} on {base}/v1/models; give the server root, --target {root} "
            "(the harness adds /v1/...)"
        )
    models: list[str] = []
    max_model_len = None
    if status == 200:
        try:
            data = json.loads(body).get("data", [])
            models = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
            if data and isinstance(data[0], dict):
                max_model_len = data[0].get("max_model_len")
        except (ValueError, AttributeError):
            models = []
    if model is None:
        if not models:
            raise TargetError(f"target {base}: /v1/models lists no model; give one with --model or target.model")
        model = models[0]
    elif models and model not in models:
        raise TargetError(f"target.model {model!r} is not served by {base}; served: {', '.join(models)} (use --model)")
    if isinstance(max_model_len, int) and max_model_len > 0:
        problems = context_problems(scenario, max_model_len)
        if problems:
            raise TargetError(*problems)
    wanted = _adapter_names(scenario)
    missing = [a for a in wanted if a not in models] if models else []
    if missing:
        raise TargetError(
            f"workload.adapters: {', '.join(missing[:5])} not served by {base} (served: "
            f"{', '.join(models[:8])}); start the engine with --enable-lora --lora-modules NAME=PATH ..."
        )
    continuous = _probe(base, model, scenario)
    return {"model": model, "models": models, "max_model_len": max_model_len, "continuous_usage": continuous}


def context_problems(scenario: Scenario, max_model_len: int) -> list[str]:
    """Classes whose prompt + output can exceed the served context: the audit's long-prompt run
    against a 4096-token vLLM sent 2,659 requests that all failed with 400 'maximum context
    length'. One line per class, naming the field and the fix."""
    from harness.workload.context import plain_class

    out = []
    for i, cls in enumerate(scenario.workload.classes):
        if cls.dataset is not None or getattr(cls, "session", None) is not None:
            continue  # lengths come from the data or grow with the conversation
        length = plain_class(cls)  # the generator's rule: input_tokens includes the shared prefix
        n_in, n_out = length.prompt, length.output
        if n_in is None or n_out is None:
            continue
        if n_in + n_out > max_model_len:
            out.append(
                f"workload.classes[{i}] ({cls.name}): prompts of up to {n_in} tokens + {n_out} output tokens exceed the "
                f"target's max_model_len {max_model_len}, so those requests would all fail; lower input_tokens (max "
                f"{max(max_model_len - n_out, 1)} minus the chat template's few tokens) or output_tokens, or serve a "
                "longer context (vLLM --max-model-len)"
            )
    return out


def sim_lora_args(scenario: Scenario, sim_args: list[str]) -> list[str]:
    """The built-in simulator serves the scenario's adapters (unless --sim-args configure LoRA):
    `--enable-lora --lora-modules NAME=sim/NAME ...`; --max-loras stays the simulator's default."""
    names = _adapter_names(scenario)
    if not names or any(a.startswith("--enable-lora") or a.startswith("--lora-modules") for a in sim_args):
        return list(sim_args)
    return [*sim_args, "--enable-lora", "--lora-modules", *(f"{n}=sim/{n}" for n in names)]


def _adapter_names(scenario: Scenario) -> list[str]:
    from harness.scenario.models import adapter_weights

    names: list[str] = []
    for mix in [scenario.workload.adapters, *(c.adapters for c in scenario.workload.classes)]:
        for name, _w in adapter_weights(mix) if mix is not None else ():
            if name not in names:
                names.append(name)
    return names


def _refused(base: str, status: int, scenario: Scenario) -> str:
    import os

    env = scenario.target.api_key_env
    if env and not os.environ.get(env):
        return f"target {base} refused the request ({status}); target.api_key_env names {env}, which is not set"
    if env:
        return f"target {base} refused the request ({status}) with the key in {env}; check the key"
    return (
        f"target {base} refused the request ({status}); set target.api_key_env to the name "
        "of the variable holding the API key"
    )


def _auth_headers(scenario: Scenario) -> dict[str, str]:
    """The headers every load request carries besides the body's: the scenario's, and the key."""
    import os

    headers = dict(scenario.target.headers)
    if scenario.target.api_key_env:
        key = os.environ.get(scenario.target.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
    return headers


def _probe(base: str, model: str, scenario: Scenario) -> bool:
    """Send one tiny request shaped like the scenario's; returns whether continuous usage works.

    A server that rejects the scenario's sampling fields (e.g. `ignore_eos` on a server that
    only takes OpenAI's fields) fails here with its own message, before any load is sent.
    """
    from harness.client import probe
    from harness.client.adapters.base import Prompt, get_adapter
    from harness.client.http_stream import StreamError
    from harness.client.redact import redact
    from harness.client.request import sampling_fields

    adapter = get_adapter(scenario.target.api)
    headers = _auth_headers(scenario)
    mode = scenario.target.continuous_usage
    attempts = [True, False] if mode == "auto" else [mode == "on"]
    status, text = 0, ""
    for continuous in attempts:
        options: dict[str, Any] = {"include_usage": True}
        if continuous:
            options["continuous_usage_stats"] = True
        body = adapter.build_body(Prompt("", "hello", 2), model, sampling_fields(scenario.sampling), options)
        try:
            res = probe.send_probe(base, adapter.path, headers, json.dumps(body).encode())
        except StreamError as exc:
            raise TargetError(
                f"target {base}{adapter.path}: no usable answer to a test request within "
                f"{probe.PROBE_DEADLINE_S:g} s ({exc.kind}: {exc.detail})"
            ) from None
        except ValueError as exc:  # a header value with a line break
            raise TargetError(f"target.headers: {exc}; remove it") from None
        status, raw = res.status, res.body
        if status == 200:
            problem = probe.stream_problem(res, adapter)
            if problem:
                raise TargetError(f"target {base}{adapter.path} answered a test request with 200 but {problem}")
            return continuous
        text = redact(raw.decode("utf-8", "replace")[:300], tuple(headers.values()))
        if status == 404:
            raise TargetError(
                f"target {base}{adapter.path} answered 404 ({text}); check target.api "
                f"({scenario.target.api}), target.model and the URL"
            )
        if status in (401, 403):
            raise TargetError(_refused(base, status, scenario))
        if status >= 500:
            break
    raise TargetError(
        f"target {base}{adapter.path} rejected a test request shaped like this scenario's ({status}: {text}); "
        "if it names a field, change sampling (e.g. sampling.ignore_eos: false for servers that take only "
        "OpenAI's fields) or sampling.extra_body"
    )


#: built-in words sent to the target's /tokenize to measure its tokens per word
CALIBRATION_WORDS = 512


#: the /tokenize answer: a few KB from vLLM; anything slower or larger is not a tokenizer
TOKENIZE_DEADLINE_S = 10.0
TOKENIZE_MAX_BYTES = 1 << 20


def _read_json_answer(url: str, body: dict[str, Any], headers: dict[str, str]) -> bytes | None:
    """POST and read a JSON answer within a total deadline and size; None for anything else.

    A server that answers every POST with a never-ending stream (the audit's never_ends) held
    `harness run` forever here: a socket timeout never fires while bytes keep coming."""
    import time

    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json", **headers}
    )
    deadline = time.monotonic() + TOKENIZE_DEADLINE_S
    with urllib.request.urlopen(req, timeout=TOKENIZE_DEADLINE_S) as resp:
        if resp.status != 200 or "json" not in (resp.headers.get("content-type") or ""):
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > TOKENIZE_MAX_BYTES or time.monotonic() > deadline:
                return None


def calibrate_tokens(url: str, model: str, scenario: Scenario, tokenize: Tokenize | None = None) -> float | None:
    """The target's tokens per built-in word, from its tokenize endpoint (the engine kind's
    `tokenize`; vLLM's POST /tokenize, which SGLang serves too, when not given), or None.

    Without a local tokenizer, prompts are sized in built-in words, and a model's tokenizer may
    split each word into two or three tokens: prompts of "3000-6000 tokens" were 2-3 times longer
    in the target's tokens (issue 19 item 4). With the scale recorded in workload.token_scale
    the generator draws input_tokens / scale words, so the prompts carry about input_tokens of
    the target's tokens; the usage check then compares against those."""
    from harness.workload.generator import calibration_text

    tokenize = tokenize or tokenize_for(None)
    if tokenize is None:
        return None
    base = url.rstrip("/")
    body = tokenize.body(model, calibration_text(CALIBRATION_WORDS))
    try:
        raw = _read_json_answer(base + tokenize.path, body, _auth_headers(scenario))
        if raw is None:
            return None
        count = tokenize.count(json.loads(raw))
    except Exception:  # best effort: a target without a usable /tokenize is not calibrated
        return None
    if not count:
        return None
    scale = round(count / CALIBRATION_WORDS, 3)
    return scale if 0.05 < scale <= 20 else None
