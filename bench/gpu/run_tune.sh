#!/usr/bin/env bash
# The GPU-node tune and quality check, end to end: install what is missing, build the model,
# sample GPU memory with NVML (nvidia-smi) for the whole run, `harness tune` the transformers
# deployment (bench/gpu/tune_transformers.yaml), then the quality sweep (bf16 + CUDA graphs vs
# eager, fp16, float32; bench/gpu/transformers_quality.yaml); with HARNESS_GPU_STEPS also
# `harness startup` (bench/gpu/startup_transformers.yaml: cold vs warm, CUDA graphs vs eager).
#
#   bash bench/gpu/run_tune.sh [OUT_DIR]        (default results/gpu-tune; ~8 minutes on one H200)
#   HARNESS_GPU_STEPS="startup tune quality" bash bench/gpu/run_tune.sh OUT_DIR   (these, in this order)
#
# OUT_DIR/tune (tune.json, report.html, recommended.yaml, steps/), OUT_DIR/quality (a sweep with
# quality.json), OUT_DIR/startup (startup.json, report.html), OUT_DIR/nvml.csv (GPU memory every second). HARNESS_GPU_LIMIT_S=N stops the work
# (SIGINT: finished cells kept) so that the script ends within N seconds of its start, for a
# machine lent by the minute; rerun with the same OUT_DIR to resume what was cut.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-results/gpu-tune}"
limit="${HARNESS_GPU_LIMIT_S:-0}"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
# `timeout` runs programs, not shell functions: the CLI is spelt out below
# run "$@" with what is left of the limit (less a reserve), interrupted like Ctrl-C at the end
within() {
  local reserve=$1; shift
  if [ "$limit" -le 0 ]; then "$@"; return; fi
  local left=$((limit - SECONDS - reserve))
  if [ "$left" -le 30 ]; then echo "skipped (time limit): $*"; return 124; fi
  timeout -s INT -k 20 "$left" "$@"
}

mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv || true
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv,nounits -lms 1000 >"$out/nvml.csv" 2>/dev/null &
smi=$!
trap 'kill "$smi" 2>/dev/null' EXIT
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" || true
python3 bench/gpu/build_model.py /tmp/harness-gpu-model --size "${HARNESS_GPU_MODEL_SIZE:-gpu}" || exit 1

tune() {
  local dir=(--out "$out/tune")
  [ -f "$out/tune/tune.json" ] && dir=(--resume "$out/tune")
  within 30 python3 -m harness.cli.main tune bench/gpu/tune_transformers.yaml "${dir[@]}"
}
quality() {
  local dir=(--out "$out/quality")
  [ -f "$out/quality/index.json" ] && dir=(--resume "$out/quality")
  within 10 python3 -m harness.cli.main sweep bench/gpu/transformers_quality.yaml "${dir[@]}"
}
startup() {
  local dir=(--out "$out/startup")
  [ -f "$out/startup/startup.json" ] && dir=(--resume "$out/startup")
  within 20 python3 -m harness.cli.main startup bench/gpu/startup_transformers.yaml "${dir[@]}"
}
rc_all=0
for step in ${HARNESS_GPU_STEPS:-tune quality}; do
  echo "== $step $(date -u +%T)"
  "$step"
  rc=$?
  echo "== $step exit $rc"
  [ "$rc" -ne 0 ] && [ "$rc_all" -eq 0 ] && rc_all=$rc
done
echo "== done $(date -u +%T), ${SECONDS}s"
exit "$rc_all"
