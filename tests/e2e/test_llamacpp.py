"""The llamacpp engine kind and telemetry profile against a real llama-server (slow).

llama-server is built from the llama-cpp-python sdist's llama.cpp (tools/setup_llamacpp.sh) and
serves the tiny random-weight Llama written as GGUF (tools/build_tiny_gguf.py). What the kind and
profile were written against (fake servers) is checked here: readiness, the /metrics page's names
and types, the startup facts, the stream's shape, token counts, then `harness run` with
telemetry, a sweep over --parallel and --ctx-size (restarts), and `harness tune` (which starts the
real build with the flags of the kind's map: --kv-unified-per-slot, --parallel, --batch-size).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from waiting import wait_until

from harness.engines import get_kind, profiles
from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.launcher import free_port
from harness.sweep.plan import build_plan
from harness.telemetry.exposition import parse
from harness.workload.tokenizers import load_tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def _get(url: str, timeout: float = 5.0) -> tuple[int | None, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def _post(url: str, body: dict, timeout: float = 60.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Server:
    """One llama-server process; its /health answers from the first moment it listens."""

    def __init__(self, llama, tmp: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"llama-server-{self.port}.log"
        argv = [a.replace("{host}", "127.0.0.1").replace("{port}", str(self.port)) for a in llama.command(*extra)]
        self.fh = self.log.open("w")
        self.proc = subprocess.Popen(argv, stdout=self.fh, stderr=subprocess.STDOUT, start_new_session=True)
        self.health: list[tuple[int | None, str]] = []

    def wait_ready(self, timeout: float = 120.0) -> None:
        def ready() -> bool:  # records each change of /health's answer on the way (the tests read them)
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            status, body = _get(self.url + "/health", timeout=2)
            if status is not None and (not self.health or self.health[-1] != (status, body)):
                self.health.append((status, body))
            return status == 200

        wait_until(
            ready,
            "llama-server's /health",
            timeout_s=timeout,
            interval_s=0.002,
            details=lambda: self.log.read_text()[-3000:],
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.fh.close()


@pytest.fixture(scope="module")
def server(real_llamacpp, tmp_path_factory):
    s = Server(real_llamacpp, tmp_path_factory.mktemp("llamacpp"), "--parallel", "2", "--ctx-size", "4096")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def _sse(body: bytes) -> list[str]:
    return [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]


def test_readiness_and_startup_facts(server):
    # every answer before ready is llama.cpp's 503 "Loading model" (the probe says not ready)
    kind = get_kind("llamacpp")
    print("\n/health answers while starting:", server.health)
    assert server.health[-1][0] == 200 and json.loads(server.health[-1][1]) == {"status": "ok"}
    for status, body in server.health[:-1]:
        assert status == 503 and json.loads(body)["error"]["message"] == "Loading model", body
    assert kind.probe(server.url, None).ready
    facts = kind.startup_facts(server.log.read_text())
    print("facts:", facts)
    assert facts["n_slots"] == 2 and facts["n_ctx"] == 4096 and facts["kv_cache_tokens"] == 4096
    assert facts["kv_unified"] is False and facts["n_ctx_slot"] == 2048
    props = json.loads(_get(server.url + "/props")[1])
    assert props["total_slots"] == 2


def test_tokenize_matches_the_harness_tokenizer(server, real_llamacpp):
    tok = load_tokenizer(str(real_llamacpp.model))
    texts = [
        "def foo(x):\n    return x + 1\n",
        "  Héllo, wörld! 12345 ünïcödé 😀 tabs\tand\n\nnewlines  ",
        "import os, sys\nclass A(object):\n    pass\n" * 20,
    ]
    for text in texts:
        status, body = _post(server.url + "/tokenize", {"content": text, "add_special": False})
        assert status == 200, body
        ids = json.loads(body)["tokens"]
        assert len(ids) == tok.count(text), text
        assert ids == tok._tok.encode(text, add_special_tokens=False).ids


def test_stream_shape(server):
    body = {
        "model": "tiny-llama",
        "prompt": "def foo(x):",
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, raw = _post(server.url + "/v1/completions", body)
    assert status == 200, raw
    events = _sse(raw)
    print("\ncompletions stream:", *events[-3:], sep="\n  ")
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text_chunks = [c for c in chunks if c.get("choices") and c["choices"][0].get("text")]
    assert len(text_chunks) == 8
    usage = [c for c in chunks if c.get("usage")]
    assert len(usage) == 1 and usage[0]["usage"]["completion_tokens"] == 8
    assert usage[0]["usage"]["prompt_tokens"] == 5  # "def foo(x):" = 5 tokens, no BOS added
    assert "timings" in usage[0] and {"prompt_n", "predicted_n", "predicted_ms"} <= set(usage[0]["timings"])
    finish = [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices")]
    assert finish[-1] == "length"
    # chat: role chunk, content chunks, then usage, then [DONE]
    body = {
        "model": "tiny-llama",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, raw = _post(server.url + "/v1/chat/completions", body)
    events = _sse(raw)
    print("chat stream:", *events[:2], *events[-3:], sep="\n  ")
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert sum(1 for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")) == 4
    assert [c for c in chunks if c.get("usage")][-1]["usage"]["completion_tokens"] == 4


def test_metrics_names_and_types_match_the_profile(server):
    # two requests so the counters move (llama.cpp counts tokens when a request finishes)
    for _ in range(2):
        _post(server.url + "/v1/completions", {"model": "tiny-llama", "prompt": "x = 1\n" * 20, "max_tokens": 4})
    status, text = _get(server.url + "/metrics")
    assert status == 200
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split()
            types[name.replace(":", "_")] = typ
    print("\n/metrics families:", json.dumps(types))
    prof = profiles().get("llamacpp")
    optional = {"llamacpp_kv_cache_usage_ratio", "llamacpp_spec_decode_num_accepted_tokens_per_pos_total"}
    for name in prof.counter_like_names():
        if name not in optional:
            assert types.get(name) == "counter", name
    for name in prof.gauge_names():
        if name not in optional:
            assert types.get(name) == "gauge", name
    assert optional.isdisjoint(types)  # this build exports no KV usage (the profile reports null)
    snap = parse(text, time.time())
    assert prof.counter_total(snap, "prompt_tokens") >= 2 * 60
    assert prof.counter_total(snap, "generation_tokens") >= 8
    assert prof.gauge(snap, "running") == 0 and prof.gauge(snap, "waiting") == 0
    assert prof.gauge(snap, "kv_usage") is None


def _scenario(
    tmp: Path,
    model: str,
    name: str,
    concurrency: int,
    requests: int,
    input_tokens: int = 200,
    output_tokens: int = 32,
    api: str = "openai-completions",
) -> Path:
    doc = {
        "name": name,
        "target": {"api": api},
        "load": {"concurrency": concurrency, "requests": requests},
        "workload": {
            "tokenizer": model,
            "classes": [{"name": "q", "input_tokens": input_tokens, "output_tokens": output_tokens}],
        },
        "slo": {"ttft_ms": 10000},
        "telemetry": {"interval_s": 0.25},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_harness_run_with_telemetry(server, real_llamacpp, tmp_path):
    scen = _scenario(tmp_path, str(real_llamacpp.model), "llama-run", concurrency=4, requests=16)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scen),
            "--target",
            server.url,
            "--engine-kind",
            "llamacpp",
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    eng = summary["engine"]
    print(
        "\nengine block:",
        json.dumps(
            {
                k: eng.get(k)
                for k in (
                    "profile",
                    "telemetry",
                    "running",
                    "waiting",
                    "prompt_tokens",
                    "generation_tokens",
                    "kv_usage",
                    "prefix_cache",
                )
            },
            default=str,
        )[:2000],
    )
    assert summary["requests"]["completed"] == 16
    assert eng["profile"] == "llamacpp" and eng["telemetry"]["source"] == "direct" and eng["telemetry"]["scrapes"] >= 3
    assert 1 <= eng["running"]["max"] <= 2  # two slots
    assert eng["waiting"]["max"] >= 1  # four users, two slots: llama.cpp defers the rest
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r["warmup"] and not r["error"]]
    assert measured and all(r["input_tokens"] == r["intended_input_tokens"] for r in measured)
    assert all(r["output_tokens"] == 32 and r["output_source"] == "usage" for r in measured)
    assert summary["tokens"]["output_total"] == 16 * 32
    # the engine's own counters over the window agree with what the client saw
    assert eng["generation_tokens"] == 16 * 32
    assert eng["prompt_tokens"] == summary["tokens"]["input_total"]


def test_sweep_over_slots_and_context_with_restarts(real_llamacpp, tmp_path):
    _scenario(tmp_path, str(real_llamacpp.model), "four-users", concurrency=4, requests=12)
    sweep = {
        "name": "real-llamacpp",
        "engine": {
            "kind": "llamacpp",
            "command": real_llamacpp.command(),
            "served_model_name": real_llamacpp.served_model_name,
            "ready_timeout_s": 120,
            "stop_timeout_s": 15,
        },
        "base": {"ctx-size": 2048},
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "one-slot", "flags": {"parallel": 1, "ctx-size": 1024}},
                {"id": "four-slots", "flags": {"parallel": 4, "ctx-size": 4096}},
            ],
        },
        "scenarios": ["four-users.yaml"],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    t0 = time.monotonic()
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, show_progress=True, write_report=False))
    index = json.loads((out / "index.json").read_text())
    print(
        f"\nllama.cpp sweep: {time.monotonic() - t0:.1f} s;",
        json.dumps(
            {c["id"]: {"startup_s": c.get("startup_s"), "facts": c.get("startup_facts")} for c in index["cells"]}
        ),
    )
    assert outcome.counts["complete"] == 2, json.dumps(index, indent=1)[:4000]
    cells = {c["config_id"]: c for c in index["cells"]}
    assert cells["one-slot"]["startup_facts"]["n_slots"] == 1 and cells["one-slot"]["startup_facts"]["n_ctx"] == 1024
    assert (
        cells["four-slots"]["startup_facts"]["n_slots"] == 4
        and cells["four-slots"]["startup_facts"]["n_ctx_slot"] == 1024
    )

    def engine(cfg: str) -> dict:
        return json.loads((out / cells[cfg]["run_dir"] / "summary.json").read_text())["engine"]

    one, four = engine("one-slot"), engine("four-slots")
    print(
        "one slot:",
        json.dumps({k: one[k] for k in ("running", "waiting", "prompt_tokens", "generation_tokens", "telemetry")}),
    )
    print(
        "four slots:",
        json.dumps({k: four[k] for k in ("running", "waiting", "prompt_tokens", "generation_tokens", "telemetry")}),
    )
    for e in (one, four):
        assert e["profile"] == "llamacpp" and e["telemetry"]["scrapes"] >= 2
        assert e["generation_tokens"] == 12 * 32 and e["prompt_tokens"] >= 12 * 200
    assert one["running"]["max"] == 1 and one["waiting"]["max"] >= 2  # one slot, four users
    assert four["running"]["max"] > 1 and four["waiting"]["max"] == 0


def test_tune_moves_llama_servers_own_flags(real_llamacpp, tmp_path):
    _scenario(
        tmp_path, str(real_llamacpp.model), "tune-load", concurrency=4, requests=1, input_tokens=120, output_tokens=24
    )
    scen = yaml.safe_load((tmp_path / "tune-load.yaml").read_text())
    scen["load"] = {"concurrency": 4, "duration_s": 6}
    (tmp_path / "tune-load.yaml").write_text(yaml.safe_dump(scen))
    tune = {
        "name": "llamacpp-short",
        "engine": {
            "kind": "llamacpp",
            "command": real_llamacpp.command(),
            "served_model_name": real_llamacpp.served_model_name,
            "ready_timeout_s": 120,
            "stop_timeout_s": 15,
        },
        "base": {"parallel": 1, "ctx-size": 4096},
        "workload": ["tune-load.yaml"],
        "load": {"concurrency": 4},
        "candidates": {"parallel": [4], "batch-size": [512]},
        "measure": {"duration_s": 6, "warmup_s": 1},
    }
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(tune, sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        # a tune saves its final run as a baseline: in the test's directory, not the repo's store
        env={**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BASELINES": str(tmp_path / "baselines")},
    )
    print(proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "tune.json").read_text())
    by = {s["step"]: s for s in doc["steps"]}
    print(json.dumps({k: (v["verdict"], v["reason"][:160]) for k, v in by.items()}, indent=1))
    # the per-slot limit is --kv-unified-per-slot (the pool all slots share is --ctx-size)
    assert by["context-length"]["verdict"] == "changed", by["context-length"]
    assert by["context-length"]["tried"][0]["flags"]["kv-unified-per-slot"] > 0
    assert by["context-length"]["reason"].startswith("max-model-len 146 tokens (--kv-unified-per-slot; "), by[
        "context-length"
    ]
    assert by["parallelism"]["verdict"] == "skipped"
    assert by["parallelism"]["reason"].startswith("engine kind llamacpp has no equivalent of --tensor-parallel-size")
    assert by["cuda-graphs"]["verdict"] == "kept" and "GGML_CUDA_DISABLE_GRAPHS not set" in by["cuda-graphs"]["reason"]
    assert by["cache-check"]["verdict"] == "kept" and by["cache-check"]["reason"].startswith("prefix caching on")
    for name in ("kv-dtype", "speculative"):  # memory is not the limit / no speculative candidates here
        assert by[name]["verdict"] == "skipped" and "no equivalent" not in by[name]["reason"], by[name]
    assert by["gpu-memory"]["verdict"] == "kept"  # it starts; nothing to lower
    assert "has no memory fraction" in by["gpu-memory"]["reason"] and "0.92" not in by["gpu-memory"]["reason"]
    assert by["baseline"]["tried"][0]["goodput_req_per_s"] > 0
    seqs = by["max-num-seqs"]
    assert seqs["verdict"] in ("changed", "kept") and seqs["tried"], seqs
    assert any(t["flags"].get("parallel") == 4 for t in seqs["tried"])
    # four users on one slot wait for it: four slots are judged on TTFT (the raise objective) with
    # goodput as the guard (the scenario has SLOs), and the reason says which rule decided
    assert "TTFT p99" in seqs["reason"] and "goodput" in seqs["reason"], seqs["reason"]
    assert seqs["verdict"] == "changed", seqs["reason"]
    assert "the measured gain leaving the current flags needs" in seqs["reason"]
    budget = by["max-num-batched-tokens"]  # llama-server's --batch-size
    assert budget["verdict"] in ("changed", "kept") and any(
        t["flags"].get("batch-size") == 512 for t in budget["tried"]
    )
    assert "ITL p99" in budget["reason"] and "TTFT p50" in budget["reason"], budget["reason"]
    cmd = doc["final"]["command"]
    assert "--parallel" in cmd and not any(a.startswith("--max-") for a in cmd) and "--ctx-size" in cmd
    assert "--kv-unified-per-slot" in cmd
    rec = yaml.safe_load((out / "recommended.yaml").read_text())
    assert set(rec["base"]) <= {"parallel", "ctx-size", "batch-size", "kv-unified-per-slot"}
    assert {"parallel", "ctx-size", "kv-unified-per-slot"} <= set(rec["base"])
    assert doc["cost"]["engine_starts"] >= 2
