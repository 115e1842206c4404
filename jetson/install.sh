#!/usr/bin/env bash
# One-command install of bolt-agent as a systemd service on a Jetson (JetPack 7.2 by default, or
# JetPack 6), from this checkout.
#
# Usage: sudo jetson/install.sh [--dry-run] [--prefix DIR] [--config FILE | --reachy] [--no-cuda]
#                               [--jetpack 6|7] [--skip-models] [--skip-venv] [--no-start]
#   --dry-run      print every step and what it would do; change nothing
#   --config FILE  the config to install as /etc/bolt-agent/robot.toml (default jetson/robot.toml)
#   --reachy       a Reachy Mini body: --config jetson/reachy_mini.toml
#   --prefix DIR   install the files (config, udev rule, units) under DIR instead of / (a staging
#                  root, as for tests): steps that change the running system (apt, the user,
#                  systemctl, udevadm, ownership) only print "would ..."
#   --no-cuda      build llama.cpp for the CPU (default: CUDA for sm_87 when nvcc is found)
#   --jetpack N    the JetPack to install for (default: the one found: the nvidia-jetpack package's
#                  version, else /etc/nv_tegra_release's L4T release, R36 = 6, R38 and later = 7;
#                  7 where none is found). JetPack 7.2 (Ubuntu 24.04): Python 3.12, reachy-mini 1.13;
#                  JetPack 6 (Ubuntu 22.04): Python 3.10, reachy-mini 1.8.4 (the last for 3.10: the
#                  robot's daemon must be a 1.8 release). Either way the SDK goes into the same .venv.
#   --skip-models  do not run `bolt-agent models pull`
#   --skip-venv    do not create or update the virtual environment (launch/setup.sh)
#   --no-start     enable the service but do not (re)start it
#
# Steps, each a function that checks before it acts (re-running does only what is missing):
#   apt      system packages (python3-venv, python3-dev, build-essential, cmake, libportaudio2, ...;
#            for a Reachy Mini also what its SDK builds and imports: PyGObject's girepository and
#            cairo, GStreamer's typelibs)
#   user     the `bolt` system user in groups audio, dialout, video, render
#   venv     launch/setup.sh run with the JetPack's Python (PYTHON=python3.12 or python3.10): .venv
#            with llama-cpp-python, and llama-server (BOLT_LLAMA_SERVER=1);
#            with CUDA: CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87", CUDACXX=nvcc (and
#            its folder on PATH), wheels in build/wheels-cuda; a CPU-only llama-cpp-python already
#            in the venv is replaced by the CUDA wheel (pip --force-reinstall --no-deps); a Reachy
#            Mini adds Pollen's SDK to the same .venv (BOLT_REACHY=1: the `reachy` extra,
#            reachy-mini 1.13 on JetPack 7's Python 3.12, 1.8.4 on JetPack 6's Python 3.10)
#   config   /etc/bolt-agent/robot.toml from jetson/robot.toml (or --config), only when absent
#            (your edits stay)
#   udev     /etc/udev/rules.d/99-bolt-servo.rules: /dev/bolt-servo and /dev/serial/by-id/bolt-servo
#            for USB-serial servo boards (see the rule file to add your board's vendor id); not
#            for a Reachy Mini, whose daemon finds the robot's port itself
#   unit     /etc/systemd/system/bolt-agent.service (paths pointed at this checkout), enabled
#   daemon   a Reachy Mini Lite (the config's [robot.reachy_mini] host is this machine):
#            /etc/systemd/system/reachy-mini-daemon.service, enabled, started before bolt-agent
#   models   bolt-agent models pull --config /etc/bolt-agent/robot.toml, as the bolt user
#   start    systemctl restart bolt-agent (and the Reachy Mini daemon first, when installed)
#
# A Reachy Mini body is what the installed config says ([robot] driver = "reachy_mini"): the
# config already in /etc/bolt-agent, else the one --config names.
set -euo pipefail

APP_DIR="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="/"
DRY=0
CUDA=auto
SKIP_MODELS=0
SKIP_VENV=0
START=1
JETPACK=""
SERVICE_USER="${BOLT_USER:-bolt}"
GROUPS_WANTED=(audio dialout video render)
APT_PACKAGES=(python3-venv python3-dev build-essential cmake git libportaudio2 alsa-utils)
# Pollen's SDK builds PyGObject from source and every daemon mode imports GStreamer's typelibs.
REACHY_APT=(libgirepository1.0-dev libcairo2-dev pkg-config gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0)
SOURCE_CONFIG="$APP_DIR/jetson/robot.toml"
STATE_DIR=/var/lib/bolt-agent

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --prefix) PREFIX="${2:?--prefix needs a directory}"; shift ;;
    --prefix=*) PREFIX="${1#--prefix=}" ;;
    --config) SOURCE_CONFIG="${2:?--config needs a file}"; shift ;;
    --config=*) SOURCE_CONFIG="${1#--config=}" ;;
    --reachy) SOURCE_CONFIG="$APP_DIR/jetson/reachy_mini.toml" ;;
    --no-cuda) CUDA=off ;;
    --jetpack) JETPACK="${2:?--jetpack needs 6 or 7}"; shift ;;
    --jetpack=*) JETPACK="${1#--jetpack=}" ;;
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
DAEMON_UNIT="$PREFIX/etc/systemd/system/reachy-mini-daemon.service"
[ -f "$SOURCE_CONFIG" ] || { echo "no config file $SOURCE_CONFIG" >&2; exit 2; }
SOURCE_CONFIG="$(cd "$(dirname "$SOURCE_CONFIG")" && pwd)/$(basename "$SOURCE_CONFIG")"

