"""Engine statistics and their `/metrics` exposition with vLLM's names, types, labels and buckets.

The hot paths (one observation per token) only bump plain Python numbers in `Stats`; a custom
collector turns them into Prometheus metric families at scrape time, in a private
`CollectorRegistry`. The exposition format is negotiated from the Accept header with
`prometheus_client.exposition.choose_encoder`, as vLLM's ASGI mount does.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from harness.sim.config import SimConfig
    from harness.sim.memory import MemoryPlan

# vllm/v1/metrics/buckets.py
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
#: the simulator's own lateness (not a vLLM metric): fine where a step lasts a few milliseconds
STEP_LAG_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > max_value:
                return tuple(out)
            out.append(v)
        exponent += 1


class Hist:
    """A fixed-bucket histogram: `observe` is a bisect and two additions."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):  # counts' last is the +Inf bucket
            acc += c
            out.append((floatToGoString(bound), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


class Stats:
    """Everything `/metrics` and the periodic log line report. Plain attributes, bumped inline."""

    def __init__(self, max_model_len: int, spec_k: int) -> None:
        self.created = time.time()
        self.num_running = 0
        self.num_waiting = 0
        self.kv_usage = 0.0
        self.lora_running = ""  # adapters of running / waiting requests, comma-separated (--enable-lora)
        self.lora_waiting = ""
        self.lora_loads = 0
        self.lora_swaps = 0
        self.num_preemptions = 0
        # simulated device memory and CUDA-graph recompiles (harness/sim/graphs.py)
        self.gpu_used_bytes = 0
        self.gpu_total_bytes = 0
        self.recompilations = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.prompt_tokens = 0
        self.prompt_tokens_cached = 0
        self.generation_tokens = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.ttft = Hist(TTFT_BUCKETS)
        self.itl = Hist(ITL_BUCKETS)
        self.tpot = Hist(ITL_BUCKETS)
        self.e2e = Hist(REQUEST_LATENCY_BUCKETS)
        self.queue = Hist(REQUEST_LATENCY_BUCKETS)
        self.inference = Hist(REQUEST_LATENCY_BUCKETS)
        self.prefill = Hist(REQUEST_LATENCY_BUCKETS)
        self.decode = Hist(REQUEST_LATENCY_BUCKETS)
        len_buckets = buckets_1_2_5(max_model_len)
        self.req_prompt_tokens = Hist(len_buckets)
        self.req_generation_tokens = Hist(len_buckets)
        self.req_max_tokens = Hist(len_buckets)
        self.iteration_tokens = Hist(ITERATION_TOKEN_BUCKETS)
        self.req_preemptions = Hist(PREEMPTION_BUCKETS)
        self.spec_k = spec_k
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.spec_accepted_per_pos = [0] * spec_k
        # the simulator's own lag (harness/sim/engine.py): how late each step's tokens went out
        # against its schedule, the time its schedule fell behind for good (a step started more
        # than SLIP_S after the previous one was due), and the modelled work it was scheduling
        self.step_lag = Hist(STEP_LAG_BUCKETS)
        self.step_lag_max = 0.0
        self.behind_s = 0.0
        self.modelled_s = 0.0
        self.steps = 0
        # for the periodic log line
        self.log_prompt_tokens = 0
        self.log_generation_tokens = 0
        self.log_queries = 0
        self.log_hits = 0

    def lag(self, lag_s: float) -> None:
        """One step (or scripted tick) that went out `lag_s` after it was due."""
        lag_s = max(0.0, lag_s)
        self.step_lag.observe(lag_s)
        if lag_s > self.step_lag_max:
            self.step_lag_max = lag_s

    def lag_summary(self) -> str:
        """One line for the log: how far behind its own schedule the simulator fell."""
        busy = self.modelled_s + self.behind_s
        share = f" ({100 * self.behind_s / busy:.1f}% of {busy:.1f} s busy)" if busy > 0 else ""
        mean = self.step_lag.sum / self.steps if self.steps else 0.0
        return (
            f"Simulator lag: fell behind its schedule by {self.behind_s:.3f} s in total{share}; "
            f"{self.steps} steps, lag mean {mean * 1e3:.2f} ms, max {self.step_lag_max * 1e3:.1f} ms"
        )

    def finish(
        self,
        reason: str,
        arrival: float,
        first_sched: float | None,
        first_token: float | None,
        end: float,
        prompt_tokens: int,
        output_tokens: int,
        max_tokens: int,
        preemptions: int,
    ) -> None:
        """Per-request observations at finish (times from time.perf_counter())."""
        self.success[reason] += 1
        self.e2e.observe(end - arrival)
        self.req_prompt_tokens.observe(prompt_tokens)
        self.req_generation_tokens.observe(output_tokens)
        self.req_max_tokens.observe(max_tokens)
        self.req_preemptions.observe(preemptions)
        if first_sched is not None:
            self.queue.observe(first_sched - arrival)
            self.inference.observe(end - first_sched)
            if first_token is not None:
                self.prefill.observe(first_token - first_sched)
        if first_token is not None:
            self.decode.observe(end - first_token)
            if output_tokens > 1:
                self.tpot.observe((end - first_token) / (output_tokens - 1))


class SimCollector:
    """Builds vLLM's metric families from `Stats` on each scrape."""

    def __init__(self, stats: Stats, cfg: SimConfig, plan: MemoryPlan | None) -> None:
        self.stats = stats
        self.cfg = cfg
        self.plan = plan
        self.model_name = cfg.served_model_name

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        base = ["model_name", "engine"]
        lv = [self.model_name, "0"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=base)
            g.add_metric(lv, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=base)
            c.add_metric(lv, value, created=s.created)
            return c

        def hist(name: str, doc: str, h: Hist) -> HistogramMetricFamily:
            m = HistogramMetricFamily(name, doc, labels=base)
            m.add_metric(lv, h.cumulative(), h.sum)
            return m

        yield gauge("vllm:num_requests_running", "Number of requests in model execution batches.", s.num_running)
        yield gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.num_waiting)
        w = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason", "Number of requests waiting, by reason.", labels=[*base, "reason"]
        )
        w.add_metric([*lv, "capacity"], s.num_waiting)
        w.add_metric([*lv, "deferred"], 0)
        yield w
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv_usage)
        yield counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", s.prefix_queries
        )
        yield counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", s.prefix_hits
        )
        yield counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", s.num_preemptions)
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
        src = CounterMetricFamily(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", labels=[*base, "source"]
        )
        src.add_metric([*lv, "local_compute"], s.prompt_tokens - s.prompt_tokens_cached, created=s.created)
        src.add_metric([*lv, "local_cache_hit"], s.prompt_tokens_cached, created=s.created)
        src.add_metric([*lv, "external_kv_transfer"], 0, created=s.created)
        yield src
        yield counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", s.prompt_tokens_cached
        )
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", s.generation_tokens)
        ok = CounterMetricFamily(
            "vllm:request_success", "Count of successfully processed requests.", labels=[*base, "finished_reason"]
        )
        for reason, n in s.success.items():
            ok.add_metric([*lv, reason], n, created=s.created)
        yield ok
        yield hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft)
        yield hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl)
        yield hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            s.tpot,
        )
        yield hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e)
        yield hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", s.queue)
        yield hist(
            "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", s.inference
        )
        yield hist(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", s.prefill
        )
        yield hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", s.decode)
        yield hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", s.req_prompt_tokens)
        yield hist("vllm:request_generation_tokens", "Number of generation tokens processed.", s.req_generation_tokens)
        yield hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", s.req_max_tokens)
        yield hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", s.iteration_tokens)
        yield hist("vllm:request_num_preemptions", "Number of preemptions per finished request.", s.req_preemptions)
        # not vLLM metrics: the simulator says when it could not keep its own schedule (a busy
        # host), so the harness can mark the run invalid instead of reporting a slower model
        yield hist(
            "sim_step_lag_seconds",
            "SIMULATOR lag: how late each engine step's (scripted: each timer tick's) "
            "tokens went out against the simulator's own schedule; not a vLLM metric.",
            s.step_lag,
        )
        yield counter(
            "sim_behind_seconds",
            "SIMULATOR lag: total time the simulator's schedule fell behind and "
            "did not recover (steps started late); not a vLLM metric.",
            s.behind_s,
        )
        yield counter(
            "sim_modelled_seconds",
            "SIMULATOR: total modelled engine-step time it scheduled (the busy "
            "time its cost model asked for); not a vLLM metric.",
            s.modelled_s,
        )
        yield gauge(
            "sim_step_lag_max_seconds",
            "SIMULATOR lag: the largest step lag since start; not a vLLM metric.",
            s.step_lag_max,
        )
        if self.plan is not None:
            yield self._cache_config_info()
        if s.gpu_total_bytes:  # not a vLLM metric: a simulator has no NVML, so it says what its device holds
            yield gauge(
                "sim_gpu_memory_used_bytes",
                "SIMULATED GPU memory used on the device (startup level + CUDA-graph "
                "pool growth for uncaptured batch sizes + other processes); not a vLLM metric.",
                s.gpu_used_bytes,
            )
            yield gauge(
                "sim_gpu_memory_total_bytes",
                "SIMULATED GPU memory capacity (--sim-gpu-memory-gib); not a vLLM metric.",
                s.gpu_total_bytes,
            )
        if self.cfg.lora is not None:
            # vLLM: labels only (no model_name/engine), the value is the time of the last update
            g = GaugeMetricFamily(
                "vllm:lora_requests_info",
                "Running stats on lora requests.",
                labels=["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
            )
            g.add_metric([str(self.cfg.lora.max_loras), s.lora_waiting, s.lora_running], time.time())
            yield g
        if self.cfg.speculative is not None:
            yield counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", s.spec_drafts)
            yield counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", s.spec_draft_tokens)
            yield counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", s.spec_accepted)
            pos = CounterMetricFamily(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                labels=[*base, "position"],
            )
            for i, n in enumerate(s.spec_accepted_per_pos):
                pos.add_metric([*lv, str(i)], n, created=s.created)
            yield pos

    def _cache_config_info(self) -> GaugeMetricFamily:
        cfg, plan = self.cfg, self.plan
        assert plan is not None
        info = {
            "block_size": str(cfg.block_size),
            "cache_dtype": cfg.kv_cache_dtype,
            "calculate_kv_scales": "False",
            "cpu_offload_gb": "0",
            "enable_prefix_caching": str(cfg.enable_prefix_caching),
            "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
            "is_attention_free": "False",
            "kv_cache_max_concurrency": f"{plan.max_concurrency:.2f}",
            "kv_cache_memory_bytes": str(cfg.kv_cache_memory_bytes),
            "kv_cache_size_tokens": str(plan.kv_cache_size_tokens),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(plan.num_gpu_blocks),
            "num_gpu_blocks_override": str(cfg.num_gpu_blocks_override),
            "prefix_caching_hash_algo": "sha256",
            "sliding_window": "None",
            "swap_space": "4",
        }
        g = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=[*list(info), "engine"]
        )
        g.add_metric([*list(info.values()), "0"], 1.0)
        return g


def make_registry(collector: SimCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """Body and Content-Type for a scrape, negotiated like vLLM's prometheus mount."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
