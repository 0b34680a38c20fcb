"""Distributed load: a Locust master and 2 worker processes against the simulated engine.

The master merges the workers' HDR histograms; these tests check that nothing is lost or
changed on the way: counts equal the sum over workers and over requests.jsonl, the merged
histograms equal the per-worker ones merged by hand, and the percentiles equal those of the
union of the per-request samples within the histogram's precision. The second test is the
headless-master trap (LOCUST.md §3): `locust --headless --processes 2 -t` with requests still
in flight when the time is up must still deliver every worker's final result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.client import http_stream
from harness.metrics.percentile import rank
from harness.metrics.recorder import ALL, MetricSet
from harness.run.provider import TargetProvider
from harness.run.target import EmbeddedSim

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "harness" / "ui" / "locustfile.py"
#: HDR keeps 3 significant digits: a reported percentile is the top of a bucket at most ~0.1% wide
REL_TOL = 2e-3


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory):
    with TargetProvider(["--sim-speed", "4", "--max-num-seqs", "64"], tmp_path_factory.mktemp("sim")) as targets:
        yield targets.start()


def _scenario(path: Path, load: dict, warmup: dict | None = None) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "dist",
                "seed": 3,
                "load": load,
                "warmup": warmup or {"requests": 4},
                "workload": {
                    "classes": [
                        {
                            "name": "short",
                            "weight": 2,
                            "input_tokens": {"dist": "uniform", "min": 16, "max": 128},
                            "output_tokens": {"dist": "uniform", "min": 8, "max": 48},
                        },
                        {
                            "name": "long",
                            "weight": 1,
                            "input_tokens": 256,
                            "output_tokens": {"dist": "uniform", "min": 40, "max": 120},
                        },
                    ]
                },
            }
        )
    )
    return path


def _requests(run: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in lines if not r["warmup"]]


def _exact(values: list[float], pct: float) -> float:
    """The pct-th percentile of the samples with the harness's rank rule (nearest rank,
    harness.metrics.percentile), so only the bucket precision separates it from the histogram's."""
    s = sorted(values)
    return s[rank(pct, len(s)) - 1]


def _itl_token_ms(r: dict) -> list[float]:
    """Per-token ITL samples of one request, rebuilt from its chunk offsets (µs) and token counts."""
    offs, toks = r["chunk_offsets_us"], r["chunk_tokens"]
    out: list[float] = []
    for a, b, k in zip(offs[:-1], offs[1:], toks[1:], strict=True):
        gap = (b - a) / 1000
        out.extend([gap / k] * k if k > 1 else [gap])
    return out


def test_master_and_two_workers_merge_losslessly(sim: EmbeddedSim, tmp_path: Path) -> None:
    scen = _scenario(tmp_path / "dist.yaml", {"concurrency": 6, "requests": 120})
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scen),
            "--distributed",
            "2",
            "--target",
            sim.url,
            "--out",
            str(out),
            "--no-report",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    workers = [json.loads((out / f"load_result.w{k}.json").read_text()) for k in (0, 1)]
    assert not list(out.glob("load_result.json")), "a distributed run writes one result per worker"
    assert summary["client"]["processes"] == 2 and summary["status"] == "complete"
    # the workers' reader travels in their results: native where it was built (auto), else python
    assert summary["client"]["reader"] == http_stream.READER == workers[0]["client"]["reader"]

    # counts: merged == sum over workers == requests.jsonl
    reqs = _requests(out)
    ok = [r for r in reqs if r["error"] is None]
    per_worker = [w["metrics"][ALL]["counts"] for w in workers]
    assert summary["requests"]["completed"] == sum(c["completed"] for c in per_worker) == len(ok) == 120
    assert all(c["completed"] > 0 for c in per_worker)
    assert (
        summary["tokens"]["output_total"]
        == sum(c["output_tokens"] for c in per_worker)
        == sum(r["output_tokens"] for r in ok)
    )
    assert summary["tokens"]["input_total"] == sum(c["input_tokens"] for c in per_worker)
    for name in ("short", "long"):
        assert summary["per_class"][name]["requests"]["completed"] == sum(
            w["metrics"][name]["counts"]["completed"] for w in workers if name in w["metrics"]
        )

    # disjoint shares of one deterministic stream: every index once, worker k has the indices = k mod 2
    indices = sorted(r["i"] for r in reqs)
    assert indices == list(range(120))
    pid_of_parity = {}
    for r in reqs:
        pid = r["id"].rsplit("-", 1)[1]
        assert pid_of_parity.setdefault(r["i"] % 2, pid) == pid
    assert len(set(pid_of_parity.values())) == 2

    # the merged histograms are exactly the per-worker histograms merged by hand
    by_hand = MetricSet()
    for w in workers:
        by_hand.merge_dict(w["metrics"])
    merged = MetricSet.from_dict(json.loads((out / "histograms.json").read_text()))
    hand_classes, merged_classes = by_hand.classes, merged.classes
    assert set(hand_classes) == set(merged_classes) == {ALL, "short", "long"}
    for name, cm in hand_classes.items():
        for metric, hist in cm.hist.items():
            other = merged_classes[name].hist[metric]
            assert hist.values() == other.values(), (name, metric)
            assert (hist.count, hist.sum, hist.min, hist.max) == (other.count, other.sum, other.min, other.max)

    # percentiles equal those of the union of the samples, within the histogram's precision
    lat = summary["latency_ms"]
    samples = {
        "ttft": [r["ttft_ms"] for r in ok],
        "e2e": [r["e2e_ms"] for r in ok],
        "tpot": [r["tpot_ms"] for r in ok if r["tpot_ms"] is not None],
        "itl_token": [v for r in ok for v in _itl_token_ms(r)],
    }
    for metric, values in samples.items():
        assert lat[metric]["count"] == len(values), metric
        for p in ("p50", "p90", "p99"):
            exact = _exact(values, float(p[1:]))
            abs_tol = 0.002 if metric == "itl_token" else 1e-6  # offsets in requests.jsonl are whole µs
            assert lat[metric][p] == pytest.approx(exact, rel=REL_TOL, abs=abs_tol), (metric, p)
        assert lat[metric]["max"] == pytest.approx(max(values), rel=1e-9, abs=abs_tol)


