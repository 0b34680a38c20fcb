#!/usr/bin/env bash
# vLLM 0.26.0 on one lent H200, phase by phase, inside the device tool's limits: each call runs
# the phases it is given until a deadline, leaves everything under $OUT even when cut short, and a
# later call on the same warm machine continues with --resume. Run it after
# bench/gpu/carry_vllm.sh has installed vLLM into /tmp/site (docs/gpu.md has the call sequence).
#
#   bash bench/gpu/h200_vllm.sh [--resume] PHASE...
#
# Phases (priority order; results in $H200_WORK/<phase>/, default /tmp/h200):
#   model     build the Llama-3-8B-shape model into /tmp/llama8b (logit scale $H200_LOGIT_SCALE, default 4),
#             then its echo variant into /tmp/llama8b-echo, in the background (16 GB each; returns at once)
#   smoke     start vLLM on it, one streamed completion, /metrics, stop (the log is kept)
#   curve     harness sweep bench/gpu/vllm/curve.yaml (1-96 users) + curve_small_kv.yaml (768 MiB KV, auto length)
#   startup   harness startup bench/gpu/vllm/startup.yaml (graphs vs eager, cold vs warm)
#   tune      harness tune bench/gpu/vllm/tune.yaml beside a process holding $H200_HOG_GIB GiB (default 16)
#   capacity  start vLLM with the tune's final flags (defaults without a tune), harness capacity, stop
#   spec      harness sweep bench/gpu/vllm/spec.yaml (ngram speculation vs none, chat at 2 and 96 users)
#   spec_echo the same on the echo model (bench/gpu/vllm/spec_echo.yaml: drafts accepted at the upper bound)
#   tune_spec_echo  harness tune bench/gpu/vllm/tune_spec_echo.yaml (the speculative step on the echo model, 2 users)
#   window    harness sweep bench/gpu/vllm/window_start.yaml (open loop at 16 req/s: the window's first sends)
#
# --resume continues a phase that was cut short (the harness's own --resume) and skips finished
# ones; without it a phase that already has a directory is started afresh (the old one is kept
# as <phase>.N). The deadline is H200_DEADLINE (epoch seconds; default now + H200_LIMIT_S, 560):
# each harness command gets what is left less a reserve and is interrupted like Ctrl-C (finished
# cells kept). After every phase and at exit each phase directory is packed into $OUT/<phase>.tgz
# (requests.jsonl left out when it would pass 15 MiB) with node.tgz (NVML samples every second,
# the phase log, engine and carry logs): at most 8 files, as the device tool returns.
# Helpers shared with bench/gpu/h200x2_tp_vs_replicas.sh are in bench/gpu/lib.sh.
# shellcheck disable=SC2317  # the functions run through "phase_$phase" and the EXIT trap (shellcheck 0.9 misreads both)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
REPO=$PWD
W=${H200_WORK:-/tmp/h200}
MODEL=${H200_MODEL:-/tmp/llama8b}
OUTD=${OUT:-$W/out}
HOG_GIB=${H200_HOG_GIB:-16}
LOGIT_SCALE=${H200_LOGIT_SCALE:-4}
ECHO_MODEL=${MODEL}-echo
MODEL_BUILD_ARGS="--logit-scale $LOGIT_SCALE"
DEADLINE=${H200_DEADLINE:-$(( $(date +%s) + ${H200_LIMIT_S:-560} ))}
RESUME=0
[ "${1:-}" = "--resume" ] && { RESUME=1; shift; }
[ $# -ge 1 ] || { sed -n "2,/^# Helpers shared/p" "$0"; exit 2; }
mkdir -p "$W" "$OUTD"
LOG=$W/phases.log
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH="/tmp/site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
harness() { python3 -m harness.cli.main "$@"; }
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$REPO/bench/gpu/lib.sh"  # say, left, within, pack_one, wait_model, dir_args, done_or_run
PACK_EXCLUDE=(--exclude=caches)  # startup/caches: compile caches, not results

pack() {
  local d
  for d in curve small_kv startup tune capacity spec spec_echo tune_spec_echo window smoke; do pack_one "$d"; done
  tar -czf "$OUTD/node.tgz" -C / --ignore-failed-read \
    "${W#/}/phases.log" "${W#/}/nvml.csv" "${W#/}/build.log" "${W#/}/hog.log" "${W#/}/serve.log" "${W#/}/capacity-serve.log" \
    tmp/carry/log 2>/dev/null || true
}

# NVML (device-wide) every second for the whole call, appended across calls
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 1000 \
  >>"$W/nvml.csv" 2>/dev/null &
smi=$!
cleanup() { kill "$smi" 2>/dev/null; stop_hog; pack; }
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() {  # $1 = log file, rest = extra vLLM flags; sets SERVER_PID (the server itself, not a subshell)
  local log=$1; shift
  setsid nohup python3 -m vllm.entrypoints.cli.main serve "$MODEL" --host 127.0.0.1 --port 8000 \
    --enable-prompt-tokens-details --enable-per-request-metrics "$@" \
    >"$log" 2>&1 </dev/null &
  SERVER_PID=$!
  local t0=$SECONDS
  until curl -sf -m 2 http://127.0.0.1:8000/health >/dev/null; do
    kill -0 "$SERVER_PID" 2>/dev/null || { say "server exited: $(grep -E 'Error|error' "$log" | tail -3)"; return 1; }
    [ "$(left)" -gt 40 ] || { say "server not ready before the deadline"; return 1; }
    sleep 1
  done
  say "server ready in $((SECONDS - t0)) s (pid $SERVER_PID)"
}
stop_server() {
  [ -n "${SERVER_PID:-}" ] || return 0
  kill -TERM -- "-$SERVER_PID" 2>/dev/null || kill -TERM "$SERVER_PID" 2>/dev/null
  local _; for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$SERVER_PID" 2>/dev/null; SERVER_PID=""
}

HOG_PID=""
start_hog() {
  rm -f "$W/hog.ready"
  setsid nohup python3 bench/gpu/hog.py "$HOG_GIB" "$W/hog.ready" >>"$W/hog.log" 2>&1 </dev/null &
  HOG_PID=$!
  local _; for _ in $(seq 60); do [ -f "$W/hog.ready" ] && break; sleep 0.5; done
  say "another process holds $(cat "$W/hog.ready" 2>/dev/null || echo '?') GiB of the GPU (pid $HOG_PID)"
}
stop_hog() { [ -n "$HOG_PID" ] && kill -- "-$HOG_PID" 2>/dev/null; HOG_PID=""; rm -f "$W/hog.ready"; }

phase_model() {
  [ -f "$MODEL/.harness-build-ok" ] && { say "model ready: $MODEL"; return 0; }
  setsid nohup bash -c "python3 bench/gpu/build_model.py $MODEL --size llama8b --logit-scale $LOGIT_SCALE &&
    python3 bench/gpu/build_model.py $ECHO_MODEL --size llama8b --logit-scale $LOGIT_SCALE --echo" \
    >>"$W/build.log" 2>&1 </dev/null &
  say "model build started in the background (pid $!): $MODEL, then $ECHO_MODEL"
}

phase_smoke() {
  done_or_run smoke && return 0
  wait_model || return 1
  mkdir -p "$W/smoke"
  start_server "$W/smoke/serve.log" --max-model-len 8192 || { stop_server; return 1; }
  curl -sN -m 60 http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \
    -d "{\"model\":\"$MODEL\",\"prompt\":\"def hello(name):\",\"max_tokens\":32,\"stream\":true,\"ignore_eos\":true}" \
    >"$W/smoke/stream.txt"
  curl -s -m 10 http://127.0.0.1:8000/metrics >"$W/smoke/metrics.txt"
  say "smoke: $(grep -c '^data:' "$W/smoke/stream.txt") data lines; $(grep -E '^vllm:(kv_cache_usage_perc|num_preemptions_total)' "$W/smoke/metrics.txt" | tr '\n' ' ')"
  stop_server
  touch "$W/smoke.done"
}

phase_curve() {
  done_or_run curve && return 0
  wait_model || return 1
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main sweep bench/gpu/vllm/curve.yaml $(dir_args "$W/curve" index.json) || return $?
  pack_one curve
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main sweep bench/gpu/vllm/curve_small_kv.yaml $(dir_args "$W/small_kv" index.json) || return $?
  touch "$W/curve.done"
}

phase_startup() {
  done_or_run startup && return 0
  wait_model || return 1
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main startup bench/gpu/vllm/startup.yaml $(dir_args "$W/startup" startup.json) || return $?
  touch "$W/startup.done"
}

phase_tune() {
  done_or_run tune && return 0
  wait_model || return 1
  start_hog
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main tune bench/gpu/vllm/tune.yaml $(dir_args "$W/tune" tune.json)
  local rc=$?
  stop_hog
  [ "$rc" -eq 0 ] && touch "$W/tune.done"
  return "$rc"
}

phase_capacity() {
  done_or_run capacity && return 0
  wait_model || return 1
  # the tuned flags: tune.json's final command (the engine argv), less the launcher and the model
  local flags=()
  if [ -f "$W/tune/tune.json" ]; then
    mapfile -t flags < <(python3 - "$W/tune/tune.json" <<'EOF'
import json, sys
cmd = (json.load(open(sys.argv[1])).get("final") or {}).get("command") or []
skip = {"--host", "--port"}
out, i = [], cmd.index("serve") + 2 if "serve" in cmd else len(cmd)
while i < len(cmd):
    if cmd[i] in skip:
        i += 2
        continue
    out.append(cmd[i]); i += 1
print("\n".join(out))
EOF
)
  fi
  [ ${#flags[@]} -gt 0 ] || flags=(--max-model-len 8192)
  say "capacity: vLLM with ${flags[*]}"
  VLLM_SERVER_DEV_MODE=1 start_server "$W/capacity-serve.log" "${flags[@]}" || { stop_server; return 1; }
  local d=$W/capacity
  [ -e "$d" ] && [ "$RESUME" -eq 0 ] && mv "$d" "$d.$(date +%s)"
  within 40 python3 -m harness.cli.main capacity bench/gpu/vllm/capacity.yaml --target http://127.0.0.1:8000 \
    --model "$MODEL" --out "$d" --precision 0.1 --max-trials 6
  local rc=$?
  cp "$W/capacity-serve.log" "$d/" 2>/dev/null
  stop_server
  [ "$rc" -eq 0 ] && touch "$W/capacity.done"
  return "$rc"
}

phase_spec() {
  done_or_run spec && return 0
  wait_model || return 1
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main sweep bench/gpu/vllm/spec.yaml $(dir_args "$W/spec" index.json) || return $?
  touch "$W/spec.done"
}

phase_spec_echo() {
  done_or_run spec_echo && return 0
  MODEL=$ECHO_MODEL MODEL_BUILD_ARGS="--logit-scale $LOGIT_SCALE --echo" wait_model || return 1
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main sweep bench/gpu/vllm/spec_echo.yaml $(dir_args "$W/spec_echo" index.json) || return $?
  touch "$W/spec_echo.done"
}

phase_tune_spec_echo() {
  done_or_run tune_spec_echo && return 0
  MODEL=$ECHO_MODEL MODEL_BUILD_ARGS="--logit-scale $LOGIT_SCALE --echo" wait_model || return 1
  # shellcheck disable=SC2046
  within 45 python3 -m harness.cli.main tune bench/gpu/vllm/tune_spec_echo.yaml $(dir_args "$W/tune_spec_echo" tune.json) || return $?
  touch "$W/tune_spec_echo.done"
}

phase_window() {
  done_or_run window && return 0
  wait_model || return 1
  # shellcheck disable=SC2046
  within 30 python3 -m harness.cli.main sweep bench/gpu/vllm/window_start.yaml $(dir_args "$W/window" index.json) || return $?
  touch "$W/window.done"
}

nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$LOG"
say "phases: $* (resume $RESUME, $(left) s to the deadline)"
rc_all=0
for phase in "$@"; do
  case "$phase" in model | smoke | curve | startup | tune | capacity | spec | spec_echo | tune_spec_echo | window) ;; *) say "unknown phase $phase"; exit 2 ;; esac
  say "$phase: start ($(left) s left)"
  "phase_$phase"
  rc=$?
  say "$phase: exit $rc ($(left) s left)"
  pack
  [ "$rc" -ne 0 ] && [ "$rc_all" -eq 0 ] && rc_all=$rc
  [ "$(left)" -gt 60 ] || { say "deadline: stopping after $phase"; break; }
done
exit "$rc_all"
