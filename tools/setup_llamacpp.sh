#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from source for the slow end-to-end tests (tests/e2e/
# test_llamacpp.py). Idempotent: does nothing when the cached binary already answers --version.
#
#   tools/setup_llamacpp.sh            (cache: $HARNESS_LLAMACPP_DIR, default .cache/llamacpp)
#
# Why from source: no registry ships a llama-server binary; the llama-cpp-python sdist on PyPI
# carries the whole llama.cpp tree under vendor/llama.cpp (tools/server, convert_hf_to_gguf.py).
# Only the server target is built (about 6 minutes on 2 cores); the web UI assets are not in the
# sdist, so the server is built without them (its HTTP API is all the harness needs).
# The binary ends up at $HARNESS_LLAMACPP_DIR/bin/llama-server, the source tree (gguf-py) at
# $HARNESS_LLAMACPP_DIR/llama.cpp.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${HARNESS_LLAMACPP_DIR:-$ROOT/.cache/llamacpp}"
PY="${PYTHON:-python3}"
VERSION="${HARNESS_LLAMACPP_PY_VERSION:-0.3.36}"   # llama-cpp-python sdist carrying llama.cpp
JOBS="${HARNESS_BUILD_JOBS:-2}"
BIN="$DIR/bin/llama-server"
STAMP="$DIR/.harness-setup-ok-$VERSION"

if [ -x "$BIN" ] && [ -f "$STAMP" ]; then
  echo "llama-server ready: $BIN"
  exit 0
fi

start=$(date +%s)
mkdir -p "$DIR/src" "$DIR/bin"
SDIST="$DIR/src/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  # (grep drops pip's noise about this machine's empty local index folders)
  "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$DIR/src" \
    "llama-cpp-python==$VERSION" 2>&1 | { grep -v "is ignored: it is neither" || true; }
fi
TREE="$DIR/src/llama_cpp_python-$VERSION"
[ -d "$TREE" ] || tar -xzf "$SDIST" -C "$DIR/src"
LLAMA="$TREE/vendor/llama.cpp"
[ -f "$LLAMA/CMakeLists.txt" ] || { echo "no vendor/llama.cpp in $SDIST" >&2; exit 1; }

BUILD="$DIR/build-$VERSION"
# LLAMA_BUILD_WEBUI does not exist in every version; cmake only warns about unused variables
nice -n 10 cmake -S "$LLAMA" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_WEBUI=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON >"$DIR/cmake.log" 2>&1 || { tail -30 "$DIR/cmake.log" >&2; exit 1; }
nice -n 10 cmake --build "$BUILD" --target llama-server -j "$JOBS" >"$DIR/build.log" 2>&1 \
  || { tail -40 "$DIR/build.log" >&2; exit 1; }

cp "$BUILD/bin/llama-server" "$BIN.tmp"
ln -sfn "$LLAMA" "$DIR/llama.cpp"   # the tree: gguf-py for tools/build_tiny_gguf.py
mv "$BIN.tmp" "$BIN"
"$BIN" --version 2>&1 | head -2
touch "$STAMP"
echo "llama-server ready: $BIN ($(( $(date +%s) - start )) s)"
