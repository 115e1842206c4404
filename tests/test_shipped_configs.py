"""Every config shipped under ``launch/`` and ``jetson/`` starts through the command line (issue 48, item 1).

``bolt-agent chat --json --config X`` starts, answers a typed command with the right tool, moves
the body (``robot`` events), and exits 0 on SIGTERM with the robot parked. The configs run as
shipped; only what this machine lacks is stood in for at its boundary:

* a Reachy Mini body: Pollen's daemon (``--mockup-sim``) inside ``unshare -n``
  (tests/reachy_daemon.py), with ``MUJOCO_GL`` unset as in a user's shell (the simulator config's
  camera renders in a child process);
* the Jetson configs' chat model (Nemotron 3.5 Bolt E4B, ``hf:``): a Hugging Face cache holding
  the packaged SmolLM2-135M under the E4B's name, offline (``HF_HUB_OFFLINE=1``); the
  embedded stand-in picks tools with its small-model helpers;
* the cameras that are not here (a Jetson's CSI camera, a Lite's USB camera): they fail to open,
  are reported and retried in the background, and the agent answers meanwhile.

A config added to either folder fails :func:`test_every_shipped_config_has_a_case` until it is
given a command and the tool that answers it here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reachy_daemon import netns_problem, run_in_netns

from agent.models import BOLT_E4B_REF, resolve_model

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(900)

CASES = {
    "launch/desktop.toml": ("wave your right hand", "wave"),
    "launch/reachy_mini_sim.toml": ("dance for me", "dance"),
    "jetson/robot.toml": ("wave your right hand", "wave"),
    "jetson/reachy_mini.toml": ("dance for me", "dance"),
}
"""Shipped config → (a typed command, the tool that must answer it)."""
REACHY_MOTORS_OFF_S = 1.0 + 2.0 + 1.0
"""docs/command-line.md's figure for a Reachy Mini: SIGTERM to motors off within 1 s through the initial pose
(when far from it) + ``sleep_s`` (2 s) + 1 s, s."""


def shipped() -> list[str]:
    folders = ("launch", "jetson")
    return sorted(str(p.relative_to(ROOT)) for d in folders for p in (ROOT / d).glob("*.toml"))


def test_every_shipped_config_has_a_case():
    assert shipped() == sorted(CASES)


def stand_in_hub(root: Path) -> Path:
    """A Hugging Face cache (``HF_HOME``) with the packaged SmolLM2 under the E4B's repo and file name."""
    repo, name = BOLT_E4B_REF.removeprefix("hf:").rsplit("/", 1)
    commit = "0" * 40
    base = root / "hub" / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / name).symlink_to(resolve_model("packaged:smollm2-135m"))
    return root


CHAT = """
import json, os, signal, subprocess, sys, threading, time
import reachy_daemon as rd

cfg, command = os.environ["SHIPPED_CFG"], os.environ["SHIPPED_COMMAND"]
reachy = os.environ["SHIPPED_REACHY"] == "1"
out = {"events": []}
daemon = rd.start("mockup") if reachy else None
agent = subprocess.Popen(
    [sys.executable, "-m", "agent", "chat", "--json", "--config", cfg],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
)
events, err = [], []
def read():
    for line in agent.stdout:
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
threading.Thread(target=read, daemon=True).start()
threading.Thread(target=lambda: err.extend(agent.stderr), daemon=True).start()

def wait_for(pred, timeout=300, since=0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for e in list(events)[since:]:
            if pred(e):
                return e
        if agent.poll() is not None:
            break
        time.sleep(0.05)
    raise TimeoutError(
        f"exit {agent.poll()}; events {json.dumps(events)[-3000:]}; stderr {''.join(err)[-3000:]}"
    )

try:
    wait_for(lambda e: e["event"] == "ready")
    n = len(events)
    agent.stdin.write(command + "\\n")
    agent.stdin.flush()
    out["tool"] = wait_for(lambda e: e["event"] == "tool_call", since=n)["name"]
    wait_for(lambda e: e["event"] == "timing", since=n)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        e["event"] == "robot" and e["turn_id"] >= 0 for e in events[n:]
    ):
        time.sleep(0.1)
    time.sleep(1.0)  # mid-gesture
    out["motors_before"] = rd.motors() if reachy else None
    t0 = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    if reachy:  # SIGTERM during a dance to motors off, as the daemon reports it
        while rd.motors() != "disabled" and time.monotonic() - t0 < 20:
            time.sleep(0.01)
        out["motors_off_s"] = time.monotonic() - t0
    out["exit"] = agent.wait(60)
    out["exit_s"] = time.monotonic() - t0
    out["motors_after"] = rd.motors() if reachy else None
    time.sleep(0.2)
    out["events"] = events
    out["stderr"] = "".join(err)[-4000:]
finally:
    if agent.poll() is None:
        agent.kill()
    if daemon is not None:
        rd.stop(daemon)
print(json.dumps(out))
"""


@pytest.mark.parametrize("config", sorted(CASES))
def test_a_shipped_config_starts_answers_and_stops(config, tmp_path):
    why = netns_problem()
    if why:
        pytest.skip(why)
    command, tool = CASES[config]
    reachy = "reachy" in config
    env = {
        "SHIPPED_CFG": str(ROOT / config),
        "SHIPPED_COMMAND": command,
        "SHIPPED_REACHY": "1" if reachy else "0",
        "HF_HOME": str(stand_in_hub(tmp_path / "hf")),
        "HF_HUB_OFFLINE": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    r = run_in_netns(CHAT, timeout=800, env=env, unset=("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY"))
    events = r["events"]
    names = [e["event"] for e in events]
    assert r["tool"] == tool, (r["tool"], r["stderr"])
    moved = [e for e in events if e["event"] == "robot" and e["turn_id"] >= 0]
    assert moved, f"no robot events for the turn: {sorted(set(names))}"
    assert r["exit"] == 0, r["stderr"]
    parked_at = names.index("robot_parked")  # and the body sends nothing after it
    assert "robot" not in names[parked_at:], names[parked_at - 3 :]
    assert "Traceback" not in r["stderr"], r["stderr"]
    parked = events[parked_at]
    if reachy:
        assert r["motors_before"] == "enabled" and r["motors_after"] == "disabled"
        # The exit line is what the daemon reported: the sleep pose, motors off, read back.
        assert parked["pose"] == "sleep" and parked["torque"] is False and parked["read_back"], parked
        print(
            f"{config}: SIGTERM during a dance to motors off {r['motors_off_s']:.2f} s, "
            f"exit {r['exit_s']:.2f} s"
        )
        assert r["motors_off_s"] <= REACHY_MOTORS_OFF_S
    else:
        assert parked["pose"] == "neutral" and parked["torque"] is False, parked
