"""Hand-written exposition pages, one pair (baseline, final) per engine, with known deltas.

Written the way each engine's exporter prints them (prometheus_client text format with `_created`
lines for vLLM/SGLang, the Rust `metrics` exporter's style for TGI).
"""

# ---------------------------------------------------------------- vLLM (current names), 2 DP engines
VLLM_HEAD = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.92",kv_cache_size_tokens="None",num_gpu_blocks="2000"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",gpu_memory_utilization="0.92",kv_cache_size_tokens="None",num_gpu_blocks="2000"} 1.0
"""


def vllm_page(*, kv0, kv1, run0, run1, wait0, pre0, pre1, q, h, prompt, gen, ttft_buckets, ttft_sum) -> str:
    """ttft_buckets: cumulative counts for le = 0.1, 0.25, 0.5, 1.0, +Inf (engine 0 only)."""
    le = ["0.1", "0.25", "0.5", "1.0", "+Inf"]
    buckets = "\n".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{b}",model_name="m"}} {c}'
        for b, c in zip(le, ttft_buckets, strict=True)
    )
    return (
        VLLM_HEAD
        + f"""\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {run0}
vllm:num_requests_running{{engine="1",model_name="m"}} {run1}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {wait0}
vllm:num_requests_waiting{{engine="1",model_name="m"}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv0}
vllm:kv_cache_usage_perc{{engine="1",model_name="m"}} {kv1}
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} {pre0}
vllm:num_preemptions_total{{engine="1",model_name="m"}} {pre1}
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{{engine="0",model_name="m"}} 1.7e+09
vllm:num_preemptions_created{{engine="1",model_name="m"}} 1.7e+09
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {q}
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {h}
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
{buckets}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {ttft_buckets[-1]}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_sum}
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{{engine="0",model_name="m"}} 1.7e+09
"""
    )


VLLM_A = vllm_page(
    kv0=0.1,
    kv1=0.2,
    run0=1,
    run1=0,
    wait0=0,
    pre0=5,
    pre1=1,
    q=1000,
    h=100,
    prompt=1000,
    gen=50,
    ttft_buckets=[1, 1, 1, 1, 1],
    ttft_sum=0.05,
)
VLLM_B = vllm_page(
    kv0=0.5,
    kv1=0.7,
    run0=8,
    run1=6,
    wait0=3,
    pre0=8,
    pre1=2,
    q=5000,
    h=3100,
    prompt=5000,
    gen=850,
    ttft_buckets=[11, 31, 41, 41, 41],
    ttft_sum=8.05,
)
VLLM_C = vllm_page(
    kv0=0.9,
    kv1=0.9,
    run0=9,
    run1=7,
    wait0=5,
    pre0=12,
    pre1=2,
    q=9000,
    h=6100,
    prompt=9000,
    gen=1650,
    ttft_buckets=[11, 31, 41, 51, 51],
    ttft_sum=15.05,
)
#: deltas A -> C (by hand)
VLLM_DELTAS = {
    "preemptions": (12 - 5) + (2 - 1),
    "prefix_queries": 8000,
    "prefix_hits": 6000,
    "prompt_tokens": 8000,
    "generation_tokens": 1600,
    "ttft_count": 50,
    "ttft_buckets": [(0.1, 10), (0.25, 30), (0.5, 40), (1.0, 50), (float("inf"), 50)],
    "ttft_sum": 15.0,
    "kv_capacity_tokens": 2 * 2000 * 16,
    "block_size": 16,
}

# ---------------------------------------------------------------- vLLM pre-0.10: renamed names
VLLM_OLD = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{model_name="m"}} {kv}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {run}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} 0.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{model_name="m"}} {pre}
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{{model_name="m"}} {q}
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{{model_name="m"}} {h}
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{{le="0.025",model_name="m"}} {b1}
vllm:time_per_output_token_seconds_bucket{{le="0.05",model_name="m"}} {b2}
vllm:time_per_output_token_seconds_bucket{{le="+Inf",model_name="m"}} {b2}
vllm:time_per_output_token_seconds_count{{model_name="m"}} {b2}
vllm:time_per_output_token_seconds_sum{{model_name="m"}} {s}
"""
VLLM_OLD_A = VLLM_OLD.format(kv=0.25, run=2, pre=0, q=100, h=0, b1=0, b2=0, s=0)
VLLM_OLD_B = VLLM_OLD.format(kv=0.75, run=4, pre=3, q=500, h=200, b1=90, b2=100, s=2.5)

#: the deprecation period: vLLM 0.9/0.10 exposed old and new names side by side
VLLM_BOTH_A = (
    VLLM_OLD_A
    + """\
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 100
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 0
"""
)
VLLM_BOTH_B = (
    VLLM_OLD_B
    + """\
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.75
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 500
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 200
"""
)

