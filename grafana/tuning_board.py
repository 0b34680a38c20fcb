"""The tuning dashboard: the tuning guides' record list, what users feel (harness_ metrics) beside
why (engine metrics, vLLM or SGLang names, GPU memory from DCGM).

The client latency panels iterate the metric table (harness/metrics/table.py, place "grafana"):
each such metric gets a p99 stat, a timeseries (beside the engine's own histogram where
ENGINE_TWINS names one) and a line of the mean-latency panel, so a new metric needs no edit here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard import (
    GPU,
    GPU_VAR,
    HARNESS_VARS,
    MEASURED_OK,
    NOT_OK,
    OK,
    QS,
    RI,
    Board,
    both,
    client_vs_engine,
    eng,
    engine_variables,
    h,
    mean,
    quantile,
    ratio,
    sgl,
    t,
    var_datasource,
    vllm,
)

from harness.metrics.table import BY_NAME, Metric, shown


@dataclass(frozen=True)
class Twin:
    """How the board shows one client metric: titles, and the engine histogram that means the same."""

    title: str  # the timeseries panel
    stat: str  # the p99 stat
    engine: str | None = None  # __name__ regex of the engine's _bucket series (both engines); None: client only
    description: str = ""


#: metric table name -> its panel texts and engine counterpart (engine names are Grafana's business,
#: not the table's); a metric without an entry gets its table label and a client-only panel
ENGINE_TWINS: dict[str, Twin] = {
    "ttft": Twin(
        "TTFT",
        "TTFT p99 (client)",
        both("time_to_first_token_seconds_bucket", "time_to_first_token_seconds_bucket"),
        "Client: first content chunk, from the intended send in open loop. Engine: its own histogram.",
    ),
    "itl_token": Twin(
        "ITL (per token)",
        "ITL p99 (client, per token)",
        both("inter_token_latency_seconds_bucket", "inter_token_latency_seconds_bucket"),
        "Client: a chunk of k tokens after a gap g counts k samples of g/k.",
    ),
    "tpot": Twin(
        "TPOT per request",
        "TPOT p99 (client)",
        both("request_time_per_output_token_seconds_bucket", "request_time_per_output_token_seconds_bucket"),
        "(E2E - TTFT) / (output tokens - 1) per request.",
    ),
    "e2e": Twin(
        "E2E latency",
        "E2E p99 (client)",
        both("e2e_request_latency_seconds_bucket", "e2e_request_latency_seconds_bucket"),
    ),
}


def client_metrics() -> list[Metric]:
    """The table's metrics this board shows, with their live histogram (display order)."""
    return [m for m in shown("grafana") if m.live is not None]


def twin(m: Metric) -> Twin:
    return ENGINE_TWINS.get(m.name) or Twin(m.label, f"{m.label} p99 (client)")


def series(name: str, suffix: str = "") -> str:
    """A live metric's Prometheus series (`_bucket`, `_sum`, `_count`), by its table name."""
    live = BY_NAME[name].live
    assert live is not None, name
    return live.prometheus + suffix


