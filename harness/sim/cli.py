"""`harness sim` / `python -m harness.sim`: flags (vLLM spellings plus simulator-only ones).

Exit codes: 0 after SIGTERM/SIGINT, 1 when the engine fails to start (vLLM-like error lines on
stderr, before any HTTP is served), 2 for a flag error (one line on stderr, like argparse).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from harness.sim.config import KV_DTYPE_BYTES, ConfigError, SimConfig
from harness.sim.profiles import PROFILES


#: vLLM's switches are BooleanOptionalAction (`--X` / `--no-X`) since its flags come from config
#: dataclasses; a sweep renders `flag: false` as `--no-flag`. Checked against vLLM 0.32's
#: `vllm serve` parser: all of these, except --disable-log-stats (a plain switch there too).
def _switch(g: argparse._ActionsContainer, flag: str, help: str) -> None:
    """A vLLM switch: --X and --no-X (BooleanOptionalAction), off by default."""
    g.add_argument(flag, action=argparse.BooleanOptionalAction, default=False, help=help)


def vllm_spelling(argv: list[str]) -> list[str]:
    """`--max_num_seqs 8` and `--no_enforce_eager` as vLLM's FlexibleArgumentParser reads them:
    underscores in an option's name are dashes (the value after `=` is left alone)."""
    out = []
    for arg in argv:
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.stderr.flush()
        raise SystemExit(2)

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        return super().parse_known_args(vllm_spelling(list(sys.argv[1:] if args is None else args)), namespace)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="harness sim",
        description="Simulated vLLM-like engine: an OpenAI-compatible server whose timing comes from a "
        "continuous-batching scheduler, a paged KV cache and a GPU cost model.",
        allow_abbrev=False,
    )
    p.add_argument(
        "model", nargs="?", default=None, help="model name (used as the served name unless --served-model-name)"
    )
    g = p.add_argument_group("server (vLLM flags)")
    g.add_argument("--model", dest="model_flag", default=None, help="same as the positional model")
    g.add_argument("--served-model-name", nargs="+", default=None, help="names the API accepts (default sim-llama-8b)")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8000)
    g.add_argument("--uvicorn-log-level", default="info", help="accepted and ignored")
    g.add_argument("--disable-log-stats", action="store_true", help="no periodic 'Engine 000:' stats line")
    g.add_argument("--disable-log-requests", action="store_true", help="accepted and ignored (vLLM before 0.11)")
    _switch(g, "--enable-log-requests", help="accepted and ignored")
    _switch(g, "--disable-uvicorn-access-log", help="accepted and ignored")
    _switch(g, "--enable-request-id-headers", help="accepted; X-Request-Id is always echoed")
    _switch(g, "--enable-force-include-usage", help="usage on every streamed chunk")
    _switch(g, "--enable-prompt-tokens-details", help="usage.prompt_tokens_details.cached_tokens")
    _switch(
        g,
        "--enable-per-request-metrics",
        help="a `metrics` object (queue, TTFT from scheduling, decode times) on the final usage chunk, as vLLM 0.32",
    )
    _switch(g, "--trust-remote-code", help="accepted and ignored")
    g.add_argument("--seed", type=int, default=0)

    e = p.add_argument_group("engine (vLLM flags)")
    e.add_argument("--max-num-seqs", type=int, default=None)
    e.add_argument("--max-num-batched-tokens", type=int, default=None)
    e.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    e.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    e.add_argument("--gpu-memory-utilization", "--device-memory-utilization", type=float, default=0.92)
    e.add_argument("--kv-cache-memory-bytes", default=None, help="KV cache size; overrides --gpu-memory-utilization")
    e.add_argument("--max-model-len", default=None, help="tokens; 8192, 8k, 8K, or auto/-1 (largest that fits)")
    e.add_argument("--kv-cache-dtype", default="auto", choices=sorted(KV_DTYPE_BYTES))
    e.add_argument("--block-size", type=int, default=16)
    e.add_argument("--num-gpu-blocks-override", type=int, default=None)
    _switch(e, "--enforce-eager", help="no compilation, no CUDA graphs (faster start, slower steps)")
    e.add_argument(
        "--cuda-graph-sizes",
        type=int,
        nargs="+",
        default=None,
        help="one value: the largest captured batch size; several: the sizes (vLLM 0.10 spelling)",
    )
    e.add_argument(
        "--max-cudagraph-capture-size",
        type=int,
        default=None,
        help="largest captured batch size (default min(2 x max-num-seqs, 512))",
    )
    e.add_argument(
        "-cc",
        "--compilation-config",
        default=None,
        help="JSON; read: cudagraph_capture_sizes, max_cudagraph_capture_size, cudagraph_mode",
    )
    e.add_argument("--attention-backend", default=None, help="name printed in the startup log (FLASH_ATTN by default)")
    e.add_argument("-tp", "--tensor-parallel-size", type=int, default=1)
    e.add_argument(
        "-sc",
        "--speculative-config",
        default=None,
        help='JSON, e.g. {"method":"ngram","num_speculative_tokens":3,"acceptance_rate":0.6}',
    )
    _switch(e, "--enable-lora", help="serve LoRA adapters by name (--lora-modules)")
    e.add_argument(
        "--lora-modules",
        nargs="+",
        action="extend",
        default=None,
        metavar="NAME=PATH",
        help="adapters the API accepts as `model` (vLLM: name=path or a JSON object)",
    )
    e.add_argument("--max-loras", type=int, default=1, help="distinct adapters in one batch (GPU slots)")
    e.add_argument(
        "--max-cpu-loras", type=int, default=None, help="adapters kept in host memory (default: --max-loras)"
    )
    e.add_argument("--max-lora-rank", type=int, default=16, help="accepted and ignored")
    e.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "half", "float32", "float"])
    e.add_argument("-q", "--quantization", default=None)

    s = p.add_argument_group("simulator")
    s.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="a calibrated set of the --sim-* values below, fitted to a real engine (harness/sim/profiles.py); "
        "flags given beside it still win",
    )
    s.add_argument("--sim-layers", type=int, default=32)
    s.add_argument("--sim-kv-heads", type=int, default=8)
    s.add_argument("--sim-head-dim", type=int, default=128)
    s.add_argument("--sim-params-b", type=float, default=8.03, help="weights, billions of parameters")
    s.add_argument("--sim-max-position", type=int, default=131072, help="the model's native max length")
    s.add_argument("--sim-gpu-memory-gib", type=float, default=80.0)
    s.add_argument("--sim-gpu-memory-used-gib", type=float, default=0.0, help="memory held by other processes")
    s.add_argument("--sim-hbm-tbps", type=float, default=3.35, help="memory bandwidth, TB/s")
    s.add_argument("--sim-tflops", type=float, default=600.0, help="effective dense TFLOPS")
    s.add_argument("--sim-speed", type=float, default=1.0, help="speed factor: 2.0 = steps take half as long")
    s.add_argument(
        "--sim-eos-prob",
        type=float,
        default=0.002,
        help="per-token chance of EOS when ignore_eos is false (after min_tokens)",
    )
    s.add_argument(
        "--sim-fp8-kv-error",
        type=float,
        default=0.02,
        help="with --kv-cache-dtype fp8*: share of greedy outputs that diverge from the 16-bit ones",
    )
    s.add_argument(
        "--sim-quant-error",
        type=float,
        default=0.05,
        help="with --quantization: share of greedy outputs that diverge from the unquantized ones",
    )
    s.add_argument(
        "--sim-lora-load-ms",
        type=float,
        default=50.0,
        help="an adapter's load from disk into a GPU slot (not in the host cache)",
    )
    s.add_argument(
        "--sim-lora-swap-ms", type=float, default=5.0, help="an adapter's copy from the host cache into a GPU slot"
    )
    s.add_argument(
        "--sim-log-stats-interval", type=float, default=float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
    )
    s.add_argument(
        "--sim-recompile-ms",
        type=float,
        default=40.0,
        help="compile stall of a decode step whose batch size is above every CUDA-graph capture size (once per size)",
    )
    s.add_argument(
        "--sim-graph-mib-per-shape",
        type=float,
        default=150.0,
        help="graph-pool growth per batch size captured while serving (sim_gpu_memory_used_bytes)",
    )
    s.add_argument(
        "--startup-delay",
        type=float,
        default=0.5,
        help="seconds of a cold start, split over the phases below unless they are set",
    )
    s.add_argument("--sim-load-s", type=float, default=None, help="weight loading seconds")
    s.add_argument("--sim-compile-s", type=float, default=None, help="torch.compile seconds with an empty cache")
    s.add_argument(
        "--sim-compile-cached-s",
        type=float,
        default=None,
        help="seconds to load compiled graphs from the cache (default a fifth of --sim-compile-s)",
    )
    s.add_argument("--sim-profile-s", type=float, default=None, help="KV-cache profiling and allocation seconds")
    s.add_argument(
        "--sim-profile-cached-s",
        type=float,
        default=None,
        help="profiling seconds when an earlier start's kernel caches are there (default: --sim-profile-s)",
    )
    s.add_argument(
        "--sim-capture-s",
        type=float,
        default=None,
        help="CUDA-graph capture seconds for 51 sizes (scales with the number of capture sizes)",
    )
    s.add_argument("--sim-init-s", type=float, default=None, help="the rest: API server, tokenizer")
    s.add_argument(
        "--sim-compile-cache",
        default=None,
        metavar="DIR",
        help="compile cache root (default $VLLM_CACHE_ROOT/torch_compile_cache; unset = no cache)",
    )
    s.add_argument("--sim-step-overhead-ms", type=float, default=4.0, help="fixed cost of a step with CUDA graphs")
    s.add_argument(
        "--sim-eager-overhead-ms", type=float, default=10.0, help="fixed cost of a step with --enforce-eager"
    )
    s.add_argument("--sim-seq-overhead-us", type=float, default=0.0, help="cost per running sequence per step")
    s.add_argument(
        "--sim-request-overhead-ms",
        type=float,
        default=0.0,
        help="API server and tokenization before a request reaches the scheduler",
    )
    s.add_argument(
        "--sim-frontend-seq-us",
        type=float,
        default=0.0,
        help="more API-server delay before a request reaches the scheduler per sequence already running "
        "(the one event loop streams their tokens between the request's steps)",
    )
    s.add_argument(
        "--sim-admit-full-prompt",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="admit a waiting request only when KV blocks for its whole prompt are free (vLLM's "
        "--scheduler-reserve-full-isl, on by default since 2026); off: the first chunk's blocks suffice",
    )
    s.add_argument("--sim-graph-gib", type=float, default=0.42, help="GPU memory the CUDA-graph capture takes")
    s.add_argument(
        "--sim-activation-gib",
        type=float,
        default=None,
        help="non-torch + activation memory of the profiling run (default: from --max-num-batched-tokens)",
    )
    s.add_argument("--trace", default=None, metavar="FILE", help="JSONL ground truth of every write")

    sc = p.add_argument_group("scripted mode (fixed timing, independent of batching)")
    sc.add_argument("--scripted-ttft-ms", type=float, default=None)
    sc.add_argument("--scripted-itl-ms", type=float, default=None)
    sc.add_argument("--scripted-jitter-ms", type=float, default=0.0, help="uniform +/- offset on TTFT and each gap")

    f = p.add_argument_group("faults")
    f.add_argument("--fault-error-rate", type=float, default=0.0, help="fraction of requests answered with an error")
    f.add_argument("--fault-error-status", type=int, default=500, choices=[500, 429])
    f.add_argument("--fault-stall-every-s", type=float, default=0.0)
    f.add_argument("--fault-stall-ms", type=float, default=0.0)
    f.add_argument("--fault-disconnect-rate", type=float, default=0.0, help="fraction of streams cut mid-way")
    f.add_argument("--fault-crash-after-s", type=float, default=0.0, help="exit(1) this long after becoming ready")
    f.add_argument("--fault-crash-after-requests", type=int, default=0, help="exit(1) once N requests have finished")
    f.add_argument("--fault-metrics", choices=["slow", "junk", "html", "absent"], default=None)
    f.add_argument("--fault-metrics-delay-s", type=float, default=3.0, help="delay for --fault-metrics slow")
    return p


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The flags, with a `--profile`'s values as the defaults (flags given beside it win)."""
    first, _ = parser.parse_known_args(argv)
    if first.profile:
        parser.set_defaults(**PROFILES[first.profile])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parse(parser, argv)
        cfg = SimConfig.from_args(args)
    except SystemExit as exc:  # argparse: --help (0) or a flag error (2)
        return int(exc.code or 0)
    except ConfigError as exc:
        sys.stderr.write(f"{parser.prog}: error: {exc}\n")
        return 2

    from harness.sim.loop import new_event_loop
    from harness.sim.server import serve

    # Hand the GIL back within 1 ms (default 5 ms) when the trace-writer thread holds it.
    sys.setswitchinterval(0.001)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(serve(cfg))
    finally:
        loop.close()
