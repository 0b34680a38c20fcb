"""`harness run` as a user runs it (a subprocess) against the scriptable OpenAI server.

The results contract: every key the core issue lists, requests.jsonl = completed + failed,
histograms decode, scenario.yaml reloads with the same fingerprint, no secret in any file,
and Ctrl-C keeps what was measured (status "partial").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.metrics.recorder import ALL, MetricSet
from harness.scenario import load_scenario
from harness.workload.fingerprint import fingerprint

SECRET = "sk-do-not-leak-7f3a9c"

SCENARIO = """\
name: contract
seed: 7
target:
  api_key_env: HARNESS_TEST_KEY
load: {concurrency: 3, requests: 12}
warmup: {requests: 2}
slo: {ttft_ms: 60000}
sampling:
  extra_body: {itl_ms: 0.5}
workload:
  classes:
    - name: short
      weight: 2
      input_tokens: {dist: uniform, min: 5, max: 20}
      output_tokens: {dist: uniform, min: 3, max: 8}
    - name: long
      input_tokens: 40
      output_tokens: 12
      slo: {ttft_ms: 0.001}  # 1 µs: no request over HTTP meets it
"""

DIST_KEYS = {"count", "mean", "p50", "p90", "p99", "p999", "max"}
LATENCY = {"ttft", "itl_chunk", "itl_token", "tpot", "e2e", "send_lag"}


def harness(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def contract_run(fake_openai, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract")
    path = tmp / "contract.yaml"
    path.write_text(SCENARIO)
    out = tmp / "run"
    proc = harness(
        "run",
        str(path),
        "--target",
        fake_openai.url,
        "--model",
        "ok",
        "--out",
        str(out),
        "--no-telemetry",
        "--no-report",
        env={"HARNESS_TEST_KEY": SECRET},
    )
    return proc, out, path


def test_run_succeeds_and_prints_the_table(contract_run) -> None:
    proc, out, _ = contract_run
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for label in ("TTFT", "ITL per token", "E2E", "requests/s", "tokens/s", f"results: {out}"):
        assert label in proc.stdout


def test_summary_has_every_contract_key(contract_run) -> None:
    _, out, _ = contract_run
    s = json.loads((out / "summary.json").read_text())
    assert s["schema_version"] == 1 and s["status"] == "complete"
    assert s["scenario"]["name"] == "contract" and len(s["scenario"]["fingerprint"]["value"]) == 16
    assert {k: s["target"][k] for k in ("api", "model")} == {"api": "openai-chat", "model": "ok"}
    assert s["target"]["url"].startswith("http://127.0.0.1:")
    assert {"start", "end", "duration_s", "warmup_s"} <= set(s["window"])
    assert s["window"]["end"] >= s["window"]["start"] and s["window"]["duration_s"] > 0
    assert {"completed", "failed", "errors_by_kind", "rps"} <= set(s["requests"])
    assert s["requests"]["completed"] == 12 and s["requests"]["failed"] == 0 and s["requests"]["rps"] > 0
    assert {"input_total", "output_total", "input_per_s", "output_per_s"} <= set(s["tokens"])
    assert set(s["latency_ms"]) >= LATENCY
    for name in LATENCY:
        assert set(s["latency_ms"][name]) >= DIST_KEYS, name
    assert s["latency_ms"]["ttft"]["count"] == 12 and s["latency_ms"]["send_lag"]["count"] == 0  # closed loop
    assert set(s["per_class"]) <= {"short", "long"} and s["per_class"]
    for block in s["per_class"].values():
        assert {"requests", "tokens", "latency_ms", "goodput"} <= set(block)
        assert set(block["latency_ms"]) >= LATENCY
    assert {"overall", "per_class"} <= set(s["goodput"])
    # the "long" class has a 1 µs TTFT SLO no request meets; "short" inherits 60 s
    g = s["goodput"]
    long_total = g["per_class"].get("long", {}).get("total", 0)
    assert g["overall"]["good"] == 12 - long_total
    assert {"prompt_tokens_mean_diff", "max_diff"} <= set(s["usage_check"])
    # the fake server always reports 7 prompt tokens: the check must see the difference
    assert s["usage_check"]["max_diff"] > 0
    assert s["client"]["warmup_requests"] == 2


def test_tokens_match_requests(contract_run) -> None:
    _, out, _ = contract_run
    s = json.loads((out / "summary.json").read_text())
    lines = [json.loads(rec) for rec in (out / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == s["requests"]["completed"] + s["requests"]["failed"]
    assert sorted(rec["i"] for rec in lines) == list(range(12)) and not any(rec["warmup"] for rec in lines)
    assert sum(rec["output_tokens"] for rec in lines) == s["tokens"]["output_total"]
    assert sum(rec["input_tokens"] for rec in lines) == s["tokens"]["input_total"] == 12 * 7
    for rec in lines:
        assert rec["chunks"] == rec["output_tokens"] and rec["ttft_ms"] <= rec["e2e_ms"]
        assert {
            "class",
            "intended_ns",
            "sent_ns",
            "ttft_ms",
            "e2e_ms",
            "input_tokens",
            "output_tokens",
            "error",
        } <= set(rec)
    ttfts = sorted(rec["ttft_ms"] for rec in lines)
    assert s["latency_ms"]["ttft"]["max"] == pytest.approx(ttfts[-1], rel=1e-9)
    assert s["latency_ms"]["ttft"]["mean"] == pytest.approx(sum(ttfts) / len(ttfts), rel=1e-3)


def test_histograms_decode(contract_run) -> None:
    _, out, _ = contract_run
    s = json.loads((out / "summary.json").read_text())
    ms = MetricSet.from_dict(json.loads((out / "histograms.json").read_text()))
    assert ms.classes[ALL].hist["ttft"].count == 12
    again = ms.classes[ALL].summarize(s["window"]["duration_s"])
    assert again["latency_ms"]["e2e"] == s["latency_ms"]["e2e"]


def test_scenario_yaml_reloads_with_the_same_fingerprint(contract_run) -> None:
    _, out, original = contract_run
    s = json.loads((out / "summary.json").read_text())
    resolved = load_scenario(out / "scenario.yaml")
    assert resolved.seed == 7 and resolved.target.api_key_env == "HARNESS_TEST_KEY"
    assert fingerprint(resolved)["value"] == s["scenario"]["fingerprint"]["value"]
    assert fingerprint(load_scenario(original))["value"] == s["scenario"]["fingerprint"]["value"]


def test_api_key_never_written(contract_run) -> None:
    proc, out, _ = contract_run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"summary.json", "histograms.json", "requests.jsonl", "scenario.yaml"} <= {p.name for p in files}
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_what_was_measured(fake_openai, tmp_path: Path, sig: int) -> None:
    """Ctrl-C, or SIGTERM (a CI job cancelled, a sweep stopped), writes what was measured."""
    path = tmp_path / "long.yaml"
    path.write_text(SCENARIO.replace("requests: 12}", "duration_s: 60}").replace("warmup: {requests: 2}\n", ""))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--target",
            fake_openai.url,
            "--model",
            "ok",
            "--out",
            str(out),
            "--no-telemetry",
            "--no-report",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HARNESS_TEST_KEY": SECRET},
    )
    requests = out / "requests.jsonl"
    deadline = time.monotonic() + 60
    # requests.jsonl is flushed with each progress line (every second): wait for measured requests
    while time.monotonic() < deadline and proc.poll() is None:
        if requests.exists() and len(requests.read_text().splitlines()) >= 5:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "partial"
    assert s["requests"]["completed"] >= 5 and s["window"]["duration_s"] < 60
    lines = requests.read_text().splitlines()
    assert len(lines) == s["requests"]["completed"] + s["requests"]["failed"]
    assert not list(out.glob("*.tmp"))
    assert not _processes_mentioning(str(out / "load_plan.json"))  # no load process outlives the run


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(proc.name))
    return pids


def test_second_ctrl_c_stops_the_load_at_once(fake_openai, tmp_path: Path) -> None:
    """Two Ctrl-C: no load process may outlive `harness run` (they run in their own sessions)."""
    path = tmp_path / "slow.yaml"
    path.write_text(
        SCENARIO.replace("requests: 12}", "duration_s: 60}")
        .replace("warmup: {requests: 2}\n", "")
        .replace("itl_ms: 0.5", "itl_ms: 50")
        .replace("output_tokens: 12", "output_tokens: 400")
        .replace("{dist: uniform, min: 3, max: 8}", "400")
    )
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--target",
            fake_openai.url,
            "--model",
            "ok",
            "--out",
            str(out),
            "--no-telemetry",
            "--no-report",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HARNESS_TEST_KEY": SECRET},
    )
    progress = out / "progress.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists() and any(json.loads(rec)["in_flight"] > 0 for rec in progress.read_text().splitlines()):
            break
        time.sleep(0.1)
    assert _processes_mentioning(str(out / "load_plan.json")), "the load process should be running"
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    deadline = time.monotonic() + 5
    while _processes_mentioning(str(out / "load_plan.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(str(out / "load_plan.json"))  # requests of 20 s would still be running


def test_kill_9_of_harness_run_stops_its_load_process_at_once(fake_openai, tmp_path: Path) -> None:
    """Audit R7: after `kill -9` of `harness run` its load process took the parent-death SIGTERM as a
    graceful stop, drained for its grace (~40 s) and appended 21 lines to the dead run's files. Now
    it sees its parent gone and stops at once; the lines recorded before the kill stay whole."""
    path = tmp_path / "slow.yaml"
    path.write_text(
        SCENARIO.replace("requests: 12}", "duration_s: 60}")
        .replace("warmup: {requests: 2}\n", "")
        .replace("itl_ms: 0.5", "itl_ms: 20")
        .replace("output_tokens: 12", "output_tokens: 100")
    )
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--target",
            fake_openai.url,
            "--model",
            "ok",
            "--out",
            str(out),
            "--no-telemetry",
            "--no-report",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HARNESS_TEST_KEY": SECRET},
    )
    progress = out / "progress.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists() and any(
            json.loads(rec)["in_flight"] > 0 and json.loads(rec).get("done", 0) > 0
            for rec in progress.read_text().splitlines()
        ):
            break
        time.sleep(0.1)
    assert _processes_mentioning(str(out / "load_plan.json")), "the load process should be running"
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while _processes_mentioning(str(out / "load_plan.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(str(out / "load_plan.json")), "the load process outlived harness run"
    lines = (out / "requests.jsonl").read_text().splitlines()
    time.sleep(1.5)
    assert (out / "requests.jsonl").read_text().splitlines() == lines  # nothing written after
    assert all(json.loads(line)["id"] for line in lines)  # every line whole
    assert not (out / "summary.json").exists()


def test_a_full_disk_says_so_and_keeps_what_was_measured(fake_openai, tmp_path: Path) -> None:
    """Audit R5: a full disk under requests.jsonl killed the load process on the write error (its
    traceback could not be written either) and the run said "the load process failed before
    measuring anything", exit 2. Here requests.jsonl is /dev/full (every write: ENOSPC): the load
    stops, the run says "disk full" naming the file, and what fits elsewhere is written."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    path = tmp_path / "long.yaml"
    path.write_text(SCENARIO.replace("requests: 12}", "duration_s: 30}").replace("warmup: {requests: 2}\n", ""))
    out = tmp_path / "run"
    out.mkdir()
    (out / "requests.jsonl").symlink_to("/dev/full")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            "--target",
            fake_openai.url,
            "--model",
            "ok",
            "--out",
            str(out),
            "--no-telemetry",
            "--no-report",
            "--quiet",
            "--force",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HARNESS_TEST_KEY": SECRET},
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "failed before measuring" not in proc.stderr
    assert f"error: disk full: requests.jsonl in {out}: No space left on device" in proc.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and s["status_reason"].startswith("disk full: requests.jsonl")
    assert s["window"]["duration_s"] < 30  # the load stopped at the first failed write