# The value of KEY in [TABLE] of a TOML file, quotes removed ("" when absent). Line-based: enough
# for the two keys read here ([robot] driver, [robot.reachy_mini] host), not a TOML parser.
toml_value() {
  awk -v want="[$2]" -v key="$3" '
    { line = $0; sub(/[[:space:]]#.*$/, "", line); sub(/^#.*$/, "", line) }
    line ~ /^[[:space:]]*\[/ { table = line; gsub(/[[:space:]]/, "", table); next }
    table == want && line ~ ("^[[:space:]]*" key "[[:space:]]*=") {
      sub(/^[^=]*=[[:space:]]*/, "", line); sub(/[[:space:]]+$/, "", line)
      gsub(/^["\047]|["\047]$/, "", line); print line; exit
    }' "$1"
}
# The body is what the installed config says: the one in /etc when there is one (kept as it is).
BODY_CONFIG="$SOURCE_CONFIG"
[ -f "$CONFIG" ] && BODY_CONFIG="$CONFIG"
REACHY=0
REACHY_HOST=""
if [ "$(toml_value "$BODY_CONFIG" robot driver)" = reachy_mini ]; then
  REACHY=1
  REACHY_HOST="$(toml_value "$BODY_CONFIG" robot.reachy_mini host)"
  REACHY_HOST="${REACHY_HOST:-localhost}"   # ReachyMiniConfig's default
  APT_PACKAGES+=("${REACHY_APT[@]}")
fi
# A Lite is plugged into this machine and its daemon runs here; a Wireless runs its own.
REACHY_LITE=0
case "$REACHY_HOST" in localhost | 127.* | ::1 | "$(hostname 2>/dev/null || echo localhost)") REACHY_LITE=$REACHY ;; esac

# Which JetPack: --jetpack, else the nvidia-jetpack package's version, else L4T's release file
# (NV_TEGRA_RELEASE points elsewhere for tests and images), else 7 (the current one).
NV_TEGRA_RELEASE="${NV_TEGRA_RELEASE:-/etc/nv_tegra_release}"
L4T=""
if [ -r "$NV_TEGRA_RELEASE" ]; then
  L4T="$(sed -n '1s/^# R\([0-9]*\) (release), REVISION: \([0-9.]*\).*/\1.\2/p' "$NV_TEGRA_RELEASE")"
fi
JETPACK_FROM="--jetpack"
if [ -z "$JETPACK" ]; then
  JP_PKG="$(dpkg-query -W -f='${Version}' nvidia-jetpack 2>/dev/null || true)"
  if [ -n "$JP_PKG" ]; then
    JETPACK="${JP_PKG%%.*}"; JETPACK_FROM="nvidia-jetpack $JP_PKG"
  elif [ -n "$L4T" ]; then
    case "${L4T%%.*}" in 35) JETPACK=5 ;; 36) JETPACK=6 ;; *) JETPACK=7 ;; esac
    JETPACK_FROM="L4T $L4T"
  else
    JETPACK=7; JETPACK_FROM="not found here: the default"
  fi
fi
case "$JETPACK" in
  7) PYTHON_VERSION=3.12; REACHY_SDK="reachy-mini 1.13" ;;
  6) PYTHON_VERSION=3.10; REACHY_SDK="reachy-mini 1.8.4" ;;
  *) echo "JetPack $JETPACK is not supported: JetPack 7.2 (default) or 6 (--jetpack 7|6)" >&2; exit 2 ;;
