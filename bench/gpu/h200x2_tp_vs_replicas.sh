#!/usr/bin/env bash
# Issue 30 on two lent H200s (device kind nvidia-h200-x2): vLLM 0.26.0's tensor parallel width vs
# replicas on the Llama-3-8B shape, phase by phase inside the device tool's limits, the way
# bench/gpu/h200_vllm.sh does it for one GPU: each call runs the phases it is given until a
# deadline, leaves everything under $OUT even when cut short, and a later call on the same warm
# machine continues with --resume. Carry vLLM first with bench/gpu/carry_vllm.sh, exactly as for
# one GPU (its pieces, its calls; docs/gpu.md), on the nvidia-h200-x2 kind.
#
#   bash bench/gpu/h200x2_tp_vs_replicas.sh [--dry-run] [--resume] PHASE...
#
# Phases (priority order; results in $H200_WORK/<phase>/, default /tmp/h200x2):
#   model   build the Llama-3-8B-shape model into /tmp/llama8b in the background (16 GB; returns at once)
#   smoke   vLLM with -tp 2 on both GPUs (NCCL over NVLink, multicast off), one streamed completion,
#           /metrics, stop; then one -tp 1 engine per GPU (CUDA_VISIBLE_DEVICES=0 and =1) at once
#   sweep   harness sweep bench/gpu/vllm/tp_vs_replicas.yaml: tp 2 x 1 engine vs tp 1 x 2 replicas
#           (round-robin, prefix-affinity), chat and long-prompt mixes, 32 and 128 users
#   tune    harness tune bench/gpu/vllm/tune_parallelism.yaml: the parallelism step, tp 1 vs 2
#
# --dry-run prints every command a phase would run, runs the harness's own --plan of the sweep and
# the tune (which checks both files), and starts nothing else: no GPU, no server, no model build;
# it works on any machine with the repo (PYTHONPATH as in docs/gpu.md).
# --resume continues a phase that was cut short (the harness's own --resume) and skips finished
# ones; without it a phase that already has a directory is started afresh (the old one is kept as
# <phase>.N). The deadline is H200_DEADLINE (epoch seconds; default now + H200_LIMIT_S, 560): each
# harness command gets what is left less a reserve and is interrupted like Ctrl-C (finished cells
# kept). After every phase and at exit each phase directory is packed into $OUT/<phase>.tgz
# (requests.jsonl left out when it would pass 15 MiB) with node.tgz (NVML samples of both GPUs
# every second, the phase log, engine and carry logs). Results go to
# results/examples/gpu-2xh200-tp-vs-replicas/ (docs/gpu.md, issue 30).
#
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
# NVSHMEM_DISABLE_NVLS=1 are exported here and set again in the sweep's and tune's engine env
# (a program that uses multicast can take the host's shared GPUs out of service: the device notes).
# shellcheck disable=SC2317  # the functions run through "phase_$phase" and the EXIT trap (shellcheck 0.9 misreads both)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
REPO=$PWD
W=${H200_WORK:-/tmp/h200x2}
MODEL=${H200_MODEL:-/tmp/llama8b}
OUTD=${OUT:-$W/out}
DEADLINE=${H200_DEADLINE:-$(( $(date +%s) + ${H200_LIMIT_S:-560} ))}
RESUME=0
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --resume) RESUME=1; shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n 2,30p "$0"; exit 2; }
for phase in "$@"; do
  case "$phase" in model | smoke | sweep | tune) ;; *) echo "unknown phase $phase (model, smoke, sweep, tune)" >&2; exit 2 ;; esac
done
DRY_TMP=""
if [ "$DRY" -eq 1 ] && [ -z "${H200_WORK:-}" ]; then DRY_TMP=$(mktemp -d /tmp/h200x2-dry.XXXX); W=$DRY_TMP; fi
[ "$DRY" -eq 1 ] && OUTD=$W/out
mkdir -p "$W" "$OUTD"
LOG=$W/phases.log
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="/tmp/site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
SWEEP=bench/gpu/vllm/tp_vs_replicas.yaml
TUNE=bench/gpu/vllm/tune_parallelism.yaml
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$REPO/bench/gpu/lib.sh"  # say, left, x, within, pack_one, wait_model, dir_args, done_or_run

pack() {
  [ "$DRY" -eq 1 ] && return 0
  local d
  for d in smoke sweep tune; do pack_one "$d"; done
  tar -czf "$OUTD/node.tgz" -C / --ignore-failed-read \
    "${W#/}/phases.log" "${W#/}/nvml.csv" "${W#/}/build.log" tmp/carry/log 2>/dev/null || true
}

# NVML (both GPUs, device-wide) every second for the whole call, appended across calls
smi=""
if [ "$DRY" -eq 0 ]; then
  nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 1000 \
    >>"$W/nvml.csv" 2>/dev/null &
  smi=$!
