"""A fake vLLM metrics exporter for the telemetry integration tests (a separate process).

Real prometheus_client objects served by prometheus_client's own HTTP server, so the content
negotiation is the real one: a plain GET gets `vllm:` names, a Prometheus server negotiates
OpenMetrics and stores `vllm_` names (client_python #1177).

    python exporter.py --port P [--engines 2] [--tick 0.05] [--kv-step-s 0.5]

Control on stdin, one word a line; every command is answered with one JSON line on stdout:
  active  start the load pattern      idle   stop it (answers the increments so far: the truth)
  reset   fresh counters (an engine restart; send while idle)      quit
While active, per engine and tick: 100 prompt tokens (60 prefix hits), 20 generated tokens; every
5th tick one finished request (TTFT 0.15 s, E2E 1.2 s, queue 0.02 s, 20 ITL observations of
0.03 s), one preemption, and 4 drafts / 12 draft tokens / 7 accepted (3, 2, 2 by position).
With --dcgm it also serves DCGM framebuffer gauges for 2 GPUs (MiB, as dcgm-exporter does):
used 1000/500 idle, 70000/60000 while active, of 80000 each.
KV usage steps through 0.3, 0.6, 0.9, 0.6, one step per --kv-step-s of activity; idle it is 0.05.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0]
KV_LEVELS = [0.3, 0.6, 0.9, 0.6]
GPU_USED_MIB = [(1000, 70000), (500, 60000)]
GPU_TOTAL_MIB = 80000


class Swappable:
    """Delegates to the current inner registry, so `reset` can replace every metric at once."""

    def __init__(self) -> None:
        self.inner = CollectorRegistry()

    def collect(self):
        yield from self.inner.collect()


class Engine:
    def __init__(self, engines: int, kv_step_s: float = 0.5, dcgm: bool = False) -> None:
        self.kv_step_s = kv_step_s
        self.dcgm = dcgm
        self.engines = [str(i) for i in range(engines)]
        self.registry = CollectorRegistry(auto_describe=True)
        self.swap = Swappable()
        self.registry.register(self.swap)
        self.build()

    def build(self) -> None:
        r = CollectorRegistry()
        lab = ["model_name", "engine"]
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage", lab, registry=r)
        self.running = Gauge("vllm:num_requests_running", "running", lab, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", lab, registry=r)
        self.preempt = Counter("vllm:num_preemptions", "preemptions", lab, registry=r)
        self.prompt = Counter("vllm:prompt_tokens", "prompt tokens", lab, registry=r)
        self.gen = Counter("vllm:generation_tokens", "generation tokens", lab, registry=r)
        self.pq = Counter("vllm:prefix_cache_queries", "prefix queries", lab, registry=r)
        self.ph = Counter("vllm:prefix_cache_hits", "prefix hits", lab, registry=r)
        self.success = Counter("vllm:request_success", "finished", [*lab, "finished_reason"], registry=r)
        self.drafts = Counter("vllm:spec_decode_num_drafts", "drafts", lab, registry=r)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "draft tokens", lab, registry=r)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "accepted", lab, registry=r)
        self.per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos", "accepted by position", [*lab, "position"], registry=r
        )
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "ttft", lab, buckets=TTFT_BUCKETS, registry=r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "itl", lab, buckets=ITL_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "e2e", lab, buckets=E2E_BUCKETS, registry=r)
        self.queue = Histogram("vllm:request_queue_time_seconds", "queue", lab, buckets=E2E_BUCKETS, registry=r)
        info = Gauge(
            "vllm:cache_config_info",
            "cache config",
            ["block_size", "num_gpu_blocks", "kv_cache_size_tokens", "enable_prefix_caching", "engine"],
            registry=r,
        )
        for e in self.engines:
            info.labels("16", "1000", "16000", "True", e).set(1)
            self.kv.labels("m", e).set(0.05)
            self.running.labels("m", e).set(0)
            self.waiting.labels("m", e).set(0)
            for c in (self.preempt, self.prompt, self.gen, self.pq, self.ph):
                c.labels("m", e)
        if self.dcgm:
            gl = ["gpu", "UUID", "device", "modelName", "Hostname"]
            self.fb_used = Gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gl, registry=r)
            self.fb_free = Gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gl, registry=r)
            self.set_gpu(active=False)
        self.swap.inner = r
        self.truth = {
            k: 0
            for k in (
                "preemptions",
                "prompt_tokens",
                "generation_tokens",
                "prefix_queries",
                "prefix_hits",
                "requests",
                "drafts",
                "draft_tokens",
                "accepted",
            )
        }
        self.truth.setdefault("ticks", 0)

    def tick(self, active_s: float) -> None:
        n = self.truth["ticks"] = self.truth["ticks"] + 1
        level = KV_LEVELS[int(active_s / self.kv_step_s) % len(KV_LEVELS)]
        for e in self.engines:
            self.kv.labels("m", e).set(level)
            self.running.labels("m", e).set(round(level * 10))
            self.waiting.labels("m", e).set(2 if level >= 0.9 else 0)
            self.prompt.labels("m", e).inc(100)
            self.pq.labels("m", e).inc(100)
            self.ph.labels("m", e).inc(60)
            self.gen.labels("m", e).inc(20)
            self.truth["prompt_tokens"] += 100
            self.truth["prefix_queries"] += 100
            self.truth["prefix_hits"] += 60
            self.truth["generation_tokens"] += 20
            if n % 5 == 0:
                self.success.labels("m", e, "length").inc()
                self.preempt.labels("m", e).inc()
                self.ttft.labels("m", e).observe(0.15)
                self.e2e.labels("m", e).observe(1.2)
                self.queue.labels("m", e).observe(0.02)
                for _ in range(20):
                    self.itl.labels("m", e).observe(0.03)
                self.drafts.labels("m", e).inc(4)
                self.draft_tokens.labels("m", e).inc(12)
                self.accepted.labels("m", e).inc(7)
                for pos, k in (("0", 3), ("1", 2), ("2", 2)):
                    self.per_pos.labels("m", e, pos).inc(k)
                for key, k in (
                    ("requests", 1),
                    ("preemptions", 1),
                    ("drafts", 4),
                    ("draft_tokens", 12),
                    ("accepted", 7),
                ):
                    self.truth[key] += k

    def set_gpu(self, *, active: bool) -> None:
        if not self.dcgm:
            return
        for gpu, (idle_mib, busy_mib) in enumerate(GPU_USED_MIB):
            labels = (str(gpu), f"GPU-{gpu:04d}", f"nvidia{gpu}", "NVIDIA H200", "node-a")
            used = busy_mib if active else idle_mib
            self.fb_used.labels(*labels).set(used)
            self.fb_free.labels(*labels).set(GPU_TOTAL_MIB - used)

    def idle(self) -> None:
        self.set_gpu(active=False)
        for e in self.engines:
            self.kv.labels("m", e).set(0.05)
            self.running.labels("m", e).set(0)
            self.waiting.labels("m", e).set(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--tick", type=float, default=0.05)
    ap.add_argument("--kv-step-s", type=float, default=0.5)
    ap.add_argument("--dcgm", action="store_true")
    args = ap.parse_args()
    eng = Engine(args.engines, args.kv_step_s, args.dcgm)
    start_http_server(args.port, addr="127.0.0.1", registry=eng.registry)
    lock = threading.Lock()
    state = {"active": False, "since": 0.0, "active_s": 0.0, "quit": False}
    grand = {k: 0 for k in eng.truth}

    def loop() -> None:
        while not state["quit"]:
            time.sleep(args.tick)
            with lock:
                if state["active"]:
                    eng.tick(state["active_s"] + time.monotonic() - state["since"])

    threading.Thread(target=loop, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        with lock:
            if cmd == "active":
                state.update(active=True, since=time.monotonic())
                eng.set_gpu(active=True)
                print(json.dumps({"ok": cmd}), flush=True)
            elif cmd == "idle":
                if state["active"]:
                    state["active_s"] += time.monotonic() - state["since"]
                state["active"] = False
                eng.idle()
                print(json.dumps({k: grand[k] + v for k, v in eng.truth.items()}), flush=True)
            elif cmd == "peek":  # the truth so far, the engine left as it is
                print(json.dumps({k: grand[k] + v for k, v in eng.truth.items()}), flush=True)
            elif cmd == "reset":
                for k, v in eng.truth.items():
                    grand[k] += v
                eng.build()
                print(json.dumps({"ok": cmd}), flush=True)
            elif cmd == "quit":
                state["quit"] = True
                print(json.dumps({"ok": cmd}), flush=True)
                return
            else:
                print(json.dumps({"error": f"unknown command {cmd!r}"}), flush=True)


if __name__ == "__main__":
    main()
