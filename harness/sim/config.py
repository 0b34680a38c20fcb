"""Simulator configuration: the parsed flags, with vLLM's defaults and validation rules.

`SimConfig.from_args` turns the argparse namespace from `harness.sim.cli` into one frozen-ish
object the rest of the simulator reads. Value errors that argparse cannot catch (bad JSON in
`--speculative-config`, a block size vLLM does not allow) raise `ConfigError`, which the CLI
prints as one line and exits 2, like argparse does.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass, field

from harness.sim.lora import LoraConfig, parse_modules

GIB = 1 << 30

#: KV-cache element size in bytes per `--kv-cache-dtype` value (vLLM spellings).
KV_DTYPE_BYTES = {
    "auto": 2,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}

#: Weight bytes per parameter per `--dtype` (before quantization).
WEIGHT_DTYPE_BYTES = {"auto": 2.0, "bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0}

#: Weight bytes per parameter per `--quantization` method.
QUANT_BYTES = {
    "fp8": 1.0,
    "fbgemm_fp8": 1.0,
    "awq": 0.5,
    "gptq": 0.5,
    "awq_marlin": 0.5,
    "gptq_marlin": 0.5,
    "bitsandbytes": 0.5,
}

ALLOWED_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)

#: Default acceptance probability per draft position, by speculative method (sim-only knob).
DEFAULT_ACCEPTANCE = {
    "ngram": 0.5,
    "suffix": 0.5,
    "draft_model": 0.65,
    "eagle": 0.7,
    "eagle3": 0.75,
    "medusa": 0.6,
    "mtp": 0.8,
    "deepseek_mtp": 0.8,
}


#: vLLM's CUDA-graph modes (`-cc '{"cudagraph_mode": ...}'`); FULL_AND_PIECEWISE is the V1 default.
CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


def default_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, max_size: int | None = None) -> list[int]:
    """vLLM's default CUDA-graph batch sizes (`VllmConfig._set_cudagraph_sizes`): 1, 2, 4, then every
    8 up to 248, then every 16 from 256, up to `max_cudagraph_capture_size` (default
    min(2 x max_num_seqs, 512)); never beyond the token budget of one step."""
    cap = max_size if max_size is not None else min(2 * max_num_seqs, 512)
    cap = min(cap, max_num_batched_tokens)
    sizes = [i for i in (1, 2, 4) if i <= cap]
    sizes += list(range(8, min(cap + 1, 256), 8))
    if cap >= 256:
        sizes += list(range(256, cap + 1, 16))
    return sizes


def capture_sizes_from(
    cuda_graph_sizes: list[int] | None, cc: dict, max_num_seqs: int, max_num_batched_tokens: int
) -> list[int]:
    """The sizes in effect: `-cc cudagraph_capture_sizes` (a list), else `--cuda-graph-sizes` (one value =
    the largest size of the default pattern, several = the list; vLLM 0.10 spelling), else
    `--max-cudagraph-capture-size` / the default pattern."""
    listed = cc.get("cudagraph_capture_sizes")
    if listed is None and cuda_graph_sizes and len(cuda_graph_sizes) > 1:
        listed = cuda_graph_sizes
    if listed is not None:
        return sorted({int(s) for s in listed if 0 < int(s) <= max_num_batched_tokens})
    max_size = cc.get("max_cudagraph_capture_size")
    if max_size is None and cuda_graph_sizes:
        max_size = cuda_graph_sizes[0]
    return default_capture_sizes(max_num_seqs, max_num_batched_tokens, max_size)


def parse_compilation_config(text: str | None) -> dict:
    """`-cc/--compilation-config` JSON; the simulator reads the CUDA-graph fields and ignores the rest."""
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"argument --compilation-config: invalid JSON ({exc.msg})") from None
    if not isinstance(raw, dict):
        raise ConfigError("argument --compilation-config: expected a JSON object")
    sizes = raw.get("cudagraph_capture_sizes")
    if sizes is not None and (not isinstance(sizes, list) or not all(isinstance(x, int) and x > 0 for x in sizes)):
        raise ConfigError("argument --compilation-config: cudagraph_capture_sizes must be a list of positive integers")
    cap = raw.get("max_cudagraph_capture_size")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        raise ConfigError("argument --compilation-config: max_cudagraph_capture_size must be an integer >= 1")
    mode = raw.get("cudagraph_mode")
    if mode is not None and str(mode).upper() not in CUDAGRAPH_MODES:
        raise ConfigError(f"argument --compilation-config: cudagraph_mode must be one of {', '.join(CUDAGRAPH_MODES)}")
    return raw


@dataclass
class StartupTimes:
    """Seconds each simulated startup phase takes (harness/sim/startup.py). The defaults split
    `--startup-delay` so the whole suite's simulators start in a fraction of a second; the
    `--sim-*-s` flags set realistic values (docs/startup.md)."""

    load_s: float
    compile_s: float  # cold: compile and write the cache
    compile_cached_s: float  # warm: load the compiled graphs from the cache
    profile_s: float  # KV-cache profiling run and allocation
    profile_cached_s: float  # the same with warm kernel caches (a start after the first with them kept)
    capture_s: float  # graph capture for the default 51 sizes; scales with the count
    init_s: float  # API server, tokenizer, the rest
    cache_dir: str | None  # compile cache root (None: no cache, every start compiles)


class ConfigError(ValueError):
    """A flag value the simulator cannot accept; the CLI prints it and exits 2."""


def parse_human_int(text: str, flag: str) -> int:
    """vLLM's `human_readable_int`: `25.6k` = 25,600 (decimal k/m/g), `1K` = 1,024 (binary K/M/G)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)\s*", text)
    if not m:
        raise ConfigError(f"argument {flag}: invalid value {text!r} (expected an integer such as 8192, 8k or 8K)")
    number, suffix = float(m.group(1)), m.group(2)
    if suffix:
        power = "kmgt".index(suffix.lower()) + 1
        number *= (1000 if suffix.islower() else 1024) ** power
    if number != int(number):
        raise ConfigError(f"argument {flag}: {text!r} is not a whole number of tokens")
    return int(number)


