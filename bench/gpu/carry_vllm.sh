#!/usr/bin/env bash
# Carry vLLM 0.26.0 and its wheels to a GPU node that has no network, in pieces that fit the device
# tool's 64 MiB per call, and install them there. Idempotent and resumable: the node keeps one
# partial bundle in /tmp/carry; every call says what it holds, appends only the piece that comes
# next, skips one it already has, and names the first missing piece when a cold machine lost it.
#
# Here (a machine with PyPI; no device time):
#   bash bench/gpu/carry_vllm.sh download .whl/vllm          # pip download the wheels of bench/gpu/vllm/wheels.txt
#   bash bench/gpu/carry_vllm.sh prepare  .whl/vllm .dev/carry   # bundle, split, sha256, print the calls
# There (each call carries one piece folder, e.g. carry [".dev/carry/p03"]):
#   bash bench/gpu/carry_vllm.sh node .dev/carry/p03 [...]   # append; after the last piece: check, install
#   bash bench/gpu/carry_vllm.sh status                      # what the node holds (bytes, which pieces)
#
# After the last piece: the bundle's and the vLLM wheel's sha256 are checked, the wheels are
# installed with --no-deps into /tmp/site (the node's torch is never replaced), Python files are
# byte-compiled (vLLM's first import otherwise compiles them: ~18 s of the first start), and
# /tmp/site/.carry-ok records the bundle's sha256 (a second install is skipped). Use it with
#   export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0
# Each node call prints "[carry] piece k/n: +X MiB in Y s (node clock), held B of T bytes" and
# /tmp/carry/log keeps one line per call with the node's clock, so the seconds per call can be read
# back (docs/gpu.md has the measured figures). The machine stays warm 30 s after a call: issue the
# next call as soon as one returns; a cold machine has an empty /tmp and the status says "held 0".
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
MiB=1048576
LIMIT=$(( ${CARRY_LIMIT_MIB:-64} * MiB))        # one call: the working tree + what it carries
MARGIN=$((4 * MiB))        # room for the tree to grow between prepare and the calls (others land work)
NODE=${CARRY_NODE_DIR:-/tmp/carry}   # the node's partial bundle and log
SITE=${CARRY_SITE:-/tmp/site}       # where the wheels are installed
now() { date +%s.%N | cut -c1-14; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
die() { echo "[carry] $*" >&2; exit 2; }

tree_bytes() {  # what travels with every call: tracked + untracked files that git does not ignore
  (cd "$here" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
}

download() {
  local dst=${1:?usage: carry_vllm.sh download DIR}
  mkdir -p "$dst"
  local plats=() n
  for n in 28 27 26 24 17 5 31; do plats+=(--platform "manylinux_2_${n}_x86_64"); done
  plats+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
  # shellcheck disable=SC2046
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" \
    -d "$dst" $(grep -v '^#' "$here/bench/gpu/vllm/wheels.txt")
}

prepare() {
  local src=${1:?usage: carry_vllm.sh prepare SRC_DIR OUT_DIR} out=${2:?usage: carry_vllm.sh prepare SRC_DIR OUT_DIR}
  local whl; whl=$(ls "$src"/vllm-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || die "no vllm-*.whl in $src (run: carry_vllm.sh download $src)"
  local dup; dup=$(ls "$src"/*.whl | xargs -n1 basename | sed -E 's/-[0-9].*//' | tr 'A-Z_' 'a-z-' | sort | uniq -d)
  [ -z "$dup" ] || die "two versions of: $dup (keep one: pip stops the whole install)"
  rm -rf "$out"; mkdir -p "$out"
  tar -C "$src" -cf "$out/bundle.tar" $(cd "$src" && ls ./*.whl)
  local total; total=$(stat -c %s "$out/bundle.tar")
  local tree; tree=$(tree_bytes)
  local room=$((LIMIT - tree - MARGIN))
  [ "$room" -gt "$MiB" ] || die "the working tree ($((tree / MiB)) MiB) leaves no room under 64 MiB"
  local n=$(( (total + room - 1) / room ))
  local size=$(( ( (total + n - 1) / n + MiB - 1) / MiB * MiB ))
  split -b "$size" -d -a 2 "$out/bundle.tar" "$out/piece"
  local bsha; bsha=$(sha256sum "$out/bundle.tar" | cut -d' ' -f1)
  local vsha; vsha=$(sha256sum "$whl" | cut -d' ' -f1)
  local k=0 off=0 manifest="$out/manifest"
  {
    echo "total $total"; echo "pieces $n"; echo "bundle_sha256 $bsha"
    echo "vllm_wheel $(basename "$whl")"; echo "vllm_sha256 $vsha"
  } >"$manifest"
  for p in "$out"/piece??; do
    local s; s=$(stat -c %s "$p")
    echo "piece $k $off $s $(sha256sum "$p" | cut -d' ' -f1)" >>"$manifest"
    off=$((off + s)); k=$((k + 1))
  done
  k=0
  for p in "$out"/piece??; do
    local d; d=$(printf '%s/p%02d' "$out" "$k")
    mkdir -p "$d"; mv "$p" "$d/piece"; cp "$manifest" "$d/manifest"; echo "$k" >"$d/index"
    k=$((k + 1))
  done
  rm -f "$out/bundle.tar"
  echo "# bundle: $(ls "$src"/*.whl | wc -l) wheels, $((total / MiB)) MiB, sha256 $bsha"
  echo "# vLLM wheel $(basename "$whl") sha256 $vsha"
  echo "# tree $((tree / MiB)) MiB + piece $((size / MiB)) MiB per call (limit $((LIMIT / MiB)) MiB, margin $((MARGIN / MiB)) MiB): $n calls"
  for ((k = 0; k < n; k++)); do
    local d; d=$(printf '%s/p%02d' "$out" "$k")
    echo "call $((k + 1)): carry [\"$d\"]  command: bash bench/gpu/carry_vllm.sh node $d"
  done
}

held() { [ -f "$NODE/bundle.part" ] && stat -c %s "$NODE/bundle.part" || echo 0; }

status() {
  local h; h=$(held)
  echo "[carry] node holds $h bytes in $NODE/bundle.part$( [ -f "$SITE/.carry-ok" ] && echo "; installed: $SITE ($(cat "$SITE/.carry-ok"))")"
  [ -f "$NODE/log" ] && cat "$NODE/log"
  return 0
}

field() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

install_bundle() {
  local manifest=$1
  local bsha; bsha=$(field bundle_sha256 "$manifest")
  if [ -f "$SITE/.carry-ok" ] && [ "$(cat "$SITE/.carry-ok")" = "$bsha" ]; then
    echo "[carry] already installed in $SITE (bundle $bsha)"; return 0
  fi
  local t0; t0=$(now)
  local got; got=$(sha256sum "$NODE/bundle.part" | cut -d' ' -f1)
  if [ "$got" != "$bsha" ]; then
    echo "[carry] bundle sha256 $got != $bsha; pieces to send again:"
    local k off s sha
    while read -r _ k off s sha; do
      [ "$(tail -c +"$((off + 1))" "$NODE/bundle.part" | head -c "$s" | sha256sum | cut -d' ' -f1)" = "$sha" ] || echo "  piece $k"
    done < <(grep '^piece ' "$manifest")
    rm -f "$NODE/bundle.part"; echo "[carry] partial bundle removed: start again at piece 0"; exit 3
  fi
  rm -rf "$NODE/wheels"; mkdir -p "$NODE/wheels"
  tar -C "$NODE/wheels" -xf "$NODE/bundle.part"
  local w; w=$(field vllm_wheel "$manifest")
  echo "$(field vllm_sha256 "$manifest")  $NODE/wheels/$w" | sha256sum -c --quiet || die "vLLM wheel sha256 mismatch"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$NODE"/wheels/*.whl
  local t1; t1=$(now)
  python3 -m compileall -q -j 0 "$SITE" >/dev/null 2>&1 || true
  echo "$bsha" >"$SITE/.carry-ok"
  echo "[carry] installed $(ls "$NODE"/wheels/*.whl | wc -l) wheels into $SITE ($(du -sm "$SITE" | cut -f1) MiB): sha256 ok, install $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s, byte-compile $(since "$t1") s"
  echo "$(now) install $bsha" >>"$NODE/log"
}

node() {
  [ $# -ge 1 ] || die "usage: carry_vllm.sh node PIECE_DIR..."
  mkdir -p "$NODE"
  local manifest="" d
  for d in "$@"; do
    [ -f "$d/manifest" ] || die "$d has no manifest (carry the piece folders that prepare wrote)"
    manifest="$d/manifest"
    local k; k=$(cat "$d/index")
    local total n off s sha
    total=$(field total "$manifest"); n=$(field pieces "$manifest")
    read -r _ _ off s sha < <(awk -v k="$k" '$1 == "piece" && $2 == k' "$manifest")
    local h; h=$(held)
    local t0; t0=$(now)
    if [ "$h" -ge $((off + s)) ]; then
      echo "[carry] piece $((k + 1))/$n: already held ($h of $total bytes)"
    elif [ "$h" -eq "$off" ]; then
      [ "$(sha256sum "$d/piece" | cut -d' ' -f1)" = "$sha" ] || die "piece $k arrived damaged (sha256): carry it again"
      cat "$d/piece" >>"$NODE/bundle.part"
      h=$(held)
      echo "[carry] piece $((k + 1))/$n: +$((s / MiB)) MiB in $(since "$t0") s (node clock), held $h of $total bytes"
      echo "$t0 piece $k $s" >>"$NODE/log"
    else
      local want; want=$(awk -v h="$h" '$1 == "piece" && $3 == h {print $2}' "$manifest")
      echo "[carry] the node holds $h bytes: carry piece ${want:-0} next (this call brought piece $k)"
      [ "$h" -eq 0 ] && echo "[carry] (an empty /tmp: the machine went cold; start again at piece 0)"
      exit 3
    fi
  done
  if [ "$(held)" -eq "$(field total "$manifest")" ]; then
    install_bundle "$manifest"
    echo "[carry] seconds per call (node clock between pieces):"
    awk 'NR > 1 && $2 == "piece" {printf "  piece %s: %.1f s after the previous\n", $3, $1 - prev} {prev = $1}' "$NODE/log"
  fi
}

cmd=${1:-}; shift || true
case "$cmd" in
  download) download "$@" ;;
  prepare) prepare "$@" ;;
  node) node "$@" ;;
  status) status ;;
  *) echo "usage: carry_vllm.sh download DIR | prepare SRC_DIR OUT_DIR | node PIECE_DIR... | status" >&2; exit 2 ;;
esac
