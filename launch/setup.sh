#!/usr/bin/env bash
# Set up bolt-agent in ./.venv on Debian/Ubuntu: system libraries, llama.cpp build, Python packages.
# Usage: launch/setup.sh [run|test]   ("test" also installs what the tests need: PulseAudio, pytest,
# llama-server, the web console with Chromium for its browser tests, the Reachy Mini SDK with its
# simulators; BOLT_LLAMA_SERVER=1 builds llama-server for "run" too; BOLT_CONSOLE=1 installs the
# console for "run"; BOLT_REACHY=1 installs the Reachy Mini SDK and dances for "run")
# Idempotent: re-running only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-run}"
PY="${PYTHON:-python3}"
LLAMA_VERSION="0.3.36"
WHEELHOUSE="${BOLT_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/bolt-agent/wheels}"

# --- system packages -----------------------------------------------------------------
pkgs=(python3-venv python3-dev build-essential cmake libportaudio2)
[ "$what" = test ] && pkgs+=(pulseaudio pulseaudio-utils libasound2-plugins shellcheck chromium chromium-driver)
# Reachy Mini: its SDK builds PyGObject (girepository, cairo) and every daemon mode imports
# GStreamer's typelibs; the simulator's eye camera renders offline (EGL); the tests run the
# daemon in a network namespace (iproute2).
reachy=0; { [ "$what" = test ] || [ "${BOLT_REACHY:-0}" = 1 ]; } && reachy=1
[ $reachy = 1 ] && pkgs+=(libgirepository1.0-dev libcairo2-dev pkg-config gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 libegl1 libegl-mesa0 libgl1-mesa-dri)
[ "$what" = test ] && pkgs+=(iproute2 espeak-ng)  # espeak-ng: a second voice for the turn-taking set
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo"; else
    echo "bolt-agent needs these system packages; install them and run again:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- virtual environment ---------------------------------------------------------------
