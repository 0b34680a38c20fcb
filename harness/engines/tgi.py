"""Hugging Face TGI (`text-generation-launcher`).

- launch: `text-generation-launcher --model-id {model}`; ready when /health answers 200 (the shard
  is up; 503 otherwise);
- /metrics: the router's metrics (`docs/source/reference/metrics.md`), below;
- startup facts: `Setting max batch total tokens to N` is its KV budget; the launcher's `Args { ... }`
  dump and the shard's `Using ... =` lines hold the rest;
- serving log: cancelled streams; the shard's OOM;
- no prefix-cache reset;
- tokenize: the router's POST /tokenize (`router/src/server.rs`) takes a generate request
  {inputs, parameters} and answers the token list [{id, text, start, stop}]; it always adds the
  tokenizer's special tokens (`add_special_tokens` is not read from the body), so a count holds
  the BOS token too: one token in the 512 words calibration sends;
- flags (`TGI_FLAGS`, below): the launcher's options (`launcher/src/main.rs` `struct Args` at
  v3.3.7, the same as `docs/source/reference/launcher.md`; every option and its arity recorded in
  tests/engines/data/tgi/tgi_v3.3.7_launcher_options.txt, which tests/engines/test_flags.py checks
  every argv of the map against). Prefix caching and chunked prefill are no options: the launcher
  and the Python server read the environment variables `PREFIX_CACHING` and `PREFILL_CHUNKING`
  ("1"/"true" on), so those knobs set the engine's environment (`env:NAME`).

Not run for real here: TGI's router is a Rust binary and its server is not on PyPI. The metric
names are checked against the families TGI declares (tests/engines/data/tgi/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine, Tokenize
from harness.engines.parts.facts import fact, int_list
from harness.engines.parts.flags import FlagMap, Knob
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Profile, Samples

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


# ---------------------------------------------------------------- flags
# TGI v3.3.7 (`text-generation-launcher --help`; launcher/src/main.rs, server/text_generation_server/
# models/globals.py and model.py):
# - max-model-len: `--max-total-tokens` (input + new tokens of one request, "the memory budget of
#   running clients requests"); `--max-input-tokens` then defaults to it minus one (the shard's warmup);
# - gpu-memory-utilization: `--cuda-memory-fraction` (default 1.0: "the total visible memory
#   multiplied by cuda-memory-fraction");
# - max-num-seqs: none, see the reason;
# - max-num-batched-tokens: `--max-batch-prefill-tokens` (tokens of one prefill step: with chunking,
#   the chunk budget; without it, at least --max-input-tokens);
# - enable-chunked-prefill: env PREFILL_CHUNKING (default "1"; on only with the flashinfer or
#   flashdecoding attention and without speculation);
# - enable-prefix-caching: env PREFIX_CACHING (unset, the launcher turns it on except for VLMs,
#   seq2seq models, LoRA adapters and paged attention: `resolve_attention`);
# - cuda-graphs: `--cuda-graphs` (batch sizes, default 1,2,4,8,16,32; "Use \"0\" to disable");
# - kv-cache-dtype: `--kv-cache-dtype` (fp8_e4m3fn or fp8_e5m2; unset, the model's dtype);
# - tensor-parallel-size: `--num-shard`;
# - speculative-config: `--speculate N` (n-gram speculation, or the Medusa/MTP heads a model has).
_TGI = "TGI"
TGI_FLAGS = FlagMap(
    "tgi",
    {
        "max-model-len": Knob("max-total-tokens"),
        "gpu-memory-utilization": Knob("cuda-memory-fraction", default=1.0),
        "max-num-seqs": Knob(
            None,
            f"{_TGI} admits requests by its token budget (--max-batch-total-tokens), not by a count: "
            "--max-batch-size caps a batch only without chunked prefill (ignored with it, the v3 default), "
            "and --max-concurrent-requests refuses requests over its limit (HTTP 429) instead of queueing them",
        ),
        "max-num-batched-tokens": Knob("max-batch-prefill-tokens"),
        "enable-chunked-prefill": Knob("env:PREFILL_CHUNKING", on="1", off="0", default_on=True),
        "enable-prefix-caching": Knob("env:PREFIX_CACHING", on="1", off="0", default_on=True),
        "cuda-graphs": Knob("cuda-graphs", on=None, off=0, default_on=True),
        "kv-cache-dtype": Knob("kv-cache-dtype", try_values=("fp8_e4m3fn",)),
        "tensor-parallel-size": Knob("num-shard"),
        "speculative-config": Knob("speculate"),
    },
)


# ---------------------------------------------------------------- tokenize
def _token_list_count(answer: Any) -> int | None:
    """TGI answers a bare list of tokens."""
    return len(answer) if isinstance(answer, list) else None


#: POST /tokenize with a generate request; the answer is [{id, text, start, stop}, ...]
TGI_TOKENIZE = Tokenize("/tokenize", body=lambda model, text: {"inputs": text}, count=_token_list_count)


# ---------------------------------------------------------------- the kind
class TGI(HttpEngine):
    name = "tgi"
    lacks: ClassVar[Mapping[str, str]] = {
        "reset_path": "TGI has no prefix-cache reset endpoint (runs salt their prompts instead)",
    }
    ready_path = "/health"
    metrics = TGI_METRICS
    telemetry_profile = "tgi"
    facts = TGI_FACTS
    log_patterns = TGI_LOG
    flags = TGI_FLAGS
    tokenize = TGI_TOKENIZE

    def default_command(self, spec: EngineSettings) -> list[str]:
        return ["text-generation-launcher", "--model-id", "{model}", "--hostname", "{host}", "--port", "{port}"]


KINDS.add("tgi", TGI())
