"""Every PromQL expression of every dashboard, executed against a real Prometheus that scraped,
every second, the simulated engine (`python -m harness.sim`) and the harness's own exporter
during a short `harness run --metrics-port` against it. Each must return data (a finite point).

The simulator speaks vLLM's names only and has no GPU. Targets for signals it cannot produce are
listed in NOT_FROM_SIM with the reason; they are executed too, against a synthetic SGLang and
DCGM exposition scraped by the same Prometheus, and must return data there. Template variables
are replaced by values that match the scraped series (the sim's job/instance/model, the run's
config and run labels); Grafana's $__rate_interval by 4 s (4 x the scrape interval).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from grafana_stack import (
    DASHBOARDS,
    PROMETHEUS,
    Prometheus,
    SyntheticExporter,
    environ,
    finite_points,
    free_port,
    label_values,
    load,
    substitute,
    targets,
    variable_queries,
)
from waiting import wait_until

pytestmark = pytest.mark.skipif(
    not os.access(PROMETHEUS, os.X_OK), reason=f"Prometheus not found at {PROMETHEUS}; CI installs Debian's prometheus"
)

SGLANG = "SGLang metric names: the simulator exports vLLM's names only"
DCGM = "DCGM_FI_DEV_FB_* come from NVIDIA's dcgm-exporter; the simulator has no GPU"

#: (dashboard uid, panel title, refId or "*") -> why the simulator cannot produce it
NOT_FROM_SIM: dict[tuple[str, str, str], str] = {
    ("llm-harness-sglang", "*", "*"): SGLANG,
    ("llm-harness-tuning", "Prefix-cache hit rate (range)", "B"): SGLANG,
    ("llm-harness-tuning", "Spec-decode acceptance", "B"): SGLANG,
    ("llm-harness-tuning", "Prefix-cache hit rate", "B"): SGLANG,
    ("llm-harness-tuning", "Speculative decoding: acceptance rate", "B"): SGLANG,
    ("llm-harness-tuning", "Speculative decoding: mean acceptance length", "B"): SGLANG,
    ("llm-harness-tuning", "GPU memory used (max, DCGM)", "A"): DCGM,
    ("llm-harness-tuning", "GPU memory growth (range)", "B"): DCGM,
    ("llm-harness-tuning", "GPU memory (DCGM)", "A"): DCGM,
    ("llm-harness-tuning", "GPU memory (DCGM)", "B"): DCGM,
}
#: template variables whose query only the synthetic exposition answers
VARIABLES_NOT_FROM_SIM = {("llm-harness-sglang", "*"): SGLANG, ("llm-harness-tuning", "gpu_instance"): DCGM}

SCENARIO = """\
name: grafana
seed: 11
load: {rate: 8, duration_s: 10, max_in_flight: 64}
warmup: {requests: 2}
workload:
  classes:
    - name: chat
      weight: 3
      input_tokens: {dist: uniform, min: 96, max: 256}
      output_tokens: {dist: uniform, min: 16, max: 48}
      shared_prefix: {tokens: 64, count: 2, fraction: 0.8}
    - name: summarize
      input_tokens: {dist: uniform, min: 300, max: 600}
      output_tokens: {dist: uniform, min: 8, max: 24}
