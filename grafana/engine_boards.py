"""The per-engine dashboards (vLLM, SGLang): each engine's own metrics after its example
dashboards, both spellings of every name (see grafana/generate.py)."""

from __future__ import annotations

from dashboard import RI, Board, eng, engine_variables, mean, quantile, ratio, sgl, t, var_datasource, vllm


def vllm_board() -> Board:
    b = Board(
        "llm-harness-vllm",
        "vLLM engine",
        "vLLM V1 metrics (names from vllm/v1/metrics/loggers.py, both the vllm: and the escaped vllm_ spelling), "
        "after vLLM's own example dashboards plus KV-cache and speculative-decoding panels.",
        ["llm-harness", "vllm"],
        [var_datasource(), *engine_variables(vllm("num_requests_running"))],
    )

    def lat(title: str, name: str, desc: str = "") -> None:
        sel = eng(vllm(f"{name}_bucket"))
        targets = [t(quantile(q, sel), n) for q, n in ((0.99, "p99"), (0.95, "p95"), (0.9, "p90"), (0.5, "p50"))]
        targets.append(t(mean(eng(vllm(f"{name}_sum")), eng(vllm(f"{name}_count"))), "mean"))
        b.timeseries(title, targets, unit="s", description=desc)

    b.row("Latency")
    lat("E2E request latency", "e2e_request_latency_seconds")
    lat("Time to first token", "time_to_first_token_seconds")
    lat("Inter-token latency", "inter_token_latency_seconds")
    lat("Time per output token (per request)", "request_time_per_output_token_seconds")
    lat("Queue time", "request_queue_time_seconds", "Time in WAITING.")
    b.timeseries(
        "Prefill and decode time (mean)",
        [
            t(
                mean(eng(vllm("request_prefill_time_seconds_sum")), eng(vllm("request_prefill_time_seconds_count"))),
                "prefill",
            ),
            t(
                mean(eng(vllm("request_decode_time_seconds_sum")), eng(vllm("request_decode_time_seconds_count"))),
                "decode",
            ),
            t(
                mean(
                    eng(vllm("request_inference_time_seconds_sum")), eng(vllm("request_inference_time_seconds_count"))
                ),
                "inference",
            ),
        ],
        unit="s",
    )

    b.row("Throughput and scheduler")
    b.timeseries(
        "Token throughput",
        [
            t(f"sum(rate({eng(vllm('prompt_tokens_total'))}[{RI}]))", "prompt tokens/s"),
            t(f"sum(rate({eng(vllm('generation_tokens_total'))}[{RI}]))", "generation tokens/s"),
        ],
        unit="short",
    )
    b.timeseries(
        "Scheduler state",
        [
            t(f"sum({eng(vllm('num_requests_running'))})", "running"),
            t(f"sum({eng(vllm('num_requests_waiting'))})", "waiting"),
            t(f"sum by (reason) ({eng(vllm('num_requests_waiting_by_reason'))})", "waiting: {{reason}}"),
        ],
        unit="short",
    )
    b.timeseries(
        "Finished requests by reason",
        [
            t(
                f"sum by (finished_reason) (increase({eng(vllm('request_success_total'))}[{RI}]))",
                "{{finished_reason}}",
            ),
        ],
        unit="short",
    )
    b.timeseries(
        "Tokens per engine step",
        [
            t(quantile(0.5, eng(vllm("iteration_tokens_total_bucket"))), "p50"),
            t(quantile(0.99, eng(vllm("iteration_tokens_total_bucket"))), "p99"),
        ],
        unit="short",
        description="vllm:iteration_tokens_total is a histogram despite its name.",
    )
    b.panel(
        "heatmap",
        "Prompt length",
        [t(f"sum by (le) (increase({eng(vllm('request_prompt_tokens_bucket'))}[{RI}]))", "{{le}}", format="heatmap")],
        unit="short",
    )
    b.panel(
        "heatmap",
        "Generation length",
        [
            t(
                f"sum by (le) (increase({eng(vllm('request_generation_tokens_bucket'))}[{RI}]))",
                "{{le}}",
                format="heatmap",
            )
        ],
        unit="short",
    )

    b.row("KV cache and prefix cache")
    kv = eng(vllm("kv_cache_usage_perc"))
    b.stat(
        "KV cache usage (max)",
        [t(f"max({kv})", "max")],
        unit="percentunit",
        w=6,
        thresholds=[(None, "green"), (0.9, "orange"), (0.98, "red")],
    )
    b.stat("KV cache usage (mean)", [t(f"avg({kv})", "mean")], unit="percentunit", w=6)
    b.stat(
        "Prefix cache hit rate",
        [t(ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))), "hit rate")],
        unit="percentunit",
        w=6,
    )
    b.stat(
        "Preemptions/s",
        [t(f"sum(rate({eng(vllm('num_preemptions_total'))}[{RI}]))", "preemptions/s")],
        unit="short",
        w=6,
        thresholds=[(None, "green"), (0.001, "orange"), (1, "red")],
    )
    b.timeseries(
        "KV cache usage",
        [t(f"max by (instance, engine) ({kv})", "{{instance}} engine {{engine}}")],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Prefix cache",
        [
            t(
                ratio(eng(vllm("prefix_cache_hits_total")), eng(vllm("prefix_cache_queries_total"))),
                "hit rate (prefix cache)",
            ),
            t(
                ratio(eng(vllm("prompt_tokens_cached_total")), eng(vllm("prompt_tokens_total"))),
                "cached prompt tokens / prompt tokens",
            ),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Preemptions",
        [
            t(f"sum(rate({eng(vllm('num_preemptions_total'))}[{RI}]))", "preemptions/s"),
            t(f"sum(increase({eng(vllm('request_num_preemptions_count'))}[{RI}]))", "finished requests"),
        ],
        unit="short",
    )
    b.timeseries(
        "Prompt tokens by source",
        [
            t(f"sum by (source) (rate({eng(vllm('prompt_tokens_by_source_total'))}[{RI}]))", "{{source}}"),
        ],
        unit="short",
    )
    b.panel(
        "table",
        "KV cache config (vllm:cache_config_info)",
        [
            t(
                f"max by (instance, engine, block_size, num_gpu_blocks, kv_cache_size_tokens, kv_cache_max_concurrency, "
                f"gpu_memory_utilization, cache_dtype, enable_prefix_caching) ({eng(vllm('cache_config_info'), model=False)})",
                "",
                instant=True,
                format="table",
            ),
        ],
        w=16,
        unit="short",
        description="Capacity from the labels (appears once KV sizing is done); no model_name label.",
    )

    b.row("Speculative decoding (only with --speculative-config)")
    b.timeseries(
        "Acceptance rate",
        [
            t(
                ratio(
                    eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_draft_tokens_total"))
                ),
                "accepted / draft tokens",
            ),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Mean acceptance length",
        [
            t(
                "1 + "
                + ratio(eng(vllm("spec_decode_num_accepted_tokens_total")), eng(vllm("spec_decode_num_drafts_total"))),
                "tokens per step",
            ),
        ],
        unit="short",
    )
    b.timeseries(
        "Acceptance by draft position",
        [
            t(
                f"sum by (position) (rate({eng(vllm('spec_decode_num_accepted_tokens_per_pos_total'))}[{RI}])) / ignoring(position) group_left() "
                f"(sum(rate({eng(vllm('spec_decode_num_drafts_total'))}[{RI}])) > 0)",
                "position {{position}}",
            ),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    return b


# ============================================================================= SGLang
def sglang_board() -> Board:
    b = Board(
        "llm-harness-sglang",
        "SGLang engine",
        "SGLang metrics (sglang/srt/observability/metrics_collector.py; start with --enable-metrics), "
        "after SGLang's own example dashboard, both the sglang: and the escaped sglang_ spelling.",
        ["llm-harness", "sglang"],
        [var_datasource(), *engine_variables(sgl("num_running_reqs"))],
    )

    def lat(title: str, name: str) -> None:
        sel = eng(sgl(f"{name}_bucket"))
        targets = [t(quantile(q, sel), n) for q, n in ((0.99, "p99"), (0.9, "p90"), (0.5, "p50"))]
        targets.append(t(mean(eng(sgl(f"{name}_sum")), eng(sgl(f"{name}_count"))), "mean"))
        b.timeseries(title, targets, unit="s")

    b.row("Latency")
    lat("E2E request latency", "e2e_request_latency_seconds")
    lat("Time to first token", "time_to_first_token_seconds")
    lat("Inter-token latency", "inter_token_latency_seconds")
    lat("Time per output token (per request)", "request_time_per_output_token_seconds")
    lat("Queue time", "queue_time_seconds")
    b.panel(
        "heatmap",
        "E2E latency distribution",
        [
            t(
                f"sum by (le) (increase({eng(sgl('e2e_request_latency_seconds_bucket'))}[{RI}]))",
                "{{le}}",
                format="heatmap",
            ),
        ],
        unit="s",
    )

    b.row("Throughput and scheduler")
    b.timeseries(
        "Token throughput",
        [
            t(f"sum(rate({eng(sgl('prompt_tokens_total'))}[{RI}]))", "prompt tokens/s (finished requests)"),
            t(f"sum(rate({eng(sgl('generation_tokens_total'))}[{RI}]))", "generation tokens/s (finished requests)"),
            t(f"sum({eng(sgl('gen_throughput'))})", "gen_throughput (decode log interval)"),
        ],
        unit="short",
    )
    b.timeseries(
        "Requests",
        [
            t(f"sum({eng(sgl('num_running_reqs'))})", "running"),
            t(f"sum({eng(sgl('num_queue_reqs'))})", "queued"),
            t(f"sum({eng(sgl('num_grammar_queue_reqs'))})", "grammar queue"),
        ],
        unit="short",
    )
    b.timeseries(
        "Finished / aborted requests/s",
        [
            t(f"sum(rate({eng(sgl('num_requests_total'))}[{RI}]))", "finished"),
            t(f"sum(rate({eng(sgl('num_aborted_requests_total'))}[{RI}]))", "aborted"),
        ],
        unit="reqps",
    )

    b.row("KV cache, radix cache, retraction")
    b.timeseries(
        "Token (KV) usage",
        [
            t(f"max by (instance) ({eng(sgl('token_usage'))})", "token_usage {{instance}}"),
            t(
                f"sum({eng(sgl('kv_used_tokens'))}) / (sum({eng(sgl('max_total_num_tokens'))}) > 0)",
                "kv_used / max_total_num_tokens",
            ),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
        description="token_usage = max(full, swa, mamba) pool usage.",
    )
    b.timeseries(
        "KV token slots",
        [
            t(f"sum({eng(sgl('kv_used_tokens'))})", "used"),
            t(f"sum({eng(sgl('kv_available_tokens'))})", "available"),
            t(f"sum({eng(sgl('kv_evictable_tokens'))})", "evictable"),
            t(f"sum({eng(sgl('max_total_num_tokens'))})", "max"),
        ],
        unit="short",
    )
    b.timeseries(
        "Cache hit rate",
        [
            t(f"avg({eng(sgl('cache_hit_rate'))})", "last prefill batch (cache_hit_rate)"),
            t(ratio(eng(sgl("cached_tokens_total")), eng(sgl("prompt_tokens_total"))), "cached / prompt tokens"),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries(
        "Retractions (preemption analogue)",
        [
            t(f"sum(rate({eng(sgl('num_retracted_requests_total'))}[{RI}]))", "retracted requests/s"),
            t(f"sum({eng(sgl('num_retracted_reqs'))})", "retracted now"),
        ],
        unit="short",
    )

    b.row("Speculative decoding")
    b.timeseries(
        "Acceptance",
        [
            t(f"avg({eng(sgl('spec_accept_rate'))})", "accept rate"),
        ],
        unit="percentunit",
        min_=0,
        max_=1,
    )
    b.timeseries("Acceptance length", [t(f"avg({eng(sgl('spec_accept_length'))})", "accept length")], unit="short")
    return b