# ---------------------------------------------------------------- SGLang: 2 TP ranks of one replica
SGLANG = """\
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {usage}
sglang:token_usage{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"}} {usage}
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {run}
sglang:num_running_reqs{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"}} {run}
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {queue}
sglang:num_queue_reqs{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"}} {queue}
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} 500000.0
sglang:max_total_num_tokens{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"}} 500000.0
# TYPE sglang:page_size gauge
sglang:page_size{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} 1.0
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {acc}
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {alen}
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="0"}} {retr}
sglang:num_retracted_requests_total{{engine_type="unified",model_name="q",pp_rank="0",tp_rank="1"}} {retr}
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{engine_type="unified",is_streaming="true",model_name="q"}} {prompt_s}
sglang:prompt_tokens_total{{engine_type="unified",is_streaming="false",model_name="q"}} {prompt_n}
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{engine_type="unified",is_streaming="true",model_name="q"}} {gen}
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{{cache_source="device",engine_type="unified",model_name="q"}} {cdev}
sglang:cached_tokens_total{{cache_source="host",engine_type="unified",model_name="q"}} {chost}
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{engine_type="unified",is_streaming="true",le="1.0",model_name="q"}} {e1}
sglang:e2e_request_latency_seconds_bucket{{engine_type="unified",is_streaming="true",le="2.0",model_name="q"}} {e2}
sglang:e2e_request_latency_seconds_bucket{{engine_type="unified",is_streaming="true",le="+Inf",model_name="q"}} {e2}
sglang:e2e_request_latency_seconds_count{{engine_type="unified",is_streaming="true",model_name="q"}} {e2}
sglang:e2e_request_latency_seconds_sum{{engine_type="unified",is_streaming="true",model_name="q"}} {esum}
"""
SGLANG_A = SGLANG.format(
    usage=0.2,
    run=3,
    queue=0,
    acc=0.5,
    alen=2.5,
    retr=2,
    prompt_s=1000,
    prompt_n=0,
    gen=100,
    cdev=200,
    chost=0,
    e1=0,
    e2=0,
    esum=0,
)
SGLANG_B = SGLANG.format(
    usage=0.95,
    run=30,
    queue=12,
    acc=0.7,
    alen=3.5,
    retr=9,
    prompt_s=9000,
    prompt_n=1000,
    gen=4100,
    cdev=5200,
    chost=1000,
    e1=10,
    e2=40,
    esum=55.0,
)
SGLANG_DELTAS = {
    "preemptions": 7,
    "prefix_queries": 9000,
    "prefix_hits": 6000,
    "generation_tokens": 4000,
    "kv_capacity_tokens": 500000,
    "e2e_count": 40,
}

# ---------------------------------------------------------------- TGI (Rust `metrics` exporter)
TGI = """\
# TYPE tgi_queue_size gauge
tgi_queue_size {queue}
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size {batch}
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens {cur}
# TYPE tgi_batch_max_total_tokens gauge
tgi_batch_max_total_tokens 200000
# TYPE tgi_request_success counter
tgi_request_success {ok}
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{{le="100"}} {n}
tgi_request_input_length_bucket{{le="+Inf"}} {n}
tgi_request_input_length_sum {inp}
tgi_request_input_length_count {n}
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{{le="+Inf"}} {n}
tgi_request_generated_tokens_sum {outp}
tgi_request_generated_tokens_count {n}
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{{le="0.5"}} {d1}
tgi_request_duration_bucket{{le="1"}} {d2}
tgi_request_duration_bucket{{le="+Inf"}} {n}
tgi_request_duration_sum {dsum}
tgi_request_duration_count {n}
"""
TGI_A = TGI.format(queue=0, batch=1, cur=1000, ok=10, n=10, inp=500, outp=1000, d1=10, d2=10, dsum=3.0)
TGI_B = TGI.format(queue=4, batch=16, cur=150000, ok=30, n=30, inp=2500, outp=5000, d1=10, d2=30, dsum=17.0)
TGI_DELTAS = {"prompt_tokens": 2000, "generation_tokens": 4000, "kv_capacity_tokens": 200000}

# ---------------------------------------------------------------- llama.cpp
# the page a real llama-server (llama-cpp-python 0.3.36's llama.cpp) prints: counters first, then
# gauges, every family with HELP and TYPE, values printed with C++ stream defaults (6 digits)
LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {cached}
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.143
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {gen}
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 1.902
# HELP llamacpp:n_decode_total Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 10
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 96
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 0
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 0
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 0
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 2931.62
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 350.2
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {busy}
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {deferred}
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 1.5
"""
LLAMACPP_A = LLAMACPP.format(prompt=100, cached=0, gen=10, busy=0, deferred=0)
LLAMACPP_B = LLAMACPP.format(prompt=1100, cached=600, gen=510, busy=4, deferred=2)
