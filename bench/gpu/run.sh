#!/usr/bin/env bash
# The GPU-node sweep, end to end: install what is missing, build the model, sweep two flags of
# `transformers serve` across restarts on two workloads, write the report.
#
#   bash bench/gpu/run.sh [OUT_DIR] [SWEEP]  (defaults results/gpu-sweep, bench/gpu/transformers_sweep.yaml)
#   bash bench/gpu/run.sh results/gpu-curve bench/gpu/transformers_load_curve.yaml   (load levels)
#
# On a node without network, put wheels for missing packages in .whl/ first (see docs/gpu.md);
# they are installed into /tmp/site. HARNESS_GPU_MODEL_SIZE=small builds a 0.16 B model instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-results/gpu-sweep}"
sweep="${2:-bench/gpu/transformers_sweep.yaml}"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
harness() { python3 -m harness.cli.main "$@"; }

nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv || true
python3 bench/gpu/build_model.py /tmp/harness-gpu-model --size "${HARNESS_GPU_MODEL_SIZE:-gpu}"
python3 bench/telemetry_nvml_check.py || true

harness sweep "$sweep" --out "$out"
harness report "$out"
echo "sweep results: $out"
