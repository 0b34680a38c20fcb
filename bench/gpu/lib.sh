# shellcheck shell=bash
# Helpers shared by the phase-by-phase GPU scripts (bench/gpu/h200_vllm.sh on one H200,
# bench/gpu/h200x2_tp_vs_replicas.sh on two): one copy of the deadline, dry-run, packing, model
# and --resume logic, so a fix to one reaches both. Sourced, never run; it starts nothing itself.
#
# The sourcing script sets, before it calls any of these:
#   W         its work directory (phase directories, <phase>.done markers)
#   OUTD      where pack_one writes <phase>.tgz (the device tool's $OUT)
#   LOG       the phase log say() appends to
#   MODEL     the model directory (ready when $MODEL/.harness-build-ok exists)
#   MODEL_BUILD_ARGS  extra build_model.py flags when wait_model must build it (optional)
#   DEADLINE  epoch seconds by which every harness command must have ended
#   RESUME    1: continue cut-short phases (--resume) and skip finished ones
#   DRY       1: print the commands instead of running them (--dry-run; 0 when unset)
#   PACK_EXCLUDE  extra tar --exclude options for pack_one (empty by default)
PACK_EXCLUDE=()

say() { echo "== $(date -u +%T) $*" | tee -a "$LOG"; }
left() { echo $(( DEADLINE - $(date +%s) )); }

# x CMD...: run it, or with --dry-run print it (quoted as a shell would read it) and succeed
x() {
  if [ "${DRY:-0}" -eq 1 ]; then printf '+'; printf ' %q' "$@"; printf '\n'; return 0; fi
  "$@"
}

# run "$@" with what is left of the deadline less a reserve, interrupted like Ctrl-C at the end
within() {
  local reserve=$1; shift
  local t=$(( $(left) - reserve ))
  if [ "$t" -le 20 ]; then say "no time left for: $*"; return 124; fi
  x timeout -s INT -k 40 "$t" "$@"
}

# $W/<phase> into $OUTD/<phase>.tgz; without requests.jsonl and figures when it would pass 15 MiB
# (what the device tool brings back)
pack_one() {  # $1 = phase directory name under $W
  local d=$1 f="$OUTD/$1.tgz"
  [ -d "$W/$d" ] || return 0
  tar -czf "$f" -C "$W" "${PACK_EXCLUDE[@]}" "$d" 2>/dev/null
  if [ "$(stat -c %s "$f")" -gt $((15 * 1048576)) ]; then
    tar -czf "$f" -C "$W" "${PACK_EXCLUDE[@]}" --exclude=requests.jsonl --exclude="*.png" "$d" 2>/dev/null
  fi
}

# wait for the model build (bench/gpu/build_model.py; started now when none runs)
wait_model() {
  [ "${DRY:-0}" -eq 1 ] && { x test -f "$MODEL/.harness-build-ok"; return 0; }
  local t=0
  until [ -f "$MODEL/.harness-build-ok" ]; do
    if [ "$t" -eq 0 ] && ! pgrep -f "build_model.py $MODEL" >/dev/null; then
      say "no model at $MODEL and no build running: building now"
      # shellcheck disable=SC2086  # MODEL_BUILD_ARGS: words, e.g. "--logit-scale 4 --echo"
      python3 bench/gpu/build_model.py "$MODEL" --size llama8b ${MODEL_BUILD_ARGS:-} >>"$W/build.log" 2>&1 || { say "model build failed"; return 1; }
    fi
    sleep 2; t=$((t + 2))
    [ "$(left)" -gt 60 ] || { say "model not ready before the deadline"; return 1; }
  done
}

# which directory argument a harness command gets: --out (fresh) or --resume (continue)
dir_args() {  # $1 = directory, $2 = the file that marks a started run
  local d=$1 marker=$2
  if [ -e "$d/$marker" ] && [ "$RESUME" -eq 1 ]; then echo "--resume $d"; return; fi
  if [ -e "$d" ] && [ "${DRY:-0}" -eq 0 ]; then local n=1; while [ -e "$d.$n" ]; do n=$((n + 1)); done; mv "$d" "$d.$n"; fi
  echo "--out $d"
}
done_or_run() {  # $1 = phase; true when it finished in an earlier call and --resume was given
  [ "$RESUME" -eq 1 ] && [ -f "$W/$1.done" ] && { say "$1: finished in an earlier call"; return 0; }
  rm -f "$W/$1.done"; return 1
}
