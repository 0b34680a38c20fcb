"""Live harness metrics (harness/metrics/exporter.py): exact aggregation across processes, labels,
serving, live gauges of exited processes, and the per-request cost of observing.

Multiprocess mode is chosen when prometheus_client is imported, so load-process behaviour runs in
subprocesses with PROMETHEUS_MULTIPROC_DIR set; the collecting side runs here.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.errors import UserError
from harness.load.live_metrics import wrap_report
from harness.metrics import exporter
from harness.metrics.exporter import HISTOGRAMS
from harness.metrics.exporter_server import MetricsServer, RunMetrics, open_run
from harness.metrics.record import RequestRecord
from harness.scenario.models import Scenario

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = Scenario.model_validate(
    {
        "name": "exp",
        "load": {"rate": 5, "duration_s": 10, "max_in_flight": 32},
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "input_tokens": 100,
                    "output_tokens": 20,
                    "shared_prefix": {"tokens": 64, "count": 2, "fraction": 0.5},
                }
            ]
        },
    }
)

CHILD = r"""
import json, sys, time
from harness.metrics.exporter import LoadMetrics
from harness.metrics.record import RequestRecord
recs = [RequestRecord(**d) for d in json.load(open(sys.argv[1]))]
lm = LoadMetrics()
half = len(recs) // 2
for r in recs[:half]:
    lm.observe(r)
lm.flush()                       # two flushes: deltas must add up
for r in recs[half:]:
    lm.observe(r)
t = time.perf_counter(); lm.flush(); flush_s = time.perf_counter() - t
lm.in_flight.set(7)
print(json.dumps({"flush_us": flush_s * 1e6}), flush=True)
if len(sys.argv) > 2:            # keep running until told to exit (live gauges)
    sys.stdin.readline()