def tuning() -> Board:
    running = both("num_requests_running", "num_running_reqs")
    waiting = both("num_requests_waiting", "num_queue_reqs")
    kv = both("kv_cache_usage_perc", "token_usage")
    preempt = both("num_preemptions_total", "num_retracted_requests_total")
    b = Board(
        "llm-harness-tuning",
        "LLM tuning: client vs engine",
        "The tuning guides' record list at a glance: what users feel (harness_ metrics from `harness run "
        "--metrics-port`) beside why (engine metrics, vLLM or SGLang names; GPU memory from DCGM).",
        ["llm-harness", "vllm", "sglang", "tuning"],
        [var_datasource(), *engine_variables(f"{running}"), *HARNESS_VARS, GPU_VAR],
    )

    b.row("At a glance (over the selected time range)")
    b.stat(
        "Requests/s (client, ok)",
        [t(f"sum(rate({h('harness_requests_total', MEASURED_OK)}[{RI}]))", "req/s")],
        unit="reqps",
        decimals=2,
        stat_calc="mean",
        description="Measured requests that finished without error; mean over the range.",
    )
    b.stat(
        "Output tokens/s (client)",
        [t(f"sum(rate({h('harness_output_tokens_total')}[{RI}]))", "tok/s")],
        unit="short",
        decimals=0,
        stat_calc="mean",
    )
    for m in client_metrics():
        b.stat(
            twin(m).stat,
            [t(quantile(0.99, h(series(m.name, "_bucket")), window="$__range", fn="increase"), "p99")],
            unit="s",
        )
    b.stat(
        "Failed requests (client)",
        [t(f"sum(increase({h('harness_requests_total', NOT_OK)}[$__range])) or vector(0)", "failed")],
        unit="short",
        decimals=0,
        thresholds=[(None, "green"), (1, "red")],
    )
    b.stat(
        "KV cache usage (max)",
        [t(f"max(max_over_time({eng(kv)}[$__range]))", "max")],
        unit="percentunit",
        thresholds=[(None, "green"), (0.9, "orange"), (0.98, "red")],
    )
    b.stat(
        "Preemptions (in range)",
        [t(f"sum(increase({eng(preempt)}[$__range]))", "preemptions")],
        unit="short",
        decimals=0,
        thresholds=[(None, "green"), (0.001, "orange"), (100, "red")],
        description="vLLM num_preemptions_total; SGLang num_retracted_requests_total (retraction).",
    )
    b.stat(
        "Prefix-cache hit rate (range)",
        [
            t(
                ratio(
                    eng(vllm("prefix_cache_hits_total")),
                    eng(vllm("prefix_cache_queries_total")),
                    "$__range",
                    "increase",
                ),
                "vLLM",
            ),
            t(
                ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total")), "$__range", "increase"),
                "SGLang",
            ),
        ],
        unit="percentunit",
        description="Tokens served from the prefix cache / prompt tokens looked up.",
    )
    b.stat(
        "Spec-decode acceptance",
        [
            t(
                ratio(
                    eng(vllm("spec_decode_num_accepted_tokens_total")),
                    eng(vllm("spec_decode_num_draft_tokens_total")),
                    "$__range",
                    "increase",
                ),
                "vLLM",
            ),
            t(f"avg(avg_over_time({eng(sgl('spec_accept_rate'))}[$__range]))", "SGLang"),
        ],
        unit="percentunit",
        description="Accepted / proposed draft tokens (only with speculative decoding).",
    )
    b.stat(
        "GPU memory used (max, DCGM)",
        [t(f"max(max_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range]))", "max")],
        unit="mbytes",
        description="DCGM_FI_DEV_FB_USED (MiB) from dcgm-exporter.",
    )
    b.stat(
        "GPU memory growth (range)",
        [
            t(
                f"max(max_over_time({eng('sim[:_]gpu_memory_used_bytes')}[$__range]) - min_over_time({eng('sim[:_]gpu_memory_used_bytes')}[$__range]))",
                "simulated",
            ),
            t(
                f"max(max_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range]) - min_over_time(DCGM_FI_DEV_FB_USED{{{GPU}}}[$__range])) * 1048576",
                "DCGM",
            ),
        ],
        unit="bytes",
        thresholds=[(None, "green"), (268435456, "orange"), (2147483648, "red")],
        description="Memory grown while serving (max - min over the range): CUDA-graph pool growth for uncaptured batch "
        "sizes or fragmentation (guide 001, 2.2). `harness run` reports it in summary.json diagnosis.memory.",
    )
    b.stat(
        "Send lag p99 (client)",
        [t(quantile(0.99, h(series("send_lag", "_bucket")), window="$__range", fn="increase"), "p99")],
        unit="s",
        thresholds=[(None, "green"), (0.005, "orange"), (0.05, "red")],
        description="Open loop: actual minus intended send time. High = the client could not keep up.",
    )

    b.row("Latency: client (harness) beside engine")
    for m in client_metrics():
        tw = twin(m)
        b.timeseries(tw.title, client_vs_engine(series(m.name), tw.engine), unit="s", description=tw.description)
    b.timeseries(
        "TTFT p99 by request class (client)",
        [t(quantile(0.99, h(series("ttft", "_bucket")), by="le, class"), "{{class}}")],
        unit="s",
    )
    b.timeseries(
        "TTFT p99 and ITL p99 by sweep config (client)",
        [
            t(quantile(0.99, h(series("ttft", "_bucket")), by="le, config"), "TTFT {{config}}"),
            t(quantile(0.99, h(series("itl_token", "_bucket")), by="le, config"), "ITL {{config}}"),
        ],
        unit="s",
        description="Split by the config label a sweep (or `harness run --label config=...`) sets.",
    )

    b.row("Throughput and load")
    b.timeseries(
        "Requests/s",
        [
            t(f"sum(rate({h('harness_requests_total', OK)}[{RI}]))", "client ok"),
            t(f"sum(rate({h('harness_requests_total', NOT_OK)}[{RI}]))", "client failed"),
            t(f"sum(rate({eng(both('request_success_total', 'num_requests_total'))}[{RI}]))", "engine finished"),
        ],
        unit="reqps",
    )
    b.timeseries(
        "Target vs achieved rate",
        [
            t(f"sum({h('harness_target_rate_requests_per_second')})", "target"),
            t(f"sum(rate({h('harness_requests_sent_total')}[{RI}]))", "sent"),
            t(f"sum(rate({h('harness_requests_total')}[{RI}]))", "finished"),
        ],
        unit="reqps",
        description="Open loop: the scenario's rate, the rate requests actually went out, and completions.",
    )
    b.timeseries(
        "Tokens/s",
        [
            t(f"sum(rate({h('harness_input_tokens_total')}[{RI}]))", "client input"),
            t(f"sum(rate({h('harness_output_tokens_total')}[{RI}]))", "client output"),
            t(f"sum(rate({eng(both('prompt_tokens_total', 'prompt_tokens_total'))}[{RI}]))", "engine prompt"),
            t(
                f"sum(rate({eng(both('generation_tokens_total', 'generation_tokens_total'))}[{RI}]))",
                "engine generation",
            ),
        ],
        unit="short",
        description="Client: measured successful requests. Engine: every request it served.",
    )
    b.timeseries(
        "Concurrency: users, in flight, engine running / waiting",
        [
            t(f"sum({h('harness_active_users')})", "client users"),
            t(f"sum({h('harness_in_flight_requests')})", "client in flight"),
            t(f"sum({h('harness_target_users')})", "target users / max in flight"),
            t(f"sum({eng(running)})", "engine running"),
            t(f"sum({eng(waiting)})", "engine waiting"),
        ],
        unit="short",
    )
    b.timeseries(
        "Failed requests/s by kind (client)",
        [
            t(f"sum by (outcome) (rate({h('harness_requests_total', NOT_OK)}[{RI}]))", "{{outcome}}"),
        ],
        unit="reqps",
    )
    b.timeseries(
        "Output tokens/s by sweep config (client)",
        [
            t(f"sum by (config) (rate({h('harness_output_tokens_total')}[{RI}]))", "{{config}}"),
        ],
        unit="short",
    )

    b.row("Engine: KV cache, preemption, prefix cache, speculative decoding, GPU memory")
    b.timeseries(
        "KV cache usage",
        [t(f"max by (instance) ({eng(kv)})", "{{instance}}")],
        unit="percentunit",
        min_=0,
        max_=1,
        description="vLLM kv_cache_usage_perc; SGLang token_usage (0-1).",
    )
    b.timeseries(
        "Running / waiting requests (engine)",
        [
            t(f"sum by (instance) ({eng(running)})", "running {{instance}}"),
            t(f"sum by (instance) ({eng(waiting)})", "waiting {{instance}}"),
        ],
        unit="short",
    )
    b.timeseries(
        "Preemptions/s",
        [t(f"sum(rate({eng(preempt)}[{RI}]))", "preemptions/s")],
        unit="short",
        description="vLLM num_preemptions_total; SGLang retracted requests.",
    )
    b.timeseries(
        "Prefix-cache hit rate",
        [
            t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))), "vLLM engine"),
            t(ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total"))), "SGLang engine"),
            t(f"max({h('harness_expected_prefix_hit_rate')})", "expected (scenario)"),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Speculative decoding: acceptance rate",
        [
            t(
                ratio(
                    eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_draft_tokens_total"))
                ),
                "vLLM",
            ),
            t(f"avg({eng(sgl('spec_accept_rate'))})", "SGLang"),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Speculative decoding: mean acceptance length",
        [
            t(
                "1 + "
                + ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_drafts_total"))),
                "vLLM",
            ),
            t(f"avg({eng(sgl('spec_accept_length'))})", "SGLang"),
        ],
        unit="short",
        description="Tokens per verification step: 1 + accepted / drafts.",
    )
    b.timeseries(
        "Tokens per engine step (vLLM)",
        [
            t(quantile(0.5, eng(vllm("iteration_tokens_total_bucket"))), "p50"),
            t(quantile(0.99, eng(vllm("iteration_tokens_total_bucket"))), "p99"),
        ],
        unit="short",
        description="Scheduled tokens per engine iteration. Large steps while streams decode are long prefills "
        "not chunked: every decode waits for them (ITL spikes; `harness run` reports ITL inside vs "
        "outside long prefills in summary.json diagnosis.interference). Lower --max-num-batched-tokens "
        "or enable chunked prefill.",
    )
    b.timeseries(
        "GPU memory (simulated engine)",
        [
            t(f"sum by (instance) ({eng('sim[:_]gpu_memory_used_bytes')})", "used {{instance}}"),
            t(f"sum by (instance) ({eng('sim[:_]gpu_memory_total_bytes')})", "total {{instance}}"),
        ],
        unit="bytes",
        description="The simulator's emulated device memory (it has no NVML): startup level plus CUDA-graph pool "
        "growth for batch sizes outside its capture sizes. Not a vLLM metric.",
    )
    b.timeseries(
        "GPU memory (DCGM)",
        [
            t(f"sum by (instance, gpu) (DCGM_FI_DEV_FB_USED{{{GPU}}})", "used {{instance}} gpu {{gpu}}"),
            t(
                f"sum by (instance, gpu) (DCGM_FI_DEV_FB_USED{{{GPU}}} + DCGM_FI_DEV_FB_FREE{{{GPU}}})",
                "total {{instance}} gpu {{gpu}}",
            ),
        ],
        unit="mbytes",
        description="Framebuffer used and used+free, MiB, from dcgm-exporter.",
    )

    b.row("Client health")
    b.timeseries(
        "Send lag (open loop)",
        [t(quantile(q, h(series("send_lag", "_bucket"))), name) for q, name in QS],
        unit="s",
        description="How late requests went out. Latencies count from the intended time regardless.",
    )
    b.timeseries(
        "Client CPU (cores)",
        [t(f"sum(rate({h('harness_client_cpu_seconds_total')}[{RI}]))", "load processes")],
        unit="short",
        description="Near 1 core per load process = the client is saturated; use --processes.",
    )
    b.timeseries(
        "Mean latency (client)",
        [
            t(mean(h(series(m.name, "_sum")), h(series(m.name, "_count"))), (m.live.name if m.live else m.name).upper())
            for m in client_metrics()
        ],
        unit="s",
    )
    return b
