"""``bolt-agent doctor``'s audio checks: the sound devices, and the sound server as a service sees it.

Devices come from PortAudio (the configured ones must exist, as ``run`` needs them). Under
systemd (``INVOCATION_ID`` set) the sound server is checked too when the config goes through one:
a service does not inherit ``XDG_RUNTIME_DIR`` / ``PULSE_SERVER`` from a login; a config naming
ALSA devices needs neither.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agent.audio_io.devices import DeviceError, SoundBackend, SoundDeviceBackend, find_device
from agent.config import AudioConfig
from agent.systemd import SERVICE
from hardware.check import Check

SYSTEM_UID_MAX = 999
"""System users (``useradd --system``: ``bolt``) have no login session, so no ``/run/user/UID``."""


def check_audio(
    backend: SoundBackend | None = None, audio: AudioConfig | None = None, where: str = "the config"
) -> Check:
    """Input and output devices with their default sample rates (Hz); the configured ones must exist.

    Args:
        backend: A :class:`~agent.audio_io.devices.SoundBackend` (default: PortAudio).
        audio: ``[audio]``: its ``input_device`` / ``output_device`` are looked up as ``run``
            does (None: only the device list).
        where: The config file, for the fix.
    """
    try:
        if backend is None:
            backend = SoundDeviceBackend()
        devices = backend.query_devices()
    except (OSError, ImportError, DeviceError) as e:
        return Check("audio", False, f"PortAudio unavailable: {e}", "sudo apt-get install -y libportaudio2")
    names = {}
    for kind in ("input", "output"):
        names[kind] = [
            f"{d['name']} ({d[f'max_{kind}_channels']} ch, {d['default_samplerate']:.0f} Hz)"
            for d in devices
            if d[f"max_{kind}_channels"] > 0
        ]
    detail = f"inputs: {', '.join(names['input']) or 'none'}; outputs: {', '.join(names['output']) or 'none'}"
    if not names["input"] or not names["output"]:
        return Check(
            "audio",
            False,
            detail,
            "pactl info  # start PulseAudio/PipeWire or plug in a USB microphone and speaker",
        )
    for kind in ("input", "output"):
        spec = getattr(audio, f"{kind}_device") if audio is not None else None
        if spec is None:
            continue
        try:
            find_device(backend, spec, kind)
        except DeviceError:
            example = names[kind][0].rsplit(" (", 1)[0]
            return Check(
                "audio",
                False,
                f"no {kind} device matches [audio] {kind}_device = {spec!r}; {detail}",
                f'edit [audio] {kind}_device in {where}  # a name or index listed here, e.g. "{example}"',
            )
    return Check("audio", True, detail)


def uses_sound_server(audio: AudioConfig | None) -> bool:
    """Whether the config's audio goes through PulseAudio/PipeWire rather than ALSA devices directly.

    A device left at the system default, ``default`` or a name with ``pulse`` / ``pipewire``
    goes through the sound server; two named hardware devices (``USB``, ``hw:1,0``) do not.

    Args:
        audio: ``[audio]`` (None: assume a sound server).
    """
    if audio is None:
        return True
    for spec in (audio.input_device, audio.output_device):
        if spec is None:
            return True
        name = str(spec).lower()
        if name in ("default", "sysdefault") or "pulse" in name or "pipewire" in name:
            return True
    return False


def check_systemd_env(
    env: Mapping[str, str],
    audio: AudioConfig | None = None,
    where: str = "the config",
    uid: int | None = None,
) -> Check | None:
    """Under systemd only: the sound server must be reachable from the service, if the config uses one.

    Args:
        env: The environment (``INVOCATION_ID``, ``XDG_RUNTIME_DIR``, ``PULSE_SERVER``).
        audio: ``[audio]``; naming ALSA devices there needs no sound server.
        where: The config file, for the fix.
        uid: The service's user id (default: this process's).

    Returns:
        None outside systemd.
    """
    if not env.get("INVOCATION_ID"):
        return None
    if audio is not None and not uses_sound_server(audio):
        devs = f"{audio.input_device!r} / {audio.output_device!r}"
        return Check("systemd-env", True, f"[audio] names ALSA devices ({devs}): no sound server needed")
    runtime = env.get("XDG_RUNTIME_DIR", "")
    pulse = env.get("PULSE_SERVER", "")
    uid = os.getuid() if uid is None else uid
    if uid <= SYSTEM_UID_MAX:  # no login session: no /run/user/UID/pulse to point at
        fix = (
            f"set [audio] input_device and output_device in {where} to ALSA devices "
            '(arecord -l; aplay -l; e.g. "USB"), '
            f"or run PulseAudio system-wide and: sudo systemctl edit {SERVICE}  # add: "
            "Environment=PULSE_SERVER=unix:/run/pulse/native"
        )
    else:
        fix = (
            f"sudo systemctl edit {SERVICE}  # add: Environment=XDG_RUNTIME_DIR=/run/user/{uid} "
            f"PULSE_SERVER=unix:/run/user/{uid}/pulse/native"
        )
    if pulse and not pulse.startswith("unix:"):
        return Check("systemd-env", True, f"PULSE_SERVER={pulse}")
    if pulse:
        sock = Path(pulse.removeprefix("unix:"))
    elif not runtime or not Path(runtime).is_dir():
        return Check("systemd-env", False, f"XDG_RUNTIME_DIR={runtime or '(unset)'} is not a directory", fix)
    else:
        sock = Path(runtime, "pulse", "native")
    if not sock.exists():
        return Check(
            "systemd-env", False, f"no sound server socket at {sock} (PULSE_SERVER={pulse or '(unset)'})", fix
        )
    return Check("systemd-env", True, f"XDG_RUNTIME_DIR={runtime or '(unset)'}, sound server {sock}")