fi
cleanup() { [ -n "$smi" ] && kill "$smi" 2>/dev/null; stop_servers; pack; [ -n "$DRY_TMP" ] && rm -rf "$DRY_TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVERS=()
start_server() {  # $1 = GPUs (CUDA_VISIBLE_DEVICES), $2 = port, $3 = log file, rest = extra vLLM flags
  local gpus=$1 port=$2 log=$3; shift 3
  if [ "$DRY" -eq 1 ]; then
    x env CUDA_VISIBLE_DEVICES="$gpus" python3 -m vllm.entrypoints.cli.main serve "$MODEL" --host 127.0.0.1 \
      --port "$port" --enable-prompt-tokens-details --enable-per-request-metrics "$@"
    return 0
  fi
  CUDA_VISIBLE_DEVICES=$gpus setsid nohup python3 -m vllm.entrypoints.cli.main serve "$MODEL" --host 127.0.0.1 \
    --port "$port" --enable-prompt-tokens-details --enable-per-request-metrics "$@" >"$log" 2>&1 </dev/null &
  SERVERS+=("$!:$port:$log")
}
wait_servers() {  # every started server answers /health, or one exited / the deadline came
  [ "$DRY" -eq 1 ] && return 0
  local t0=$SECONDS s pid port log
  for s in "${SERVERS[@]}"; do
    IFS=: read -r pid port log <<<"$s"
    until curl -sf -m 2 "http://127.0.0.1:$port/health" >/dev/null; do
      kill -0 "$pid" 2>/dev/null || { say "server on :$port exited: $(grep -E 'Error|error' "$log" | tail -3)"; return 1; }
      [ "$(left)" -gt 40 ] || { say "server on :$port not ready before the deadline"; return 1; }
      sleep 1
    done
    say "server on :$port ready after $((SECONDS - t0)) s (pid $pid)"
  done
}
stop_servers() {
  [ "$DRY" -eq 1 ] && { SERVERS=(); return 0; }
  local s pid _
  for s in "${SERVERS[@]}"; do pid=${s%%:*}; kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; done
  for s in "${SERVERS[@]}"; do
    pid=${s%%:*}
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pid" 2>/dev/null
  done
  SERVERS=()
}
one_completion() {  # $1 = port, $2 = file
  x curl -sN -m 60 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$MODEL\",\"prompt\":\"def hello(name):\",\"max_tokens\":32,\"stream\":true,\"ignore_eos\":true}" \
    -o "$2"
  x curl -s -m 10 "http://127.0.0.1:$1/metrics" -o "$2.metrics"
}

phase_model() {
  [ "$DRY" -eq 0 ] && [ -f "$MODEL/.harness-build-ok" ] && { say "model ready: $MODEL"; return 0; }
  if [ "$DRY" -eq 1 ]; then x python3 bench/gpu/build_model.py "$MODEL" --size llama8b; return 0; fi
  setsid nohup python3 bench/gpu/build_model.py "$MODEL" --size llama8b >>"$W/build.log" 2>&1 </dev/null &
  say "model build started in the background (pid $!): $MODEL"
}

phase_smoke() {
  done_or_run smoke && return 0
  wait_model || return 1
  x mkdir -p "$W/smoke"
  # tensor parallel over both GPUs: NCCL all-reduce with NVLink multicast off
  start_server 0,1 8000 "$W/smoke/serve-tp2.log" --max-model-len 8192 --tensor-parallel-size 2
  wait_servers || { stop_servers; return 1; }
  one_completion 8000 "$W/smoke/stream-tp2.txt"
  stop_servers
  # two replicas at once, one GPU each
  start_server 0 8000 "$W/smoke/serve-gpu0.log" --max-model-len 8192
  start_server 1 8001 "$W/smoke/serve-gpu1.log" --max-model-len 8192
  wait_servers || { stop_servers; return 1; }
  one_completion 8000 "$W/smoke/stream-gpu0.txt"
  one_completion 8001 "$W/smoke/stream-gpu1.txt"
  x nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
  stop_servers
  if [ "$DRY" -eq 0 ]; then
    say "smoke: tp2 $(grep -c '^data:' "$W/smoke/stream-tp2.txt") data lines; replicas $(grep -c '^data:' "$W/smoke/stream-gpu0.txt") + $(grep -c '^data:' "$W/smoke/stream-gpu1.txt")"
    touch "$W/smoke.done"
  fi
}

phase_sweep() {
  done_or_run sweep && return 0
  wait_model || return 1
  # the harness's own plan (every cell, engine start and command line; starts nothing): with --dry-run it runs
  [ "$DRY" -eq 1 ] && { python3 -m harness.cli.main sweep "$SWEEP" --plan || return $?; }
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main sweep "$SWEEP" $(dir_args "$W/sweep" index.json) || return $?
  [ "$DRY" -eq 0 ] && touch "$W/sweep.done"
  return 0
}

phase_tune() {
  done_or_run tune && return 0
  wait_model || return 1
  [ "$DRY" -eq 1 ] && { python3 -m harness.cli.main tune "$TUNE" --plan || return $?; }
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main tune "$TUNE" $(dir_args "$W/tune" tune.json) || return $?
  [ "$DRY" -eq 0 ] && touch "$W/tune.done"
  return 0
}

if [ "$DRY" -eq 1 ]; then
  say "dry run: printing the commands, starting nothing (work dir $W)"
else
  nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$LOG"
  [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] || { say "this needs two GPUs (device kind nvidia-h200-x2)"; exit 1; }
fi
say "phases: $* (resume $RESUME, $(left) s to the deadline)"
rc_all=0
for phase in "$@"; do
  say "$phase: start ($(left) s left)"
  "phase_$phase"
  rc=$?
  say "$phase: exit $rc ($(left) s left)"
  pack
  [ "$rc" -ne 0 ] && [ "$rc_all" -eq 0 ] && rc_all=$rc
  [ "$(left)" -gt 60 ] || { say "deadline: stopping after $phase"; break; }
done
exit "$rc_all"
