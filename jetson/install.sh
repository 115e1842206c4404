#!/usr/bin/env bash
# One-command install of bolt-agent as a systemd service on a Jetson (JetPack 6), from this checkout.
#
# Usage: sudo jetson/install.sh [--dry-run] [--prefix DIR] [--no-cuda] [--skip-models] [--skip-venv] [--no-start]
#   --dry-run      print every step and what it would do; change nothing
#   --prefix DIR   install the files (config, udev rule, unit) under DIR instead of / (a staging
#                  root, as for tests): steps that change the running system (apt, the user,
#                  systemctl, udevadm, ownership) only print "would ..."
#   --no-cuda      build llama.cpp for the CPU (default: CUDA for sm_87 when nvcc is found)
#   --skip-models  do not run `bolt-agent models pull`
#   --skip-venv    do not create or update the virtual environment (launch/setup.sh)
#   --no-start     enable the service but do not (re)start it
#
# Steps, each a function that checks before it acts (re-running does only what is missing):
#   apt      system packages (python3-venv, python3-dev, build-essential, cmake, libportaudio2, ...)
#   user     the `bolt` system user in groups audio, dialout, video, render
#   venv     launch/setup.sh run: .venv with llama-cpp-python, and llama-server (BOLT_LLAMA_SERVER=1);
#            with CUDA: CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87", CUDACXX=nvcc (and
#            its folder on PATH), wheels in build/wheels-cuda; a CPU-only llama-cpp-python already
#            in the venv is replaced by the CUDA wheel (pip --force-reinstall --no-deps)
#   config   /etc/bolt-agent/robot.toml from jetson/robot.toml, only when absent (your edits stay)
#   udev     /etc/udev/rules.d/99-bolt-servo.rules: /dev/bolt-servo and /dev/serial/by-id/bolt-servo
#            for USB-serial servo boards (see the rule file to add your board's vendor id)
#   unit     /etc/systemd/system/bolt-agent.service (paths pointed at this checkout), enabled
#   models   bolt-agent models pull --config /etc/bolt-agent/robot.toml, as the bolt user
#   start    systemctl restart bolt-agent
set -euo pipefail

APP_DIR="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="/"
DRY=0
CUDA=auto
SKIP_MODELS=0
SKIP_VENV=0
START=1
SERVICE_USER="${BOLT_USER:-bolt}"
GROUPS_WANTED=(audio dialout video render)
APT_PACKAGES=(python3-venv python3-dev build-essential cmake git libportaudio2 alsa-utils)
STATE_DIR=/var/lib/bolt-agent

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --prefix) PREFIX="${2:?--prefix needs a directory}"; shift ;;
    --prefix=*) PREFIX="${1#--prefix=}" ;;
    --no-cuda) CUDA=off ;;
    --cuda) CUDA=on ;;
    --skip-models) SKIP_MODELS=1 ;;
    --skip-venv) SKIP_VENV=1 ;;
    --no-start) START=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

PREFIX="${PREFIX%/}"                       # "" for the real root
SYSTEM=1                                   # 1: this is the running system (apt, users, systemctl)
[ -n "$PREFIX" ] && SYSTEM=0
ETC_DIR="$PREFIX/etc/bolt-agent"
CONFIG="$ETC_DIR/robot.toml"
UDEV_RULE="$PREFIX/etc/udev/rules.d/99-bolt-servo.rules"
UNIT="$PREFIX/etc/systemd/system/bolt-agent.service"

# JetPack puts nvcc in /usr/local/cuda/bin, which is not on root's PATH.
NVCC="$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)"
if [ "$CUDA" = auto ]; then
  if [ -x "$NVCC" ]; then CUDA=on; else CUDA=off; fi
fi
LLAMA_VERSION="$(sed -n 's/^LLAMA_VERSION="\(.*\)"$/\1/p' "$APP_DIR/launch/setup.sh")"

step() { echo "== $1: $2"; }
ok() { echo "   ok: $*"; }
# Run a command, or print it in a dry run.
act() {
  if [ "$DRY" = 1 ]; then echo "   would run: $*"; else echo "   + $*"; "$@"; fi
}
# A change to the running system: done only when installing into / (not into a --prefix).
sys_act() {
  if [ "$DRY" = 1 ] || [ "$SYSTEM" = 0 ]; then echo "   would run: $*"; else echo "   + $*"; "$@"; fi
}
# Install file $2 with the content of file $1 (mode $3) unless it already has that content.
put_file() {
  local src="$1" dest="$2" mode="$3"
  if [ -f "$dest" ] && cmp -s "$src" "$dest"; then
    ok "$dest is up to date"
  elif [ "$DRY" = 1 ]; then
    echo "   would write $dest"
  else
    echo "   writing $dest"
    install -D -m "$mode" "$src" "$dest"
  fi
}
need_root() {
  if [ "$SYSTEM" = 1 ] && [ "$DRY" = 0 ] && [ "$(id -u)" != 0 ]; then
    echo "install.sh changes the system: run it with sudo (or use --dry-run / --prefix DIR)" >&2
    exit 1
  fi
}