esac
PYTHON_BIN="python$PYTHON_VERSION"

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
  # BOLT_REACHY=1: Pollen's SDK and dances, with uv (launch/setup.sh, launch/reachy-overrides.txt).
  if [ "$REACHY" = 1 ]; then echo "   Reachy Mini SDK: $REACHY_SDK (Python $PYTHON_VERSION) in the same .venv"; fi
  if [ "$DRY" = 0 ] && ! command -v "$PYTHON_BIN" >/dev/null 2>&1; then
    echo "no $PYTHON_BIN: JetPack $JETPACK's Python (apt-get install $PYTHON_BIN-venv $PYTHON_BIN-dev), or --jetpack" >&2
    exit 1
  fi
  act env ${cmake_args:+CMAKE_ARGS="$cmake_args"} PYTHON="$PYTHON_BIN" BOLT_LLAMA_SERVER=1 BOLT_WHEELHOUSE="$wheels" \
    BOLT_LLAMA_SERVER_CACHE="$APP_DIR/build/llama-server" BOLT_REACHY="$REACHY" bash "$APP_DIR/launch/setup.sh" run
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
  step config "$CONFIG from ${SOURCE_CONFIG#"$APP_DIR"/} (only when absent)"
  if [ -f "$CONFIG" ]; then
    ok "$CONFIG exists: kept as it is"
    if ! cmp -s "$CONFIG" "$SOURCE_CONFIG" && [ "$SOURCE_CONFIG" != "$APP_DIR/jetson/robot.toml" ]; then
      echo "   note: $SOURCE_CONFIG is not installed; move $CONFIG away first to install it"
    fi
    return
  fi
  put_file "$SOURCE_CONFIG" "$CONFIG" 0644
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
  # Its CH340 line (1a86) would also name the Reachy Mini's motor controller (1a86:55d3).
  if [ "$REACHY" = 1 ]; then ok "not needed: a Reachy Mini's daemon finds the robot's serial port itself"; return; fi
  local tmp
  tmp="$(mktemp)"
  write_udev_rule >"$tmp"
  if [ -f "$UDEV_RULE" ] && cmp -s "$tmp" "$UDEV_RULE"; then ok "$UDEV_RULE is up to date"; rm -f "$tmp"; return; fi
  put_file "$tmp" "$UDEV_RULE" 0644
  rm -f "$tmp"
  sys_act udevadm control --reload-rules
  sys_act udevadm trigger --subsystem-match=tty --action=change
}

# install_unit SOURCE DEST NAME: the unit with this install's paths and user, then enabled.
install_unit() {
  local tmp
  tmp="$(mktemp)"
  sed -e "s#/opt/bolt-agent#$APP_DIR#g" -e "s#^User=bolt\$#User=$SERVICE_USER#" "$1" >"$tmp"
  if [ -f "$2" ] && cmp -s "$tmp" "$2"; then
    ok "$2 is up to date"
  else
    put_file "$tmp" "$2" 0644
    sys_act systemctl daemon-reload
  fi
  rm -f "$tmp"
  if [ "$SYSTEM" = 1 ] && [ "$DRY" = 0 ] && systemctl is-enabled --quiet "$3" 2>/dev/null; then
    ok "$3 is enabled"
  else
    sys_act systemctl enable "$3"
  fi
}

step_unit() {
  step unit "$UNIT (ExecStart from $APP_DIR), enabled"
  install_unit "$APP_DIR/jetson/bolt-agent.service" "$UNIT" bolt-agent
}

# A Reachy Mini Lite's daemon: the unit from jetson/reachy-mini-daemon.service, enabled (it is
# wanted by bolt-agent.service and ordered before it, so it also stops after the agent parks).
step_daemon() {
  step daemon "$DAEMON_UNIT (Reachy Mini Lite), enabled"
  if [ "$REACHY" = 0 ]; then ok "not needed: the config drives no Reachy Mini"; return; fi
  if [ "$REACHY_LITE" = 0 ]; then
    ok "not needed: the Reachy Mini at $REACHY_HOST runs its own daemon (a Wireless)"
    return
  fi
  install_unit "$APP_DIR/jetson/reachy-mini-daemon.service" "$DAEMON_UNIT" reachy-mini-daemon
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
  # The daemon restarts too: after an SDK update client and daemon must be the same release.
  local units=(bolt-agent)
  [ "$REACHY_LITE" = 1 ] && units=(reachy-mini-daemon bolt-agent)
  step start "systemctl restart ${units[*]}"
  if [ "$START" = 0 ]; then ok "skipped (--no-start)"; return; fi
  sys_act systemctl restart "${units[@]}"
}

main() {
  need_root
  local body
  body="[robot] driver $(toml_value "$BODY_CONFIG" robot driver)"
  [ "$REACHY" = 1 ] && body="Reachy Mini $([ "$REACHY_LITE" = 1 ] && echo "Lite (daemon here)" || echo "at $REACHY_HOST")"
  local l4t=""
  [ -n "$L4T" ] && [ "$JETPACK_FROM" != "L4T $L4T" ] && l4t=", L4T $L4T"
  echo "bolt-agent install: app $APP_DIR, root ${PREFIX:-/}, CUDA $CUDA, body: $body$([ "$DRY" = 1 ] && echo ', dry run')"
  echo "JetPack $JETPACK ($JETPACK_FROM$l4t), Python $PYTHON_VERSION"
  step_apt
  step_user
  step_venv
  step_config
  step_udev
  step_unit
  step_daemon
  step_models
  step_start
  echo "done. Logs: journalctl -u bolt-agent -f"
}

main
