"""The load controller without Locust: phases, hand-out, quotas, intended times, recording.

The controller's clock (`perf_ns`) is replaced by a hand-driven one, so every phase change is
decided by the test, not by how fast this machine is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.load import controller as ctl
from harness.load import sessions
from harness.load.controller import DONE, DRAIN, MEASURE, WARMUP, LoadController
from harness.load.plan import LoadPlan
from harness.metrics.recorder import ALL
from harness.scenario import Scenario
from harness.workload.generator import WorkloadGenerator

S = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000 * S

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * S)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    for module in (ctl, sessions):  # the controller and its session part
        monkeypatch.setattr(module, "perf_ns", c)
    return c


def scenario(load: dict[str, Any], warmup: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    data = {
        "name": "t",
        "seed": 3,
        "load": load,
        "warmup": warmup or {},
        "slo": {"ttft_ms": 100},
        "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]},
        **extra,
    }
    return Scenario.model_validate(data).model_dump(mode="json")


def make(tmp_path: Path, sc: dict[str, Any], worker: int = 0, workers: int = 1) -> LoadController:
    plan = LoadPlan(
        scenario=sc, target_url="http://127.0.0.1:9", model="m", out_dir=str(tmp_path), worker=worker, workers=workers
    )
    return LoadController(plan)


def drain_items(c: LoadController, clock: Clock | None = None, step_s: float = 0.0) -> list:
    items = []
    while (item := c.next_item()) is not None:
        items.append(item)
        if clock is not None:
            clock.advance(step_s)
    return items


def finish(c: LoadController, item, chunks_after_s=(0.05, 0.06), error: str | None = None, clock: Clock | None = None):
    rec = c.new_record(item)
    base = item.intended_ns if item.intended_ns is not None else (clock.now if clock else 0)
    rec.sent_ns = base
    rec.chunk_ns = [base + int(t * S) for t in chunks_after_s]
    rec.chunk_tokens = [1] * len(chunks_after_s)
    rec.output_tokens = len(chunks_after_s)
    rec.input_tokens = item.planned.input_tokens + 2
    rec.error_kind = error
    return c.finish(rec)


def test_closed_loop_request_count(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 2, "requests": 5}))
    done: list[int] = []
    c.on_done = lambda: done.append(1)
    c.start()
    assert c.phase == MEASURE
    items = drain_items(c)
    assert [i.planned.index for i in items] == [0, 1, 2, 3, 4]
    assert all(i.intended_ns is None and not i.planned.warmup for i in items)
    assert c.phase == DRAIN and c.in_flight == 5
    gen = WorkloadGenerator(Scenario.model_validate(c.plan.scenario))
    assert [i.planned for i in items] == [gen.request(k) for k in range(5)]
    for it in items[:-1]:
        finish(c, it, clock=clock)
    assert c.phase == DRAIN and not done
    finish(c, items[-1], clock=clock)
    assert c.phase == DONE and done == [1]
    assert c.next_item() is None


def test_closed_loop_duration(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 2, "duration_s": 10}))
    c.start()
    items = []
    for _ in range(4):
        items.append(c.next_item())
        clock.advance(2.4)
    assert c.phase == MEASURE  # 9.6 s
    clock.advance(0.4)
    assert c.next_item() is None and c.phase == DRAIN


def test_request_quota_split_across_workers(tmp_path: Path, clock: Clock) -> None:
    per_worker = []
    for w in range(3):
        (tmp_path / str(w)).mkdir()
        c = make(tmp_path / str(w), scenario({"concurrency": 3, "requests": 7}), worker=w, workers=3)
        c.start()
        per_worker.append([i.planned.index for i in drain_items(c)])
    assert per_worker == [[0, 3, 6], [1, 4], [2, 5]]


def test_open_loop_constant_intended_times(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"rate": 10, "arrival": "constant", "duration_s": 1}))
    c.start()
    start = c.window_start_ns
    items = drain_items(c)
    assert [i.intended_ns - start for i in items] == [int(k * 0.1 * S) for k in range(10)]
    assert c.phase == DRAIN  # the 11th arrival (at 1.0 s) is outside the window


def test_open_loop_window_lasts_the_duration(tmp_path: Path, clock: Clock) -> None:
    """Arrivals are handed out ahead of time; the window is still duration_s long, so that
    throughput is requests / duration, not requests / time to the last completion."""
    c = make(tmp_path, scenario({"rate": 2, "arrival": "constant", "duration_s": 3}))
    c.start()
    items = drain_items(c)  # all six handed out at t=0, the window "ends" at once
    assert len(items) == 6 and c.phase == DRAIN
    for it in items:
        clock.now = it.intended_ns
        finish(c, it, chunks_after_s=(0.01,), clock=clock)
    assert c.phase == DONE
    assert c.result()["window"]["duration_s"] == pytest.approx(3.0)
    # a completion after the nominal end extends the window
    (tmp_path / "x").mkdir()
    c2 = make(tmp_path / "x", scenario({"rate": 2, "arrival": "constant", "duration_s": 3}))
    c2.start()
    items = drain_items(c2)
    clock.advance(4.5)
    for it in items:
        finish(c2, it, clock=clock)
    assert c2.result()["window"]["duration_s"] == pytest.approx(4.5)


def test_open_loop_workers_partition_the_arrivals(tmp_path: Path, clock: Clock) -> None:
    sc = scenario({"rate": 20, "arrival": "poisson", "requests": 40})
    (tmp_path / "s").mkdir()
    single = make(tmp_path / "s", sc)
    single.start()
    want = [(i.planned.index, i.intended_ns - single.window_start_ns) for i in drain_items(single)]
    got = []
    for w in range(2):
        (tmp_path / f"w{w}").mkdir()
        c = make(tmp_path / f"w{w}", sc, worker=w, workers=2)
        c.start()
        got += [(i.planned.index, i.intended_ns - c.window_start_ns) for i in drain_items(c)]
    assert len(want) == 40 and sorted(got) == want


def test_warmup_by_requests_then_measure(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 2, "requests": 3}, {"requests": 2}))
    c.start()
    assert c.phase == WARMUP
    warm = [c.next_item(), c.next_item()]
    assert all(i.planned.warmup for i in warm) and c.phase == WARMUP
    clock.advance(1.5)
    first = c.next_item()
    assert c.phase == MEASURE and not first.planned.warmup and first.planned.index == 0
    rest = drain_items(c)
    for it in [*warm, first, *rest]:
        finish(c, it, clock=clock)
    assert c.phase == DONE
    # warmup finished requests are neither measured nor written
    assert c.metrics.classes[ALL].counts["completed"] == 3 and c.warm_done == 2
    c.close()
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 3 and not any(json.loads(rec)["warmup"] for rec in lines)
    assert c.result()["window"]["warmup_s"] == pytest.approx(1.5)


def test_warmup_by_duration(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 1, "requests": 1}, {"duration_s": 2}))
    c.start()
    n = 0
    while c.phase == WARMUP:
        item = c.next_item()
        if item is not None and item.planned.warmup:
            n += 1
        clock.advance(0.5)
    assert n == 4  # at 0, 0.5, 1.0, 1.5 s; the call at 2.0 s starts the window


def test_stop_during_measure_drains_in_flight(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 2, "duration_s": 60}))
    c.start()
    a, b = c.next_item(), c.next_item()
    clock.advance(1)
    c.stop()
    assert c.phase == DRAIN and c.next_item() is None
    finish(c, a, clock=clock)
    finish(c, b, clock=clock, error="timeout")
    assert c.phase == DONE
    r = c.result()
    counts = r["metrics"][ALL]["counts"]
    assert (counts["completed"], counts["failed"], r["sent"]) == (1, 1, 2)


def test_stop_during_warmup_measures_nothing(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 1, "requests": 5}, {"requests": 3}))
    c.start()
    w = c.next_item()
    c.stop()
    assert c.phase == DRAIN
    finish(c, w, clock=clock)
    assert c.phase == DONE and c.metrics.classes[ALL].counts["completed"] == 0


def test_result_window_usage_and_slo(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 2, "requests": 2}))
    c.start()
    a, b = c.next_item(), c.next_item()
    assert c.next_item() is None  # window end (stop condition met) at t=0
    assert finish(c, a, chunks_after_s=(0.05, 0.06), clock=clock) is True  # TTFT 50 ms <= 100
    clock.advance(3)
    assert finish(c, b, chunks_after_s=(0.2,), clock=clock) is False  # TTFT 200 ms > 100
    r = c.result()
    assert r["window"]["duration_s"] == pytest.approx(3.0)  # extended to the last completion
    assert r["usage_check"]["prompt_tokens_mean_diff"] == 2 and r["usage_check"]["max_diff"] == 2
    assert r["usage_check"]["tokenizer"] == "builtin-words-v1"
    assert r["metrics"][ALL]["counts"]["good"] == 1


def test_requests_jsonl_written_incrementally(tmp_path: Path, clock: Clock) -> None:
    c = make(tmp_path, scenario({"concurrency": 1, "requests": 3}))
    c.start()
    items = drain_items(c)
    finish(c, items[0], clock=clock)
    c.progress()  # flushes: what a crash after this point leaves on disk
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["i"] == 0
    c.close()


def test_cpu_samples_cover_the_window_only(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up CPU (building the controller, spawning users) must not read as a saturated client."""
    t = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(ctl.time, "process_time", lambda: t["cpu"])
    monkeypatch.setattr(ctl.time, "perf_counter", lambda: t["wall"])
    c = make(tmp_path, scenario({"concurrency": 1, "duration_s": 10}))
    t["cpu"] += 0.05
    t["wall"] += 0.05  # start-up: 100 % CPU
    c.start()
    t["cpu"] += 0.01
    t["wall"] += 0.01  # spawning users: 100 % CPU, a very short interval
    c.progress()
    t["cpu"] += 0.2
    t["wall"] += 1.0  # the load: 20 %
    c.progress()
    assert c.tally.cpu_samples == [pytest.approx(20.0)]
    assert c.result()["client"]["cpu_max_pct"] == pytest.approx(20.0)


