"""transformers serve: its continuous-batching options as the guides' knobs, no /metrics, its
startup lines; the kind against a real `transformers serve` on the CPU is
tests/e2e/test_transformers_cpu.py (slow)."""

from harness.engines import get_kind
from harness.telemetry.sources import choose_source

from .conftest import DATA


def test_flags_name_only_serve_options():
    m = get_kind("transformers").flags
    assert m.knob("max-num-batched-tokens").flag == "cb-max-batch-tokens"
    assert m.knob("cuda-graphs").flag == "cb-use-cuda-graph"
    assert m.knob("gpu-memory-utilization").flag == "cb-max-memory-percent"
    for missing in ("max-model-len", "max-num-seqs", "enable-prefix-caching", "kv-cache-dtype", "tensor-parallel-size"):
        assert m.knob(missing).flag is None and m.knob(missing).why_missing
    assert (
        get_kind("sim").flags is get_kind("vllm").flags
        and get_kind("vllm").flags.knob("max_num_seqs").flag == "max-num-seqs"
    )


def test_startup_lines():
    # transformers 5.19's own lines: uvicorn's banner and the paged cache's f-string (cache.py)
    log = (
        "INFO:     Uvicorn running on http://127.0.0.1:18123 (Press CTRL+C to quit)\n"
        "Paged cache initialized: self.max_batch_tokens = 256, self.num_sectors = 2, mb_per_sector = 4\n"
    )
    assert get_kind("transformers").startup_facts(log) == {"port": 18123, "cb_max_batch_tokens": 256}


def test_no_metrics_so_telemetry_records_why():
    class Config:
        enabled, prometheus, metrics_url, timeout_s = True, None, None, 2.0

    kind = get_kind("transformers")
    assert kind.metrics is None and kind.no_metrics
    assert choose_source(Config(), "http://127.0.0.1:9", "transformers") == (None, kind.no_metrics)


def test_real_cpu_start():
    """A real start (transformers 5.19 from the vLLM CPU venv plus accelerate, the tiny Llama,
    `--device cpu --continuous-batching --log-level info --cb-num-blocks 64`): at info level the
    only fact it prints is uvicorn's port (the paged cache is built at the first request, silently)."""
    facts = get_kind("transformers").startup_facts(
        (DATA / "transformers" / "transformers_5.19_cpu_startup.log").read_text()
    )
    assert facts == {"port": 18431}