"""


def _records(seed: int, n: int) -> list[RequestRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        start = 10**12 + i * 10**8
        open_loop = rnd.random() < 0.5
        sent = start + (rnd.randint(0, 3_000_000) if open_loop else 0)
        chunks: list[int] = []
        tokens: list[int] = []
        n_chunks = rnd.choice([0, 1, 2, 5, 40, 79, 81, 200, 600])
        t = sent + rnd.randint(5_000_000, 900_000_000)
        for _ in range(n_chunks):
            chunks.append(t)
            tokens.append(rnd.choice([1, 1, 1, 1, 2, 3, 0]))
            t += rnd.randint(500_000, 60_000_000)
        err = rnd.choice([None] * 8 + ["http_500", "disconnect"]) if n_chunks else "empty_output"
        out.append(
            RequestRecord(
                index=i,
                class_name=rnd.choice(["chat", "sum"]),
                intended_ns=start if open_loop else None,
                sent_ns=sent,
                chunk_ns=chunks,
                chunk_tokens=tokens,
                output_tokens=(sum(tokens) or None) if rnd.random() < 0.9 else None,
                input_tokens=rnd.choice([None, rnd.randint(10, 4000)]),
                intended_input_tokens=123,
                error_kind=err,
                warmup=rnd.random() < 0.1,
            )
        )
    return out


def _reference(recs: list[RequestRecord]) -> dict[str, Any]:
    """Naive: every sample compared with every bound (no bisect, no numpy, no batching)."""
    bounds_ns = {name: [round(b * 1e9) for b in spec[0]] for name, spec in HISTOGRAMS.items()}
    hist: dict[tuple[str, str], dict[str, Any]] = {}
    requests: dict[tuple[str, str, str], int] = {}
    tokens: dict[tuple[str, str], int] = {}

    def add(cls: str, name: str, value_ns: int, weight: int = 1, sum_ns: int | None = None) -> None:
        hd = hist.setdefault((cls, name), {"le": [0] * (len(bounds_ns[name]) + 1), "sum": 0, "count": 0})
        for i, b in enumerate(bounds_ns[name]):
            if value_ns <= b:
                hd["le"][i] += weight
        hd["le"][-1] += weight
        hd["count"] += weight
        hd["sum"] += value_ns * weight if sum_ns is None else sum_ns

    for r in recs:
        key = (r.class_name, r.error_kind or "ok", "warmup" if r.warmup else "measure")
        requests[key] = requests.get(key, 0) + 1
        if r.warmup or r.error_kind:
            continue
        tokens[(r.class_name, "in")] = tokens.get((r.class_name, "in"), 0) + (
            r.input_tokens if r.input_tokens is not None else r.intended_input_tokens
        )
        tokens[(r.class_name, "out")] = tokens.get((r.class_name, "out"), 0) + (r.output_tokens or 0)
        if r.send_lag_ns is not None:
            add(r.class_name, "send_lag", r.send_lag_ns)
        if not r.chunk_ns:
            continue
        add(r.class_name, "ttft", r.ttft_ns)
        add(r.class_name, "e2e", r.e2e_ns)
        if r.output_tokens is not None and r.output_tokens >= 2:
            # the table's TPOT (harness.metrics.table): a float rounded to ns, as in the HDR histogram
            # (the exporter once divided with //, disagreeing with summary.json)
            add(r.class_name, "tpot", round((r.chunk_ns[-1] - r.chunk_ns[0]) / (r.output_tokens - 1)))
        for a, b, k in zip(r.chunk_ns, r.chunk_ns[1:], r.chunk_tokens[1:], strict=False):
            gap = b - a
            if k > 1:
                add(r.class_name, "itl", gap // k, weight=k)  # k samples of gap // k, as in histograms.json
            else:
                add(r.class_name, "itl", gap)
    return {"hist": hist, "requests": requests, "tokens": tokens}


def _families(run: RunMetrics) -> dict[str, Any]:
    return {f.name: f for f in run.collect()}


def _child(run: RunMetrics, recs: list[RequestRecord], tmp: Path, wait: bool = False) -> subprocess.Popen[str]:
    data = tmp / f"recs-{len(list(tmp.iterdir()))}.json"
    fields = (
        "index",
        "class_name",
        "intended_ns",
        "sent_ns",
        "chunk_ns",
        "chunk_tokens",
        "output_tokens",
        "input_tokens",
        "intended_input_tokens",
        "error_kind",
        "warmup",
    )
    data.write_text(json.dumps([{f: getattr(r, f) for f in fields} for r in recs]))
    args = [sys.executable, "-c", CHILD, str(data)] + (["wait"] if wait else [])
    return subprocess.Popen(args, env=run.env, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, cwd=ROOT)


def test_two_processes_aggregate_exactly(tmp_path: Path) -> None:
    recs = _records(1, 400)
    run = RunMetrics(None, "run-1", SCENARIO, "m", {"config": "c1"})
    try:
        procs = [_child(run, recs[:250], tmp_path), _child(run, recs[250:], tmp_path)]
        for p in procs:
            p.communicate(timeout=60)
            assert p.returncode == 0
        fams = _families(run)
    finally:
        run.close()
    ref = _reference(recs)
    extra = {"run": "run-1", "scenario": "exp", "config": "c1", "model": "m"}
    checked = 0
    for (cls, name), hd in ref["hist"].items():
        fam = fams[f"harness_{name}_seconds"]
        samples = [s for s in fam.samples if s.labels.get("class") == cls]
        assert all({k: s.labels[k] for k in extra} == extra for s in samples)
        buckets = [s.value for s in samples if s.name.endswith("_bucket")]
        assert buckets == hd["le"], (cls, name)
        (count,) = [s.value for s in samples if s.name.endswith("_count")]
        (total,) = [s.value for s in samples if s.name.endswith("_sum")]
        assert count == hd["count"] and total == pytest.approx(hd["sum"] / 1e9, rel=1e-9), (cls, name)
        checked += 1
    assert checked >= 8 and any(n == "itl" for _c, n in ref["hist"])
    got = {
        (s.labels["class"], s.labels["outcome"], s.labels["phase"]): s.value
        for s in fams["harness_requests"].samples
        if s.name == "harness_requests_total"
    }
    assert got == ref["requests"]
    for (cls, d), value in ref["tokens"].items():
        name = "harness_input_tokens" if d == "in" else "harness_output_tokens"
        (sample,) = [s for s in fams[name].samples if s.labels["class"] == cls and s.name.endswith("_total")]
        assert sample.value == value
    assert set(fams["harness_run_info"].samples[0].labels) >= set(extra)


def test_workers_counts_shipped_to_a_master_aggregate_exactly() -> None:
    """Locust workers (possibly on other hosts) export nothing themselves: each ships
    `LiveCounts.take()` in its deltas (msgpack on the wire) and the master's `MasterMetrics`
    applies them; served in memory by the master's RunMetrics, the series equal the naive reference."""
    import msgpack

    from harness.metrics.exporter import LiveCounts, MasterMetrics

    recs = _records(1, 400)
    master = MasterMetrics()
    run = RunMetrics(None, "run-m", SCENARIO, "m", {"config": "c1"}, source=master)
    workers = [LiveCounts(), LiveCounts()]
    workers[0].users = lambda: 3
    for k, share in enumerate((recs[:250], recs[250:])):
        for i, rec in enumerate(share):
            workers[k].observe(rec)
            if i % 97 == 0:  # an interval delta now and then, through the wire format
                master.add(k, msgpack.unpackb(msgpack.packb(workers[k].take())))
        master.add(k, msgpack.unpackb(msgpack.packb(workers[k].take())))
    fams = _families(run)
    assert run.dir == "" and "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    ref = _reference(recs)
    for (cls, name), hd in ref["hist"].items():
        samples = [s for s in fams[f"harness_{name}_seconds"].samples if s.labels.get("class") == cls]
        assert [s.value for s in samples if s.name.endswith("_bucket")] == hd["le"], (cls, name)
        (count,) = [s.value for s in samples if s.name.endswith("_count")]
        (total,) = [s.value for s in samples if s.name.endswith("_sum")]
        assert count == hd["count"] and total == pytest.approx(hd["sum"] / 1e9, rel=1e-9), (cls, name)
        assert all(s.labels["run"] == "run-m" and s.labels["config"] == "c1" for s in samples)
    got = {
        (s.labels["class"], s.labels["outcome"], s.labels["phase"]): s.value
        for s in fams["harness_requests"].samples
        if s.name == "harness_requests_total"
    }
    assert got == ref["requests"]
    assert not any(s.name.endswith("_created") for f in fams.values() for s in f.samples)
    assert [s.value for s in fams["harness_active_users"].samples] == [3]
    master.worker_done(0)
    master.worker_done(1)
    assert [s.value for s in _families(run)["harness_active_users"].samples] == [0]
    run.close()