"$PY" -c 'import sys; sys.exit(not ((3,10) <= sys.version_info[:2] <= (3,12)))' || {
  echo "bolt-agent needs Python 3.10-3.12; set PYTHON=/path/to/python3.x" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Earlier set-ups installed the whole pipecat-ai wheel without its dependencies (for the Smart Turn
# file, now unpacked below): pip's resolver then printed errors on every install. Remove it.
broken="$(.venv/bin/python -m pip check 2>/dev/null || true)"  # non-zero on any conflict (reachy's pin)
if grep -q '^pipecat-ai ' <<<"$broken"; then
  .venv/bin/python -m pip uninstall -q -y pipecat-ai
fi

# --- llama-cpp-python, built once per machine into a wheelhouse ---------------------------
# On x86-64 build for a portable AVX2 baseline: a "native" build can enable instructions
# (AMX, AVX-512 FP16) that the CPU reports but a VM does not allow (SIGILL seen here).
# On a Jetson set CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87" (see jetson/README.md).
if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = x86_64 ]; then
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"
fi
# The wheel is ctypes-based (tag py3-none-linux_ARCH): one build serves every Python version.
mkdir -p "$WHEELHOUSE"
if ! ls "$WHEELHOUSE"/llama_cpp_python-"$LLAMA_VERSION"-*linux_"$(uname -m)".whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $LLAMA_VERSION (compiles llama.cpp, about 5 minutes on 2 cores)..."
  .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir -w "$WHEELHOUSE" "llama-cpp-python==$LLAMA_VERSION"
fi

# --- bolt-agent and its Python dependencies (embedded models included) --------------------
extra=""; [ "$what" = test ] && extra="[test]"; [ "$what" = run ] && [ "${BOLT_CONSOLE:-0}" = 1 ] && extra="[console]"
.venv/bin/python -m pip install -q --find-links "$WHEELHOUSE" "llama-cpp-python==$LLAMA_VERSION"
.venv/bin/python -m pip install -q --find-links "$WHEELHOUSE" -e ".$extra"
# --- Smart Turn v3.2, the end-of-turn model: one file of the pipecat-ai wheel, not the framework --
# The wheel is kept in the wheelhouse; only the model, pipecat's feature code the tests check it
# against and pipecat's licence are unpacked, into the venv (agent/listening/smart_turn.py finds
# them there; a system service running this venv too).
SMART_TURN=.venv/share/bolt-agent/smart-turn
PIPECAT=pipecat-ai==1.14.0
PIPECAT_WHEEL="$WHEELHOUSE/pipecat_ai-1.14.0-py3-none-any.whl"
if [ ! -f "$SMART_TURN/data/smart-turn-v3.2-cpu.onnx" ]; then
  [ -f "$PIPECAT_WHEEL" ] || .venv/bin/python -m pip download -q --no-deps -d "$WHEELHOUSE" "$PIPECAT"
  st=pipecat/audio/turn/smart_turn
  .venv/bin/python launch/unpack.py "$PIPECAT_WHEEL" "$SMART_TURN" \
    "$st/data/smart-turn-v3.2-cpu.onnx=data/smart-turn-v3.2-cpu.onnx" \
    "$st/_whisper_features.py=_whisper_features.py" \
    "pipecat_ai-1.14.0.dist-info/licenses/LICENSE=LICENSE"
fi
# --- Reachy Mini SDK (and its simulators for the tests) -----------------------------------------
# reachy-mini >= 1.9 pins onnxruntime==1.27.0, whose session creation holds the GIL for a second
# (measured: piper's voice load stalls every other thread 0.9-1.3 s; 1.32 releases it). The SDK
# uses onnxruntime only for optional kinematics and face detection, so uv installs the extra with
# that one pin lifted (launch/reachy-overrides.txt); plain pip would downgrade onnxruntime.
if [ $reachy = 1 ]; then
  .venv/bin/python -m pip install -q "uv>=0.5"
  .venv/bin/uv pip install -q --python .venv/bin/python --override launch/reachy-overrides.txt \
    --find-links "$WHEELHOUSE" -e ".[reachy]"
fi
# --- test data too large for the repository (tests/data/README.md), fetched once per machine -------
# Gemma 4's vocabulary (15.8 MB) from the llama-cpp-python source archive on PyPI, the release built
# above; the archive itself (77 MB) is not kept.
if [ "$what" = test ]; then
  TEST_DATA="${XDG_CACHE_HOME:-$HOME/.cache}/bolt-agent/test-data"
  if [ ! -f "$TEST_DATA/ggml-vocab-gemma-4.gguf" ]; then
    echo "fetching the Gemma 4 vocabulary for the tests (llama-cpp-python $LLAMA_VERSION source archive)..."
    sdist="$(mktemp -d)"
    .venv/bin/python -m pip download -q --no-deps --no-binary :all: -d "$sdist" "llama-cpp-python==$LLAMA_VERSION"
    src="llama_cpp_python-$LLAMA_VERSION"
    .venv/bin/python launch/unpack.py "$sdist/$src.tar.gz" "$TEST_DATA" \
      "$src/vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf=ggml-vocab-gemma-4.gguf" \
      "$src/vendor/llama.cpp/LICENSE=LICENSE-llama.cpp"
    rm -rf "$sdist"
  fi
fi
# --- llama.cpp's server for [llm] engine = "llama-server", built once per machine --------------
# Only the llama-server target, into ~/.cache/bolt-agent/llama-server/VERSION-ARCH (about 15 minutes
# on 2 cores the first time, nothing later). For the tests, or with BOLT_LLAMA_SERVER=1 (on a Jetson
# together with the CUDA CMAKE_ARGS above).
if [ "$what" = test ] || [ "${BOLT_LLAMA_SERVER:-0}" = 1 ]; then
  PYTHON=.venv/bin/python bash launch/build_llama_server.sh >/dev/null
fi
echo "bolt-agent is installed in .venv ($what)"