"""
SIM_FLAGS = [
    "--startup-delay",
    "0.02",
    "--fault-error-rate",
    "0.08",
    "--speculative-config",
    '{"method":"ngram","num_speculative_tokens":3,"acceptance_rate":0.6}',
]
RATE_INTERVAL = "4s"


def _excluded(uid: str, title: str, ref: str) -> str | None:
    for key in ((uid, title, ref), (uid, title, "*"), (uid, "*", "*")):
        if key in NOT_FROM_SIM:
            return NOT_FROM_SIM[key]
    return None


def _wait_http(url: str, proc: subprocess.Popen[Any]) -> None:
    def ok() -> bool:
        assert proc.poll() is None, f"{url}: process exited"
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    wait_until(ok, url)


def _scraped_after(prom: Any, job: str, t: float) -> float | None:
    """The time of Prometheus's last scrape of `job`, once it is later than `t`."""
    result = prom.query(f'timestamp(up{{job="{job}"}})')
    last = max((float(r["value"][1]) for r in result), default=0.0)
    return last if last > t else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Sim + synthetic exposition + Prometheus, then one `harness run` with --metrics-port."""
    tmp = tmp_path_factory.mktemp("grafana")
    sim_port, metrics_port = free_port(), free_port()
    sim_log = open(tmp / "sim.log", "w")
    sim = subprocess.Popen(
        [sys.executable, "-m", "harness.sim", "--port", str(sim_port), *SIM_FLAGS],
        stdout=sim_log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=environ(),
    )
    synth = SyntheticExporter()
    prom = Prometheus(
        tmp,
        {
            "engine": (f"127.0.0.1:{sim_port}", "/metrics"),
            "harness": (f"127.0.0.1:{metrics_port}", "/metrics"),
            "sglang": (synth.address, "/sglang"),
            "dcgm": (synth.address, "/dcgm"),
        },
    )
    try:
        _wait_http(f"http://127.0.0.1:{sim_port}/health", sim)
        (tmp / "grafana.yaml").write_text(SCENARIO)
        out = tmp / "run-grafana"
        t0 = time.time()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(tmp / "grafana.yaml"),
                "--target",
                f"http://127.0.0.1:{sim_port}",
                "--metrics-port",
                str(metrics_port),
                "--label",
                "config=c1",
                "--label",
                "sweep=grafana-test",
                "--engine-kind",
                "vllm",
                "--no-report",
                "--quiet",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=environ(),
        )
        t1 = time.time()
        assert run.returncode == 0, run.stdout + run.stderr
        last = wait_until(lambda: _scraped_after(prom, "engine", t1), "the engine's first scrape after the run")
        summary = json.loads((out / "summary.json").read_text())
        yield {
            "prom": prom,
            "t0": t0,
            "t1": last,
            "sim_instance": f"127.0.0.1:{sim_port}",
            "synth": synth,
            "summary": summary,
            "run": out.name,
            "tmp": tmp,
        }
    finally:
        prom.close()
        synth.close()
        if sim.poll() is None:
            sim.terminate()
            try:
                sim.wait(timeout=5)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
        sim_log.close()


def _values(stack: dict[str, Any], source: str) -> dict[str, str]:
    common = {
        "__rate_interval": RATE_INTERVAL,
        "__interval": "1s",
        "__range": f"{int(stack['t1'] - stack['t0']) + 1}s",
        "config": "c1",
        "run": stack["run"],
        "gpu_instance": ".*",
    }
    if source == "sim":
        return {**common, "job": "engine", "instance": stack["sim_instance"], "model": "sim-llama-8b"}
    return {**common, "job": "sglang|dcgm", "instance": stack["synth"].address, "model": SyntheticExporter.MODEL}


def test_every_expression_returns_data(stack: dict[str, Any]) -> None:
    prom: Prometheus = stack["prom"]
    start, end = stack["t0"], stack["t1"]
    sim_vals, synth_vals = _values(stack, "sim"), _values(stack, "synthetic")
    failures: list[str] = []

    verbose = bool(os.environ.get("GRAFANA_TEST_VERBOSE"))

    def points(expr: str) -> int:
        try:
            result = prom.query_range(expr, start, end)
            if verbose:  # GRAFANA_TEST_VERBOSE=1 pytest -s: the last value of every series
                print(expr[:110], [(r["metric"].get("__name__", ""), r["values"][-1][1]) for r in result][:4])
            return finite_points(result)
        except AssertionError as exc:  # a PromQL error: report every one, not just the first
            failures.append(str(exc))
            return -1

    used_exclusions: set[tuple[str, str, str]] = set()
    executed = {"sim": 0, "synthetic": 0}
    for path in DASHBOARDS:
        dash = load(path)
        uid = dash["uid"]
        for title, ref, expr in targets(dash):
            why = _excluded(uid, title, ref)
            where = f"{path.name} / {title} / {ref}"
            if why is None:
                executed["sim"] += 1
                if points(substitute(expr, sim_vals)) == 0:
                    failures.append(f"{where}: no data from the sim run: {substitute(expr, sim_vals)}")
            else:
                used_exclusions.update(
                    k for k in ((uid, title, ref), (uid, title, "*"), (uid, "*", "*")) if k in NOT_FROM_SIM
                )
            # SGLang/DCGM names (excluded ones, and the SGLang half of engine-agnostic targets) must
            # work against the synthetic exposition
            if why is not None or "sglang" in expr:
                executed["synthetic"] += 1
                if points(substitute(expr, synth_vals)) == 0:
                    failures.append(
                        f"{where}: no data from the synthetic SGLang/DCGM exposition: {substitute(expr, synth_vals)}"
                    )
    assert not failures, f"{len(failures)} expressions without data:\n" + "\n".join(failures)
    assert set(NOT_FROM_SIM) == used_exclusions, f"stale NOT_FROM_SIM entries: {set(NOT_FROM_SIM) - used_exclusions}"
    assert executed["sim"] > 100 and executed["synthetic"] > 40, executed
    print(
        f"\nexecuted {executed['sim']} expressions on the sim run, {executed['synthetic']} on the synthetic exposition"
    )


def test_every_variable_query_finds_values(stack: dict[str, Any]) -> None:
    prom: Prometheus = stack["prom"]
    start, end = stack["t0"], stack["t1"]
    failures = []
    for path in DASHBOARDS:
        dash = load(path)
        uid = dash["uid"]
        for name, query in variable_queries(dash):
            synthetic = (uid, name) in VARIABLES_NOT_FROM_SIM or (uid, "*") in VARIABLES_NOT_FROM_SIM
            vals = _values(stack, "synthetic" if synthetic else "sim")
            found = label_values(prom, substitute(query, vals), start, end)
            if not found:
                failures.append(f"{path.name} ${name}: {query} found nothing")
            expected = {
                "job": "engine",
                "instance": stack["sim_instance"],
                "model": "sim-llama-8b",
                "config": "c1",
                "run": stack["run"],
            }.get(name)
            if expected is not None and not synthetic and expected not in found:
                failures.append(f"{path.name} ${name}: {expected!r} not in {found}")
    assert not failures, "\n".join(failures)


def test_client_series_agree_with_the_run_summary(stack: dict[str, Any]) -> None:
    """What Prometheus holds for the run matches summary.json (up to the last second's requests)."""
    prom: Prometheus = stack["prom"]
    s = stack["summary"]
    at = stack["t1"]
    sel = f'{{run="{stack["run"]}", config="c1", scenario="grafana", model="sim-llama-8b"}}'

    def last(expr: str) -> float:
        res = prom.query(f"max_over_time(({expr})[5m:1s])", at)
        return float(res[0]["value"][1]) if res else 0.0

    completed = s["requests"]["completed"]
    failed = s["requests"]["failed"]
    assert failed > 0, "the simulator's --fault-error-rate should have produced errors"
    ok = last(f'sum(harness_requests_total{{phase="measure", outcome="ok", run="{stack["run"]}"}})')
    bad = last(f'sum(harness_requests_total{{phase="measure", outcome!="ok", run="{stack["run"]}"}})')
    rps = s["requests"]["rps"] or 8
    assert completed - 3 * rps <= ok <= completed, (ok, completed)
    assert bad <= failed, (bad, failed)
    ttft_count = last(f"sum(harness_ttft_seconds_count{sel})")
    assert completed - 3 * rps <= ttft_count <= completed
    info = prom.query(f"harness_run_info{sel}", stack["t1"] - 3)
    assert info and info[0]["metric"]["sweep"] == "grafana-test"
    assert last(f"max(harness_target_rate_requests_per_second{sel})") == 8.0
    assert 0 < last(f"max(harness_expected_prefix_hit_rate{sel})") < 1
    # both spellings are exercised: the sim's prometheus_client escapes vllm: in OpenMetrics, the
    # synthetic page is plain text and keeps sglang:
    names = {r["metric"]["__name__"] for r in prom.query('{__name__=~"(vllm|sglang)[:_]num_.*"}', stack["t1"] - 3)}
    assert "vllm_num_requests_running" in names and "sglang:num_running_reqs" in names, names
    classes = {
        r["metric"]["class"] for r in prom.query(f"count by (class) (harness_e2e_seconds_count{sel})", stack["t1"] - 3)
    }
    assert classes == {"chat", "summarize"}