step_apt() {
  step apt "system packages: ${APT_PACKAGES[*]}"
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then ok "all installed"; return; fi
  sys_act apt-get update -qq
  sys_act env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

step_user() {
  step user "system user '$SERVICE_USER' in groups ${GROUPS_WANTED[*]}"
  local groups=() g
  for g in "${GROUPS_WANTED[@]}"; do
    if getent group "$g" >/dev/null 2>&1; then groups+=("$g"); else echo "   note: group $g does not exist here"; fi
  done
  local csv
  csv="$(IFS=,; echo "${groups[*]}")"
  if ! id "$SERVICE_USER" >/dev/null 2>&1; then
    sys_act useradd --system --create-home --shell /usr/sbin/nologin ${csv:+--groups "$csv"} "$SERVICE_USER"
    return
  fi
  local have missing=()
  have=" $(id -nG "$SERVICE_USER") "
  for g in "${groups[@]}"; do [[ "$have" == *" $g "* ]] || missing+=("$g"); done
  if [ ${#missing[@]} -eq 0 ]; then ok "$SERVICE_USER exists with its groups"; return; fi
  sys_act usermod --append --groups "$(IFS=,; echo "${missing[*]}")" "$SERVICE_USER"
}

step_venv() {
  local cmake_args=""
  if [ "$CUDA" = on ]; then cmake_args="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87"; fi
  step venv "$APP_DIR/.venv via launch/setup.sh run (llama.cpp: ${cmake_args:-CPU build}; llama-server too)"
  if [ "$SKIP_VENV" = 1 ]; then ok "skipped (--skip-venv)"; return; fi
  if [ "$CUDA" = on ]; then
    if [ "$DRY" = 0 ] && [ ! -x "$NVCC" ]; then echo "no nvcc at $NVCC: install CUDA (JetPack) or use --no-cuda" >&2; exit 1; fi
    # For both builds: CMake finds the CUDA compiler through CUDACXX, nvcc its tools through PATH.
    CUDACXX="$NVCC"
    PATH="$(dirname "$NVCC"):$PATH"
    export CUDACXX PATH
    echo "   export CUDACXX=$NVCC PATH=$(dirname "$NVCC"):\$PATH"
  fi
  # A separate wheelhouse for the CUDA build, so a CPU wheel built earlier is never reused.
  local wheels="$APP_DIR/build/wheels${cmake_args:+-cuda}"
  act env ${cmake_args:+CMAKE_ARGS="$cmake_args"} BOLT_LLAMA_SERVER=1 BOLT_WHEELHOUSE="$wheels" \
    BOLT_LLAMA_SERVER_CACHE="$APP_DIR/build/llama-server" bash "$APP_DIR/launch/setup.sh" run
  if [ "$CUDA" = on ]; then cuda_wheel "$wheels"; fi
}

# setup.sh leaves an installed llama-cpp-python of the same version alone, even a CPU-only one
# (from an earlier CPU install): replace it with the CUDA wheel unless it already offloads to the GPU.
cuda_wheel() {
  local wheels="$1" py="$APP_DIR/.venv/bin/python" wheel
  local probe='import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)'
  if [ "$DRY" = 0 ] && "$py" -c "$probe" 2>/dev/null; then ok "llama-cpp-python offloads to the GPU"; return; fi
  wheel="$wheels/llama_cpp_python-$LLAMA_VERSION-*.whl"
  if [ "$DRY" = 0 ]; then
    wheel="$(find "$wheels" -maxdepth 1 -name "llama_cpp_python-$LLAMA_VERSION-*.whl" | head -n 1)"
    [ -n "$wheel" ] || { echo "no CUDA wheel of llama-cpp-python $LLAMA_VERSION in $wheels" >&2; exit 1; }
  fi
  act "$py" -m pip install -q --force-reinstall --no-deps "$wheel"
}

step_config() {
  step config "$CONFIG from jetson/robot.toml (only when absent)"
  if [ -f "$CONFIG" ]; then ok "$CONFIG exists: kept as it is"; return; fi
  put_file "$APP_DIR/jetson/robot.toml" "$CONFIG" 0644
}

write_udev_rule() {
  cat <<'EOF'
# bolt-agent: a stable name for the servo board's USB-serial adapter (written by jetson/install.sh).
# The board appears as /dev/bolt-servo and /dev/serial/by-id/bolt-servo whatever ttyUSB/ttyACM
# number it gets; point [robot] port at one of them.
# Your adapter is not listed? Find its ids with
#   udevadm info --attribute-walk --name=/dev/ttyUSB0 | grep -m2 -E 'idVendor|idProduct'
# and add a line like the ones below to /etc/udev/rules.d/99-bolt-servo-local.rules (this file is
# rewritten by install.sh); with two matching adapters plugged in, add ATTRS{serial}=="..." to pick one.
# Then: sudo udevadm control --reload-rules && sudo udevadm trigger --subsystem-match=tty
ACTION!="add|change", GOTO="bolt_servo_end"
SUBSYSTEM!="tty", GOTO="bolt_servo_end"
# FTDI (Dynamixel U2D2, many servo boards)
ATTRS{idVendor}=="0403", SYMLINK+="bolt-servo serial/by-id/bolt-servo", GROUP="dialout", MODE="0660"
# WCH CH340/CH341/CH343 (Feetech / Waveshare servo driver boards)
ATTRS{idVendor}=="1a86", SYMLINK+="bolt-servo serial/by-id/bolt-servo", GROUP="dialout", MODE="0660"
# Silicon Labs CP210x
ATTRS{idVendor}=="10c4", SYMLINK+="bolt-servo serial/by-id/bolt-servo", GROUP="dialout", MODE="0660"
# Prolific PL2303
ATTRS{idVendor}=="067b", SYMLINK+="bolt-servo serial/by-id/bolt-servo", GROUP="dialout", MODE="0660"
# Pololu Maestro (its command port is interface 00)
ATTRS{idVendor}=="1ffb", ENV{ID_USB_INTERFACE_NUM}=="00", SYMLINK+="bolt-servo serial/by-id/bolt-servo", GROUP="dialout", MODE="0660"
LABEL="bolt_servo_end"
EOF
}

step_udev() {
  step udev "$UDEV_RULE: /dev/serial/by-id/bolt-servo for the servo board"
  local tmp
  tmp="$(mktemp)"
  write_udev_rule >"$tmp"
  if [ -f "$UDEV_RULE" ] && cmp -s "$tmp" "$UDEV_RULE"; then ok "$UDEV_RULE is up to date"; rm -f "$tmp"; return; fi
  put_file "$tmp" "$UDEV_RULE" 0644
  rm -f "$tmp"
  sys_act udevadm control --reload-rules
  sys_act udevadm trigger --subsystem-match=tty --action=change
}

step_unit() {
  step unit "$UNIT (ExecStart from $APP_DIR), enabled"
  local tmp
  tmp="$(mktemp)"
  sed -e "s#/opt/bolt-agent#$APP_DIR#g" -e "s#^User=bolt\$#User=$SERVICE_USER#" "$APP_DIR/jetson/bolt-agent.service" >"$tmp"
  if [ -f "$UNIT" ] && cmp -s "$tmp" "$UNIT"; then
    ok "$UNIT is up to date"
  else
    put_file "$tmp" "$UNIT" 0644
    sys_act systemctl daemon-reload
  fi
  rm -f "$tmp"
  if [ "$SYSTEM" = 1 ] && [ "$DRY" = 0 ] && systemctl is-enabled --quiet bolt-agent 2>/dev/null; then
    ok "bolt-agent is enabled"
  else
    sys_act systemctl enable bolt-agent
  fi
}

step_models() {
  step models "bolt-agent models pull --config /etc/bolt-agent/robot.toml (as $SERVICE_USER, HF_HOME=$STATE_DIR/hf)"
  if [ "$SKIP_MODELS" = 1 ]; then ok "skipped (--skip-models)"; return; fi
  local bin="$APP_DIR/.venv/bin/bolt-agent"
  if [ "$SYSTEM" = 1 ]; then
    # Same HF_HOME and user as the service: the files land where `bolt-agent run` looks.
    sys_act install -d -o "$SERVICE_USER" -g "$SERVICE_USER" "$STATE_DIR" "$STATE_DIR/hf"
    sys_act runuser -u "$SERVICE_USER" -- env HF_HOME="$STATE_DIR/hf" "$bin" models pull --config "$CONFIG"
  else
    act env HF_HOME="$PREFIX$STATE_DIR/hf" "$bin" models pull --config "$CONFIG"
  fi
}

step_start() {
  step start "systemctl restart bolt-agent"
  if [ "$START" = 0 ]; then ok "skipped (--no-start)"; return; fi
  sys_act systemctl restart bolt-agent
}

main() {
  need_root
  echo "bolt-agent install: app $APP_DIR, root ${PREFIX:-/}, CUDA $CUDA$([ "$DRY" = 1 ] && echo ', dry run')"
  step_apt
  step_user
  step_venv
  step_config
  step_udev
  step_unit
  step_models
  step_start
  echo "done. Logs: journalctl -u bolt-agent -f"
}

main