def test_headless_master_with_run_time_waits_for_every_worker(sim: EmbeddedSim, tmp_path: Path) -> None:
    # long outputs: requests are in flight when -t ends the test; they must drain and be reported
    scen = _scenario(tmp_path / "long.yaml", {"concurrency": 6, "duration_s": 600}, {"requests": 0})
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--processes",
            "2",
            "-t",
            "3s",
            "--scenario",
            str(scen),
            "--host",
            sim.url,
            "--results",
            str(results),
            "--no-report",
            "--only-summary",
            "--stop-grace",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = list(results.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    workers = [json.loads((run / f"load_result.w{k}.json").read_text()) for k in (0, 1)]
    assert summary["client"]["processes"] == 2
    assert summary["client"]["cut_at_end"] == 0  # in-flight requests finished before the workers stopped
    assert summary["status"] == "partial"  # stopped by -t before the scenario's 600 s
    assert any("stopped before" in w for w in summary["validity"]["warnings"])
    ok = [r for r in _requests(run) if r["error"] is None]
    completed = [w["metrics"][ALL]["counts"]["completed"] for w in workers]
    # each worker's requests in flight at -t were waited for (a worker that started none before -t
    # on a loaded box reports 0: a valid result, asserted by the same equalities)
    assert [w["sent"] for w in workers] == completed
    assert summary["requests"]["completed"] == sum(completed) == len(ok) > 0
    assert summary["client"]["sent"] == len(ok)  # every request handed out was measured to completion


def test_agentic_sessions_stay_on_one_worker_under_distributed(sim: EmbeddedSim, tmp_path: Path) -> None:
    """Issue 28: a session, its tool-call turns and its sub-agents are one conversation and must
    go out from one load process (its history and prefix live there); with --distributed 2 every
    session's requests carry one worker's pid, both workers carry sessions, and the merged summary
    has the agentic block."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(ROOT / "scenarios" / "agentic_mix.yaml"),
            "--distributed",
            "2",
            "--target",
            sim.url,
            "--duration",
            "8",
            "--out",
            str(out),
            "--no-report",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["client"]["processes"] == 2 and summary["status"] == "complete"
    reqs = [r for r in _requests(out) if r["error"] is None]
    pids_of_session: dict[int, set[str]] = {}
    turns_of_session: dict[int, int] = {}
    for r in reqs:
        pids_of_session.setdefault(r["i"], set()).add(r["id"].rsplit("-", 1)[1])
        turns_of_session[r["i"]] = turns_of_session.get(r["i"], 0) + 1
    multi = [i for i, n in turns_of_session.items() if n > 1]
    assert len(multi) >= 4, turns_of_session  # sessions with tool calls: several requests each
    assert all(len(pids_of_session[i]) == 1 for i in multi), pids_of_session
    assert len({p for i in multi for p in pids_of_session[i]}) == 2  # both workers ran sessions
    assert summary["sessions"]["agent"]["tool_calls"] > 0, summary["sessions"]["agent"]


DEAF_WORKER = """
import sys, gevent, locust
from locust.env import Environment
env = Environment(events=locust.events)
env.create_worker_runner("127.0.0.1", int(sys.argv[1]))  # connects (client_ready), registers nothing
gevent.sleep(30)
"""


def test_the_master_hands_out_work_only_to_a_worker_that_listens(tmp_path: Path) -> None:
    """Locust counts a worker ready at its connect, before the harness agent in it has registered
    its handlers: on a loaded box a plan reached a worker first, was dropped as an unknown message
    type, and the run waited for that worker forever. A worker is counted once it says it listens
    (harness_ready): one that only connects is not handed the plan, and the master says so."""
    import socket

    from harness.load.plan import LoadPlan
    from harness.scenario import Scenario

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    sc = Scenario.model_validate(
        {
            "name": "deaf",
            "load": {"concurrency": 1, "duration_s": 2},
            "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]},
        }
    )
    plan_path = tmp_path / "load_plan.json"
    LoadPlan(
        scenario=sc.model_dump(mode="json"), target_url="http://127.0.0.1:9", model="m", out_dir=str(tmp_path)
    ).write(plan_path)
    master = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.load.distributed",
            "master",
            str(plan_path),
            "--expect-workers",
            "1",
            "--port",
            str(port),
            "--connect-timeout",
            "6",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = subprocess.Popen([sys.executable, "-c", DEAF_WORKER, str(port)], cwd=ROOT)
    try:
        out, err = master.communicate(timeout=60)
    finally:
        for proc in (worker, master):
            proc.kill()
            proc.wait()
    assert master.returncode == 2, (out, err)
    assert "only 0 of 1 workers connected within 6 s" in err
    assert not (tmp_path / "requests.jsonl").exists()  # no collector began: nothing was handed out
