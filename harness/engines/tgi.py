"""Hugging Face TGI (`text-generation-launcher`).

- launch: `text-generation-launcher --model-id {model}`; ready when /health answers 200 (the shard
  is up; 503 otherwise);
- /metrics: the router's metrics (`docs/source/reference/metrics.md`), below;
- startup facts: `Setting max batch total tokens to N` is its KV budget; the launcher's `Args { ... }`
  dump and the shard's `Using ... =` lines hold the rest;
- serving log: cancelled streams; the shard's OOM;
- no prefix-cache reset; flags: vLLM's names, as before this kind had a module of its own (not mapped).

Not run for real here: TGI's router is a Rust binary and its server is not on PyPI. The metric
names are checked against the families TGI declares (tests/engines/data/tgi/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine
from harness.engines.parts.facts import fact, int_list
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Profile, Samples
from harness.engines.vllm import VLLM_FLAGS

# ---------------------------------------------------------------- startup log
TGI_FACTS = [
    fact(r"Setting max batch total tokens to (\d+)", "max_batch_total_tokens"),
    fact(r"Setting max batch total tokens to (\d+)", "kv_cache_tokens"),
    # issue 16 facts: the launcher's `Args { ... }` dump (one line before 2.x, `{:#?}` over many lines
    # since: `quantize: Some(\n        Awq,\n    ),`), its `Default ... to` / `Using default ...` lines
    # for what the user left unset, and the shard's `Using ... =` lines
    fact(r"\bmax_total_tokens: Some\(\s*(\d+),?\s*\)", "max_model_len"),
    fact(r"Default `max_total_tokens` to (\d+)", "max_model_len"),
    fact(r"Using Attention = (\w+)", "attention_backend", convert=str),
    fact(r"\bquantize: Some\(\s*(\w+),?\s*\)", "quantization", convert=str),
    fact(r"\bkv_cache_dtype: Some\(\s*(\w+),?\s*\)", "kv_cache_dtype", convert=str),
    fact(
        r"Cuda Graphs are enabled for sizes \[([\d, ]*)\]|\bcuda_graphs: Some\(\s*\[([\d,\s]*)\],?\s*\)"
        r"|Using default cuda graphs \[([\d, ]*)\]",
        "cudagraph_sizes",
        "cudagraph_sizes",
        "cudagraph_sizes",
        convert=int_list,
    ),
]


# ---------------------------------------------------------------- /metrics
# Text Generation Inference (router metrics, `docs/source/reference/metrics.md`).
#
# TGI has no KV-usage, preemption or prefix-cache metric. KV usage is approximated as
# `tgi_batch_current_max_tokens / tgi_batch_max_total_tokens` (tokens the running batch may reach
# over the token budget; semantics unconfirmed). Token counts come from the `_sum` of the per-request
# length histograms. Latencies are seconds; ITL is TGI's per-request mean time per token; TGI has
# no TTFT histogram.


class TgiProfile(Profile):
    def gauge(self, snap: Samples, canonical: str) -> float | None:
        if canonical != "kv_usage":
            return super().gauge(snap, canonical)
        used = self.collapse(snap.get("tgi_batch_current_max_tokens"))
        budget = self.collapse(snap.get("tgi_batch_max_total_tokens"))
        if used is None or not budget:
            return None
        return min(1.0, used / budget)

    def capacity(self, snap: Samples) -> dict[str, float | int | None]:
        budget = self.collapse(snap.get("tgi_batch_max_total_tokens"))
        return {"kv_capacity_tokens": int(budget) if budget else None, "block_size": None}


TGI_METRICS = TgiProfile(
    name="tgi",
    prefixes=("tgi_",),
    prom_prefix="tgi_",
    gauges={
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
    },
    counters={
        "prompt_tokens": ("tgi_request_input_length_sum",),
        "generation_tokens": ("tgi_request_generated_tokens_sum",),
        "requests_finished": ("tgi_request_success", "tgi_request_success_total"),
    },
    histograms={
        "itl": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
        "queue": ("tgi_request_queue_duration",),
    },
    info_names=("tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens"),
    notes=("kv_usage approximated from the batch token budget",),
)


# ---------------------------------------------------------------- serving log
# TGI (text-generation-inference): the router logs a cancelled stream; the shard's OOM is a Python
# `torch.OutOfMemoryError` (in COMMON).
TGI_LOG = LogPatterns(
    "tgi",
    patterns(
        abort=(r"Request was cancelled", r"client disconnected"),
        oom=(r"Out of memory", r"OOM"),
    ),
)


# ---------------------------------------------------------------- the kind
class TGI(HttpEngine):
    name = "tgi"
    lacks: ClassVar[Mapping[str, str]] = {
        "reset_path": "TGI has no prefix-cache reset endpoint (runs salt their prompts instead)",
        "tokenize": "TGI's /tokenize takes {inputs} and answers a token list, not vLLM's form (not wired)",
    }
    ready_path = "/health"
    metrics = TGI_METRICS
    telemetry_profile = "tgi"
    facts = TGI_FACTS
    log_patterns = TGI_LOG
    flags = VLLM_FLAGS

    def default_command(self, spec: EngineSettings) -> list[str]:
        return ["text-generation-launcher", "--model-id", "{model}", "--hostname", "{host}", "--port", "{port}"]


KINDS.add("tgi", TGI())