def test_live_gauges_count_only_running_processes(tmp_path: Path) -> None:
    run = RunMetrics(None, "run-2", SCENARIO, "m")
    try:
        p = _child(run, _records(2, 5), tmp_path, wait=True)
        assert p.stdout is not None
        json.loads(p.stdout.readline())  # flushed, gauge set
        (live,) = [s.value for s in _families(run)["harness_in_flight_requests"].samples]
        assert live == 7
        p.communicate("go\n", timeout=30)
        samples = (
            _families(run)["harness_in_flight_requests"].samples
            if "harness_in_flight_requests" in _families(run)
            else []
        )
        assert sum(s.value for s in samples) == 0  # the exited process no longer counts
        counters = _families(run)["harness_requests"].samples
        assert sum(s.value for s in counters if s.name.endswith("_total")) == 5  # its counters stay
    finally:
        run.close()


def _scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return {f.name: f for f in text_string_to_metric_families(r.read().decode())}


def test_server_labels_info_and_final_values_after_close(tmp_path: Path) -> None:
    server = MetricsServer(0).start()
    try:
        assert _scrape(server.url) == {}
        run = RunMetrics(
            server, "run-3", SCENARIO, "sim-llama-8b", {"config": "cfg-a", "sweep": "s1", "odd key-1": "v"}
        )
        p = _child(run, _records(3, 30), tmp_path)
        p.communicate(timeout=60)
        page = _scrape(server.url)
        (info,) = page["harness_run_info"].samples
        assert info.labels == {
            "run": "run-3",
            "scenario": "exp",
            "config": "cfg-a",
            "model": "sim-llama-8b",
            "sweep": "s1",
            "odd_key_1": "v",
        }
        assert page["harness_target_rate_requests_per_second"].samples[0].value == 5
        assert page["harness_target_users"].samples[0].value == 32
        assert 0 < page["harness_expected_prefix_hit_rate"].samples[0].value < 1
        before = {s.labels.get("class"): s.value for s in page["harness_requests"].samples if s.name.endswith("_total")}
        run.close()
        assert not os.path.exists(run.dir)
        after = _scrape(server.url)  # frozen at the final values until the next run attaches
        assert {
            s.labels.get("class"): s.value for s in after["harness_requests"].samples if s.name.endswith("_total")
        } == before
        nxt = RunMetrics(server, "run-4", SCENARIO, "m")
        assert {s.labels["run"] for s in _scrape(server.url)["harness_run_info"].samples} == {"run-4"}
        nxt.close()
    finally:
        server.close()


