"""The transformers engine kind on the CPU (slow): `transformers serve` with continuous batching
serving the tiny Llama, from the vLLM venv (tools/setup_transformers_serve.sh adds accelerate).

Until this ran on every CI run, the kind had only been exercised on the GPU node. Checked: a
`harness run` (stream shape without [DONE], usage counts, telemetry recorded as absent with its
reason), a sweep over two KV-cache sizes (a restart) with the startup facts.
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

from harness.engines import get_kind
from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.launcher import free_port
from harness.sweep.plan import build_plan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def _scenario(tmp: Path, model: str, name: str) -> Path:
    doc = {
        "name": name,
        "target": {"api": "openai-chat"},
        "load": {"concurrency": 2, "requests": 6},
        "sampling": {"ignore_eos": False},  # transformers serve refuses fields outside OpenAI's (422)
        "workload": {"tokenizer": model, "classes": [{"name": "q", "input_tokens": 64, "output_tokens": 12}]},
        "slo": {"ttft_ms": 30000},
        "telemetry": {"interval_s": 0.5},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _assert_run(run_dir: Path, requests: int) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["completed"] == requests and summary["requests"]["failed"] == 0, summary["requests"]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    # the tiny model never predicts EOS, so every answer is max_tokens long; usage is exact
    assert all(r["output_tokens"] == 12 and r["output_source"] == "usage" for r in measured), measured[0]
    assert all(r["error"] is None for r in measured)
    eng = summary["engine"]
    assert eng["telemetry"]["source"] == "none"
    assert eng["telemetry"]["missing_reason"] == "the transformers engine exposes no Prometheus /metrics"
    return summary


def test_harness_run_on_transformers_serve_cpu(real_transformers, tmp_path):
    port = free_port()
    argv = [
        a.replace("{host}", "127.0.0.1").replace("{port}", str(port))
        for a in real_transformers.command("--cb-num-blocks", "64")
    ]
    log = tmp_path / "serve.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, **real_transformers.env},
            start_new_session=True,
        )
    try:
        kind = get_kind("transformers")
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return kind.probe(url, None).ready

        wait_until(
            ready, "transformers serve ready", timeout_s=300, interval_s=0.5, details=lambda: log.read_text()[-3000:]
        )
        assert kind.startup_facts(log.read_text()) == {"port": port}
        # /v1/models fails without a Hugging Face cache folder: the run names the model itself
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=10)
            models_ok = True
        except urllib.error.HTTPError as exc:
            models_ok = exc.code
        print("\n/v1/models:", models_ok)
        scen = _scenario(tmp_path, str(real_transformers.model), "tf-run")
        out = tmp_path / "run"
        t0 = time.monotonic()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(scen),
                "--target",
                url,
                "--model",
                str(real_transformers.model),
                "--engine-kind",
                "transformers",
                "--out",
                str(out),
                "--quiet",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        print(f"harness run: {time.monotonic() - t0:.1f} s")
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        summary = _assert_run(out, 6)
        assert summary["tokens"]["output_total"] == 6 * 12
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_sweep_on_transformers_serve_cpu_restarts_with_each_cache_size(real_transformers, tmp_path):
    _scenario(tmp_path, str(real_transformers.model), "tf-sweep")
    sweep = {
        "name": "real-transformers-cpu",
        "engine": {
            "kind": "transformers",
            "command": real_transformers.command(),
            "env": real_transformers.env,
            "served_model_name": str(real_transformers.model),
            "ready_timeout_s": 300,
            "stop_timeout_s": 30,
        },
        "vary": {
            "mode": "list",
            "configs": [
                {"id": "blocks-32", "flags": {"cb-num-blocks": 32}},
                {"id": "blocks-64", "flags": {"cb-num-blocks": 64}},
            ],
        },
        "scenarios": ["tf-sweep.yaml"],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    t0 = time.monotonic()
    outcome = run_sweep(build_plan(path), SweepOptions(out_dir=out, show_progress=True, write_report=False))
    index = json.loads((out / "index.json").read_text())
    print(
        f"\ntransformers sweep: {time.monotonic() - t0:.1f} s;",
        json.dumps(
            {c["id"]: {"startup_s": c.get("startup_s"), "facts": c.get("startup_facts")} for c in index["cells"]}
        ),
    )
    assert outcome.counts["complete"] == 2, json.dumps(index, indent=1)[:4000]
    ports = set()
    for cell in index["cells"]:
        facts = cell["startup_facts"]
        assert set(facts) == {"port"}, facts
        ports.add(facts["port"])
        _assert_run(out / cell["run_dir"], 6)
    assert len(index["cells"]) == 2
