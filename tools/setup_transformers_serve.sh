#!/usr/bin/env bash
# Make `transformers serve` runnable on the CPU for the slow tests (tests/e2e/test_transformers_cpu.py),
# inside the vLLM CPU venv (tools/setup_vllm_cpu.sh). Idempotent.
#
#   tools/setup_transformers_serve.sh [VENV_DIR]   (default: $HARNESS_VLLM_VENV or .cache/vllm-venv)
#
# Why that venv: it already holds torch (CPU) and transformers 5.19 with every package of
# `transformers[serving]` (fastapi, uvicorn, starlette, openai, pydantic, rich) except
# `accelerate`, without which loading onto a device fails ("Using a `device_map` ... requires
# `accelerate`"). accelerate adds no other package there (pip --dry-run), so the vLLM install is
# untouched; a second torch venv would cost minutes and GiB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${HARNESS_VLLM_VENV:-$ROOT/.cache/vllm-venv}}"
ACCELERATE="1.15.0"

if [ ! -x "$VENV/bin/transformers" ]; then
  echo "no transformers CLI in $VENV: run tools/setup_vllm_cpu.sh $VENV first" >&2
  exit 1
fi
if [ -f "$VENV/.harness-transformers-serve-ok" ]; then
  echo "transformers serve ready: $VENV/bin/transformers"
  exit 0
fi
"$VENV/bin/python" -m pip install --quiet "accelerate==$ACCELERATE" 2>&1 | { grep -v "is ignored: it is neither" || true; }
"$VENV/bin/python" -c 'import accelerate, fastapi, uvicorn, transformers; print("transformers", transformers.__version__, "accelerate", accelerate.__version__)'
touch "$VENV/.harness-transformers-serve-ok"
echo "transformers serve ready: $VENV/bin/transformers"