def parse_max_model_len(text: str) -> int | None:
    """`None` means `auto` (`-1` or `auto`): the largest length that fits in the KV cache."""
    if text.strip().lower() in ("auto", "-1"):
        return None
    value = parse_human_int(text, "--max-model-len")
    if value <= 0:
        raise ConfigError("argument --max-model-len: must be positive, or -1/auto")
    return value


def parse_bytes(text: str) -> int:
    """`--kv-cache-memory-bytes`: `8589934592`, `8G`/`8Gi`/`8GiB` (binary) or `8g` (decimal)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:([kKmMgGtT])(i?)B?)?\s*", text)
    if not m:
        raise ConfigError(f"argument --kv-cache-memory-bytes: invalid value {text!r} (expected bytes such as 8G)")
    number, suffix, binary = float(m.group(1)), m.group(2), m.group(3)
    if suffix:
        number *= (1024 if (binary or suffix.isupper()) else 1000) ** ("kmgt".index(suffix.lower()) + 1)
    return int(number)


@dataclass
class SpecConfig:
    """`--speculative-config`: k draft tokens, each accepted with probability `acceptance_rate`
    given all earlier positions were accepted (a geometric acceptance chain)."""

    method: str
    num_speculative_tokens: int
    acceptance_rate: float

    @classmethod
    def parse(cls, text: str) -> SpecConfig:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"argument --speculative-config: invalid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise ConfigError("argument --speculative-config: expected a JSON object")
        method = str(raw.get("method") or ("draft_model" if raw.get("model") else "ngram"))
        k = raw.get("num_speculative_tokens")
        if not isinstance(k, int) or k < 1:
            raise ConfigError("argument --speculative-config: num_speculative_tokens must be an integer >= 1")
        rate = raw.get("acceptance_rate", DEFAULT_ACCEPTANCE.get(method, 0.6))
        if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise ConfigError("argument --speculative-config: acceptance_rate must be in [0, 1]")
        return cls(method=method, num_speculative_tokens=k, acceptance_rate=float(rate))


@dataclass
class FaultConfig:
    error_rate: float = 0.0
    error_status: int = 500
    stall_every_s: float = 0.0
    stall_ms: float = 0.0
    disconnect_rate: float = 0.0
    crash_after_s: float = 0.0
    crash_after_requests: int = 0
    metrics: str | None = None  # slow | junk | html | absent
    metrics_delay_s: float = 3.0


@dataclass
class ScriptedConfig:
    ttft_ms: float
    itl_ms: float
    jitter_ms: float = 0.0


@dataclass
class ModelShape:
    """The simulated model; defaults are Llama-3.1-8B."""

    layers: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    params_b: float = 8.03
    max_position: int = 131072


@dataclass
class SimConfig:
    # served API
    served_model_names: list[str]
    host: str
    port: int
    # scheduler
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    # memory
    gpu_memory_utilization: float
    kv_cache_memory_bytes: int | None
    max_model_len: int | None  # None = auto, resolved by the memory plan
    kv_cache_dtype: str
    block_size: int
    num_gpu_blocks_override: int | None
    enforce_eager: bool
    tensor_parallel_size: int
    weight_bytes_per_param: float
    speculative: SpecConfig | None
    # simulator-only
    model: ModelShape
    gpu_memory_gib: float
    gpu_memory_used_gib: float
    hbm_tbps: float
    tflops: float
    speed: float
    eos_prob: float
    startup_delay: float
    seed: int
    trace_path: str | None
    log_stats: bool
    log_stats_interval: float
    force_include_usage: bool
    prompt_tokens_details: bool
    per_request_metrics: bool
    scripted: ScriptedConfig | None
    faults: FaultConfig = field(default_factory=FaultConfig)
    max_num_batched_tokens_set: bool = False
    # CUDA graphs and compilation (harness/sim/startup.py); both empty/NONE with --enforce-eager
    capture_sizes: list[int] = field(default_factory=list)
    cudagraph_mode: str = "FULL_AND_PIECEWISE"
    startup: StartupTimes | None = None
    attention_backend: str = "FLASH_ATTN"
    # greedy-output divergence of lossy settings (harness/sim/greedy.py)
    quantization: str | None = None
    fp8_kv_error: float = 0.0
    quant_error: float = 0.0
    # CUDA graphs while serving (harness/sim/graphs.py): compile stall and pool growth per uncaptured size
    recompile_ms: float = 40.0
    graph_mib_per_shape: float = 150.0
    lora: LoraConfig | None = None  # --enable-lora (harness/sim/lora.py)
    # cost-model constants a named profile calibrates (harness/sim/profiles.py); defaults: an H100
    step_overhead_s: float = 4.0e-3  # per step with CUDA graphs
    eager_overhead_s: float = 10.0e-3  # per step with --enforce-eager
    seq_overhead_s: float = 0.0  # per running sequence per step (sampling, bookkeeping)
    request_overhead_s: float = 0.0  # API server + tokenization before a request reaches the scheduler
    frontend_seq_s: float = 0.0  # more of that delay per sequence already running (the API server's busy loop)
    admit_full_prompt: bool = False  # vLLM's --scheduler-reserve-full-isl: the whole prompt's blocks must be free
    graph_gib: float = 0.42  # CUDA-graph pool taken at capture
    activation_gib: float | None = (
        None  # non-torch + activation peak of the profiling run (None: from the token budget)
    )

    @property
    def lora_names(self) -> list[str]:
        return list(self.lora.modules) if self.lora is not None else []

    @property
    def greedy_errors(self) -> tuple[tuple[int, float], ...]:
        """(salt, rate) per active lossy setting: fp8 KV cache, quantized weights."""
        from harness.sim.greedy import FP8_KV_SALT, QUANT_SALT

        out = []
        if self.kv_cache_dtype.startswith("fp8") and self.fp8_kv_error:
            out.append((FP8_KV_SALT, self.fp8_kv_error))
        if self.quantization and self.quant_error:
            out.append((QUANT_SALT, self.quant_error))
        return tuple(out)

    @property
    def served_model_name(self) -> str:
        return self.served_model_names[0]

    @property
    def kv_dtype_bytes(self) -> int:
        return KV_DTYPE_BYTES[self.kv_cache_dtype]

    @property
    def kv_heads_per_gpu(self) -> int:
        # vLLM replicates KV heads when tp > kv_heads.
        return max(1, math.ceil(self.model.kv_heads / self.tensor_parallel_size))

    @property
    def kv_bytes_per_token(self) -> int:
        """Per GPU: 2 (K and V) x layers x kv_heads/tp x head_dim x dtype bytes."""
        return 2 * self.model.layers * self.kv_heads_per_gpu * self.model.head_dim * self.kv_dtype_bytes

    @property
    def weight_bytes(self) -> int:
        """Per GPU."""
        return int(self.model.params_b * 1e9 * self.weight_bytes_per_param / self.tensor_parallel_size)

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> SimConfig:
        if a.enable_per_request_metrics and a.disable_log_stats:  # vLLM 0.32 refuses the pair at startup too
            raise ConfigError(
                "Error: --enable-per-request-metrics requires engine statistics logging; remove "
                "--disable-log-stats to enable per-request metrics."
            )
        if a.block_size not in ALLOWED_BLOCK_SIZES:
            raise ConfigError(
                f"argument --block-size: invalid choice: {a.block_size} (choose from {', '.join(map(str, ALLOWED_BLOCK_SIZES))})"
            )
        for name in ("max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks_override"):
            value = getattr(a, name)
            if value is not None and value < 1:  # -4 seqs would queue every request forever
                raise ConfigError(f"argument --{name.replace('_', '-')}: must be >= 1 (got {value})")
        if a.tensor_parallel_size < 1:
            raise ConfigError("argument --tensor-parallel-size: must be >= 1")
        if a.sim_speed <= 0:
            raise ConfigError("argument --sim-speed: must be > 0")
        if not 0.0 <= a.sim_eos_prob <= 1.0:
            raise ConfigError("argument --sim-eos-prob: must be in [0, 1]")
        for name in ("sim_fp8_kv_error", "sim_quant_error"):
            if not 0.0 <= getattr(a, name) <= 1.0:
                raise ConfigError(
                    f"argument --{name.replace('_', '-')}: must be in [0, 1] (the share of greedy outputs that diverge)"
                )
        for name in ("fault_error_rate", "fault_disconnect_rate"):
            if not 0.0 <= getattr(a, name) <= 1.0:
                raise ConfigError(f"argument --{name.replace('_', '-')}: must be in [0, 1]")
        if a.sim_recompile_ms < 0 or a.sim_graph_mib_per_shape < 0:
            raise ConfigError("argument --sim-recompile-ms/--sim-graph-mib-per-shape: must be >= 0")
        if a.fault_stall_every_s < 0 or a.fault_stall_ms < 0:
            raise ConfigError("argument --fault-stall-every-s/--fault-stall-ms: must be >= 0")
        if (a.scripted_ttft_ms is None) != (a.scripted_itl_ms is None):
            raise ConfigError("scripted mode needs both --scripted-ttft-ms and --scripted-itl-ms")
        lora = None
        if a.lora_modules and not a.enable_lora:
            raise ConfigError("argument --lora-modules: needs --enable-lora")
        if a.enable_lora:
            if a.max_loras < 1:
                raise ConfigError("argument --max-loras: must be >= 1")
            if a.max_cpu_loras is not None and a.max_cpu_loras < a.max_loras:
                raise ConfigError(f"argument --max-cpu-loras: must be >= --max-loras ({a.max_loras})")
            if a.sim_lora_load_ms < 0 or a.sim_lora_swap_ms < 0:
                raise ConfigError("argument --sim-lora-load-ms/--sim-lora-swap-ms: must be >= 0")
            try:
                modules = parse_modules(a.lora_modules or [])
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            lora = LoraConfig(
                modules, a.max_loras, a.max_cpu_loras, a.sim_lora_load_ms / 1000, a.sim_lora_swap_ms / 1000
            )
        gpu_gib = a.sim_gpu_memory_gib
        # vLLM picks scheduler defaults by GPU class (arg_utils.py): >=160 GiB, >=70 GiB, else.
        default_seqs, default_tokens = (
            (1024, 16384) if gpu_gib >= 160 else (1024, 8192) if gpu_gib >= 70 else (256, 2048)
        )
        max_model_len = parse_max_model_len(a.max_model_len) if a.max_model_len is not None else a.sim_max_position
        max_num_batched_tokens = a.max_num_batched_tokens
        if max_num_batched_tokens is None and not a.enable_chunked_prefill:
            # Without chunking a whole prompt must fit one step (vLLM: max(max_model_len, 2048)).
            max_num_batched_tokens = max(max_model_len or a.sim_max_position, 2048)
        weight_bytes = WEIGHT_DTYPE_BYTES.get(a.dtype, 2.0)
        if a.quantization:
            if a.quantization not in QUANT_BYTES:
                raise ConfigError(f"argument --quantization: the simulator models {', '.join(sorted(QUANT_BYTES))}")
            weight_bytes = QUANT_BYTES[a.quantization]
        names = a.served_model_name or [a.model_flag or a.model or "sim-llama-8b"]
        scripted = None
        if a.scripted_ttft_ms is not None:
            if a.scripted_ttft_ms < 0 or a.scripted_itl_ms < 0 or a.scripted_jitter_ms < 0:
                raise ConfigError("scripted timings must be >= 0")
            scripted = ScriptedConfig(a.scripted_ttft_ms, a.scripted_itl_ms, a.scripted_jitter_ms)
        cc = parse_compilation_config(a.compilation_config)
        if a.max_cudagraph_capture_size is not None:
            if a.max_cudagraph_capture_size < 1:
                raise ConfigError("argument --max-cudagraph-capture-size: must be >= 1")
            cc.setdefault("max_cudagraph_capture_size", a.max_cudagraph_capture_size)
        if a.cuda_graph_sizes and any(x < 1 for x in a.cuda_graph_sizes):
            raise ConfigError("argument --cuda-graph-sizes: sizes must be >= 1")
        seqs = a.max_num_seqs or min(default_seqs, a.max_num_batched_tokens or default_seqs)
        step_tokens = max_num_batched_tokens or default_tokens
        mode = str(cc.get("cudagraph_mode") or "FULL_AND_PIECEWISE").upper()
        if a.enforce_eager or mode == "NONE":
            capture, mode = [], "NONE"
        else:
            capture = capture_sizes_from(a.cuda_graph_sizes, cc, seqs, step_tokens)
        startup = _startup_times(a)
        cfg = cls(
            served_model_names=list(names),
            host=a.host,
            port=a.port,
            # like vLLM, a defaulted max_num_seqs never exceeds an explicit token budget
            max_num_seqs=seqs,
            max_num_batched_tokens=step_tokens,
            max_num_batched_tokens_set=a.max_num_batched_tokens is not None,
            enable_chunked_prefill=a.enable_chunked_prefill,
            enable_prefix_caching=a.enable_prefix_caching,
            gpu_memory_utilization=a.gpu_memory_utilization,
            kv_cache_memory_bytes=parse_bytes(a.kv_cache_memory_bytes) if a.kv_cache_memory_bytes else None,
            max_model_len=max_model_len,
            kv_cache_dtype=a.kv_cache_dtype,
            block_size=a.block_size,
            num_gpu_blocks_override=a.num_gpu_blocks_override,
            enforce_eager=a.enforce_eager,
            tensor_parallel_size=a.tensor_parallel_size,
            weight_bytes_per_param=weight_bytes,
            speculative=SpecConfig.parse(a.speculative_config) if a.speculative_config else None,
            model=ModelShape(a.sim_layers, a.sim_kv_heads, a.sim_head_dim, a.sim_params_b, a.sim_max_position),
            gpu_memory_gib=gpu_gib,
            gpu_memory_used_gib=a.sim_gpu_memory_used_gib,
            hbm_tbps=a.sim_hbm_tbps,
            tflops=a.sim_tflops,
            speed=a.sim_speed,
            eos_prob=a.sim_eos_prob,
            startup_delay=max(0.0, a.startup_delay),
            seed=a.seed,
            trace_path=a.trace,
            log_stats=not a.disable_log_stats,
            log_stats_interval=a.sim_log_stats_interval,
            force_include_usage=a.enable_force_include_usage,
            prompt_tokens_details=a.enable_prompt_tokens_details,
            per_request_metrics=a.enable_per_request_metrics,
            scripted=scripted,
            faults=FaultConfig(
                error_rate=a.fault_error_rate,
                error_status=a.fault_error_status,
                stall_every_s=a.fault_stall_every_s,
                stall_ms=a.fault_stall_ms,
                disconnect_rate=a.fault_disconnect_rate,
                crash_after_s=a.fault_crash_after_s,
                crash_after_requests=a.fault_crash_after_requests,
                metrics=a.fault_metrics,
                metrics_delay_s=a.fault_metrics_delay_s,
            ),
            capture_sizes=capture,
            cudagraph_mode=mode,
            startup=startup,
            attention_backend=(a.attention_backend or "FLASH_ATTN").upper(),
            quantization=a.quantization,
            fp8_kv_error=a.sim_fp8_kv_error,
            quant_error=a.sim_quant_error,
            recompile_ms=a.sim_recompile_ms,
            graph_mib_per_shape=a.sim_graph_mib_per_shape,
            lora=lora,
            step_overhead_s=a.sim_step_overhead_ms / 1000,
            eager_overhead_s=a.sim_eager_overhead_ms / 1000,
            seq_overhead_s=a.sim_seq_overhead_us / 1e6,
            request_overhead_s=a.sim_request_overhead_ms / 1000,
            frontend_seq_s=a.sim_frontend_seq_us / 1e6,
            admit_full_prompt=bool(a.sim_admit_full_prompt),
            graph_gib=a.sim_graph_gib,
            activation_gib=a.sim_activation_gib,
        )
        return cfg


def _startup_times(a: argparse.Namespace) -> StartupTimes:
    """Phase seconds: each `--sim-*-s` flag, else its share of `--startup-delay`."""
    import os

    d = max(0.0, a.startup_delay)
    shares = {"load_s": 0.3, "compile_s": 0.25, "profile_s": 0.1, "capture_s": 0.2, "init_s": 0.15}
    values = {}
    for key, share in shares.items():
        given = getattr(a, f"sim_{key}")
        if given is not None and given < 0:
            raise ConfigError(f"argument --sim-{key.replace('_', '-')}: must be >= 0")
        values[key] = given if given is not None else d * share
    cached = a.sim_compile_cached_s
    if cached is not None and cached < 0:
        raise ConfigError("argument --sim-compile-cached-s: must be >= 0")
    if cached is None:
        cached = values["compile_s"] * 0.2
    profile_cached = a.sim_profile_cached_s
    if profile_cached is not None and profile_cached < 0:
        raise ConfigError("argument --sim-profile-cached-s: must be >= 0")
    values["profile_cached_s"] = values["profile_s"] if profile_cached is None else profile_cached
    cache_dir = a.sim_compile_cache or (
        os.path.join(os.environ["VLLM_CACHE_ROOT"], "torch_compile_cache")
        if os.environ.get("VLLM_CACHE_ROOT")
        else None
    )
    return StartupTimes(compile_cached_s=cached, cache_dir=cache_dir, **values)