def test_port_in_use_is_a_user_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=f"--metrics-port {port}"):
            MetricsServer(port).start()


def test_off_unless_the_runner_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(exporter.ENV_DIR, raising=False)

    def report(rec: Any) -> None:
        pass

    assert wrap_report(report, None) is report

    class Opts:
        metrics_port = None
        metrics_server = None

    assert open_run(Opts(), "r", SCENARIO, "m") is None


@pytest.mark.parametrize("mode", [{}, {"distributed": 2}], ids=["load-process", "master+2-workers"])
def test_run_scenario_final_values_equal_the_summary(tmp_path: Path, mode: dict[str, int]) -> None:
    """End to end through the runner: the served final values equal summary.json exactly; with a
    Locust master and 2 workers too (the workers ship their counts, the master writes them once)."""
    from harness.run import RunOptions, run_scenario

    scenario = Scenario.model_validate(
        {
            "name": "exact",
            "seed": 2,
            "load": {"concurrency": 4, "requests": 24},
            "warmup": {"requests": 2},
            "workload": {
                "classes": [
                    {
                        "name": "x",
                        "input_tokens": {"dist": "uniform", "min": 32, "max": 128},
                        "output_tokens": {"dist": "uniform", "min": 8, "max": 40},
                    },
                    {"name": "y", "input_tokens": 64, "output_tokens": 100},
                ]
            },
        }
    )
    server = MetricsServer(0).start()
    try:
        summary = run_scenario(
            scenario,
            RunOptions(
                out_dir=tmp_path / "run",
                show_progress=False,
                write_report=False,
                metrics_server=server,
                labels={"config": "k"},
                **mode,
            ),
        )
        page = _scrape(server.url)  # the run has closed: frozen final values
    finally:
        server.close()
    s = summary.model_dump(mode="json")

    def total(family: str, suffix: str, **labels: str) -> float:
        return sum(
            x.value
            for x in page[family].samples
            if x.name.endswith(suffix) and all(x.labels.get(k) == v for k, v in labels.items())
        )

    assert total("harness_requests", "_total", phase="measure", outcome="ok") == s["requests"]["completed"] == 24
    assert total("harness_requests", "_total", phase="warmup") == 2
    assert total("harness_requests_sent", "_total") == 26
    for ours, theirs in (("ttft", "ttft"), ("itl", "itl_token"), ("tpot", "tpot"), ("e2e", "e2e")):
        count = total(f"harness_{ours}_seconds", "_count", config="k")
        assert count == s["latency_ms"][theirs]["count"], ours
        mean_ms = total(f"harness_{ours}_seconds", "_sum") / count * 1e3  # the same samples as the HDR histograms
        assert mean_ms == pytest.approx(s["latency_ms"][theirs]["mean"], rel=1e-6), ours
    assert total("harness_output_tokens", "_total") == s["tokens"]["output_total"]
    assert total("harness_input_tokens", "_total") == s["tokens"]["input_total"]
    for gauge in ("harness_in_flight_requests", "harness_active_users"):  # exited processes: gone or 0
        assert gauge not in page or total(gauge, "") == 0


CHILD_TWICE = r"""
import json, sys
from harness.load import live_metrics
from harness.metrics.record import RequestRecord
class Ctrl:
    def new_record(self, item):
        return RequestRecord(index=item, class_name="k", sent_ns=10**9, chunk_ns=[2 * 10**9], chunk_tokens=[1], output_tokens=1)
for run in range(2):            # a long-lived process (distributed worker) installs once per run
    ctrl = Ctrl()
    report = live_metrics.wrap_report(lambda rec: None, ctrl)
    for i in range(3):
        report(ctrl.new_record(i))
assert live_metrics._SINK is not None
"""  # the final flush happens at exit (atexit)


def test_one_sink_per_process_across_installs(tmp_path: Path) -> None:
    run = RunMetrics(None, "run-5", SCENARIO, "m")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD_TWICE], env=run.env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        fams = _families(run)
    finally:
        run.close()
    assert sum(s.value for s in fams["harness_requests"].samples if s.name.endswith("_total")) == 6
    assert [s.value for s in fams["harness_requests_sent"].samples if s.name.endswith("_total")] == [6]
    assert [s.value for s in fams["harness_ttft_seconds"].samples if s.name.endswith("_count")] == [6]
