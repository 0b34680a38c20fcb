"""Hugging Face TGI (`text-generation-launcher`): /health 200 when the shard is up (503
otherwise); `Setting max batch total tokens to N` is its KV budget. No prefix-cache reset."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact, int_list
from harness.sweep.models import EngineSpec

TGI_FACTS = [
    fact(r"Setting max batch total tokens to (\d+)", "max_batch_total_tokens"),
    fact(r"Setting max batch total tokens to (\d+)", "kv_cache_tokens"),
    # issue 16 facts: the launcher's `Args { ... }` dump and the shard's `Using ... =` lines
    fact(r"\bmax_total_tokens: Some\((\d+)\)", "max_model_len"),
    fact(r"Using Attention = (\w+)", "attention_backend", convert=str),
    fact(r"\bquantize: Some\((\w+)\)", "quantization", convert=str),
    fact(r"\bkv_cache_dtype: Some\((\w+)\)", "kv_cache_dtype", convert=str),
    fact(r"Cuda Graphs are enabled for sizes \[([\d, ]*)\]|\bcuda_graphs: Some\(\[([\d, ]*)\]\)",
         "cudagraph_sizes", "cudagraph_sizes", convert=int_list),
]


class TGI(HttpEngine):
    name = "tgi"
    telemetry_profile = "tgi"
    ready_path = "/health"
    facts = TGI_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["text-generation-launcher", "--model-id", "{model}", "--hostname", "{host}", "--port", "{port}"]


KINDS.add("tgi", TGI())