def test_request_payload_and_headers(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    sc = scenario(
        {"concurrency": 1, "requests": 1},
        target={"api_key_env": "MY_KEY", "headers": {"X-T": "1"}},
        sampling={"temperature": 0.5, "seed": 9, "extra_body": {"min_tokens": 4}},
    )
    plan = LoadPlan(
        scenario=sc,
        target_url="http://h:1",
        model="m",
        out_dir=str(tmp_path),
        api_key_env="MY_KEY",
        continuous_usage=True,
    )
    c = LoadController(plan)
    c.start()
    body = json.loads(c.next_item().payload)
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert (body["temperature"], body["seed"], body["min_tokens"], body["ignore_eos"], body["max_tokens"]) == (
        0.5,
        9,
        4,
        True,
        4,
    )
    assert c.spec.headers["Authorization"] == "Bearer sk-test" and c.spec.headers["X-T"] == "1"


@pytest.mark.parametrize(
    "load", [{"concurrency": 2, "requests": 7}, {"rate": 5, "arrival": "poisson", "duration_s": 3}]
)
def test_prefetch_changes_nothing_handed_out(tmp_path: Path, clock: Clock, load: dict[str, Any]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = make(tmp_path / "a", scenario(load))
    plain.start()
    want = [
        (i.planned, i.intended_ns - plain.window_start_ns if i.intended_ns else None, i.payload)
        for i in drain_items(plain)
    ]
    pre = make(tmp_path / "b", scenario(load))
    pre.start()
    got = []
    while True:
        pre.prefetch(limit=3, batch=2)
        item = pre.next_item()
        if item is None:
            break
        got.append((item.planned, item.intended_ns - pre.window_start_ns if item.intended_ns else None, item.payload))
    assert got == want and pre.sent == len(want)
    assert pre.prefetch(limit=3) == 0  # nothing after the window


@pytest.mark.parametrize("warmup", [{"duration_s": 3}, {"requests": 6}, {"requests": 50, "duration_s": 3}])
def test_open_loop_warmup_is_sent_before_the_window_opens(tmp_path: Path, clock: Clock, warmup: dict[str, Any]) -> None:
    """Open loop hands warmup arrivals out ahead of their intended times; the window must open only
    after the warmup schedule ended and every warmup request was sent (audit D1: the window opened at
    t~0 while the 3 s of warmup arrivals were still going out, so both schedules hit the engine)."""
    c = make(tmp_path, scenario({"rate": 2, "arrival": "constant", "duration_s": 4}, warmup))
    c.start()
    t0 = clock.now
    warm = []
    while True:
        item = c.next_item()
        if isinstance(item, ctl.Pause):
            break
        assert item is not None and item.planned.warmup
        warm.append(item)
    assert c.phase == WARMUP and len(warm) == 6  # 2/s for 3 s (or the 6 requests asked for)
    want_due = t0 + 3 * S  # the 7th arrival (request count) or the 3 s end (duration)
    assert item.until_ns == want_due
    clock.now = want_due
    # still not open while a warmup request is unsent (a busy user sends it late)
    for w in warm[:-1]:
        c.new_record(w)
    assert isinstance(c.next_item(), ctl.Pause) and c.phase == WARMUP
    c.new_record(warm[-1])
    clock.advance(0.01)
    first = c.next_item()
    assert c.phase == MEASURE and not first.planned.warmup
    assert c.window_start_ns >= max(w.intended_ns for w in warm)
    assert first.intended_ns >= c.window_start_ns
    assert c.result()["window"]["warmup_s"] == pytest.approx(3.01)


def measured_after_warmup(c: LoadController, clock: Clock, prefetch: bool) -> list:
    """Send the warmup (prefetching between hand-outs when asked), open the window, then take
    every measured arrival: (planned request, offset from the window's start, payload)."""
    c.start()
    built_in_warmup = 0
    while True:
        if prefetch:
            built_in_warmup += c.prefetch(limit=1024, batch=8)
        item = c.next_item()
        if isinstance(item, ctl.Pause):
            clock.now = item.until_ns
            continue
        assert item is not None
        if not item.planned.warmup:
            break
        c.new_record(item)
    assert c.phase == MEASURE
    taken = [item, *drain_items(c)]
    # the whole window built before it opened (and at most the one arrival past its end)
    assert not prefetch or len(taken) <= built_in_warmup <= len(taken) + 1
    return [(i.planned, i.intended_ns - c.window_start_ns, i.payload) for i in taken]


def test_open_loop_builds_the_window_arrivals_during_the_warmup(tmp_path: Path, clock: Clock) -> None:
    """When the window opens every free user takes an arrival at once: built then, the prompts
    held the event loop and a real vLLM trial's first six requests went out 45-153 ms late. They
    are built in the warmup's idle time instead; what is handed out is unchanged (same requests,
    same offsets, same bytes), nothing past the window's end is built, and closed loop (no burst)
    builds nothing before its window."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sc = scenario({"rate": 10, "arrival": "poisson", "duration_s": 3}, {"duration_s": 1})
    plain = measured_after_warmup(make(tmp_path / "a", sc), clock, prefetch=False)
    pre_c = make(tmp_path / "b", sc)
    pre = measured_after_warmup(pre_c, clock, prefetch=True)
    assert pre == plain and len(plain) >= 20
    assert all(offset < 3 * S for _, offset, _ in pre)
    closed = make(tmp_path, scenario({"concurrency": 2, "requests": 7}, {"requests": 2}))
    closed.start()
    assert closed.phase == WARMUP and closed.prefetch(limit=64) == 0


def test_open_loop_progress_counts_only_sent_requests_in_flight(tmp_path: Path, clock: Clock) -> None:
    """Arrivals handed out ahead of their send time are not in flight, and the window is not
    draining before its end (audit D9: "5.0s req 8/150 in-flight 142 ... draining")."""
    c = make(tmp_path, scenario({"rate": 10, "arrival": "constant", "duration_s": 2}))
    c.start()
    items = drain_items(c)
    assert len(items) == 20 and c.phase == DRAIN  # all handed out at t=0: internally the hand-out is over
    line = c.progress()
    assert line["phase"] == MEASURE and line["in_flight"] == 0 and line["scheduled"] == 20 and line["sent"] == 0
    for it in items[:5]:
        c.new_record(it)
    clock.advance(0.45)
    line = c.progress()
    assert line["in_flight"] == 5 and line["sent"] == 5 and line["phase"] == MEASURE
    clock.advance(2)
    assert c.progress()["phase"] == DRAIN


def test_window_reports_its_drain(tmp_path: Path, clock: Clock) -> None:
    """The window includes the drain after the stop condition; summary.json says how much (audit D18)."""
    c = make(tmp_path, scenario({"concurrency": 2, "duration_s": 10}))
    c.start()
    items = [c.next_item(), c.next_item()]
    clock.advance(10)
    assert c.next_item() is None and c.phase == DRAIN
    clock.advance(3)
    for it in items:
        finish(c, it, clock=clock)
    w = c.result()["window"]
    assert w["duration_s"] == pytest.approx(13) and w["drain_s"] == pytest.approx(3)


def test_open_loop_request_count_drains_from_the_last_send(tmp_path: Path, clock: Clock) -> None:
    """Open loop with a request count: every arrival is handed out at once, ahead of its send
    time; the window lasts until the last one is due and the drain runs from that send to the last
    completion (audit N4: `--rate 8 --requests 150` reported "window 29.0 s (incl. 28.8 s drain)"
    of a 20.7-s schedule, and "draining" from 1.1 s)."""
    c = make(tmp_path, scenario({"rate": 10, "arrival": "constant", "requests": 20}))
    c.start()
    items = drain_items(c)
    assert len(items) == 20 and c.phase == DRAIN  # internally the hand-out is over
    last_send = max(it.intended_ns for it in items)
    assert c.window_end_ns == last_send  # 1.9 s after the window opened
    assert c.progress()["phase"] == MEASURE  # not "draining" while sends are still due
    clock.advance(1.5)
    assert c.progress()["phase"] == MEASURE
    clock.advance(0.45)
    assert c.progress()["phase"] == DRAIN
    clock.advance(0.25)  # the last completion, 0.3 s after the last send
    for it in items:
        finish(c, it, clock=clock)
    w = c.result()["window"]
    assert w["drain_s"] == pytest.approx(0.3) and w["duration_s"] == pytest.approx(1.9 + 0.3)


def test_tick_closes_the_window_when_every_user_is_busy(tmp_path: Path, clock: Clock) -> None:
    """Closed loop: with both users inside stalled requests nobody calls next_item(); the window
    still closes on time (audit High 2: a 3-s window was still measuring at 99 s)."""
    c = make(tmp_path, scenario({"concurrency": 2, "duration_s": 3}))
    c.start()
    a, b = c.next_item(), c.next_item()
    clock.advance(2.9)
    c.tick()
    assert c.phase == MEASURE
    clock.advance(0.2)
    c.tick()
    assert c.phase == DRAIN and c.next_item() is None
    finish(c, a, clock=clock)
    finish(c, b, clock=clock, error="cut")
    assert c.phase == DONE


def test_one_failure_repeated_stops_the_run_early(tmp_path: Path, clock: Clock) -> None:
    """Every request refused the same way (numbers in the message vary): stop with one reason."""
    lines: list[dict[str, Any]] = []
    c = LoadController(
        LoadPlan(
            scenario=scenario({"concurrency": 2, "duration_s": 600}),
            target_url="http://127.0.0.1:9",
            model="m",
            out_dir=str(tmp_path),
        ),
        emit=lines.append,
    )
    c.start()
    for i in range(60):
        item = c.next_item()
        if item is None:
            break
        rec = c.new_record(item)
        rec.error_kind, rec.error_detail = (
            "http_4xx",
            f"maximum context length is 4096 tokens, you requested {4100 + i}",
        )
        c.finish(rec)
    aborts = [line for line in lines if line.get("event") == "abort"]
    assert (
        len(aborts) == 1
        and "the last 50 requests all failed the same way (http_4xx: maximum context" in aborts[0]["reason"]
    )
    assert c.phase == DONE and c.result()["abort_reason"] == aborts[0]["reason"]
    assert c.result()["metrics"][ALL]["counts"]["failed"] == 50


def test_identical_error_lines_are_capped_counts_exact(tmp_path: Path, clock: Clock) -> None:
    from harness.load import failures

    c = make(tmp_path, scenario({"concurrency": 2, "requests": 30}))
    c.failures = failures.FailureWatch(streak=10_000, lines_per_reason=5)
    c.start()
    for i, item in enumerate(drain_items(c)):
        finish(c, item, clock=clock, error="http_5xx" if i % 3 else None)
    c.close()
    lines = [json.loads(rec) for rec in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert (
        sum(1 for rec in lines if rec["error"] == "http_5xx") == 5
        and sum(1 for rec in lines if rec["error"] is None) == 10
    )
    r = c.result()
    assert r["metrics"][ALL]["counts"]["failed"] == 20 and r["error_lines_suppressed"] == {"http_5xx": 15}
