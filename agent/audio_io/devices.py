"""Sound devices: find one by name or index, describe them all, restart PortAudio.

Everything that touches PortAudio's device list goes through a :class:`SoundBackend`, so
the benchmark (and fault tests) can swap in in-process fake streams at exactly the OS
boundary while the mic and speaker code stays the same. :class:`SoundDeviceBackend` is
the real one (python-sounddevice). After the sound server goes away PortAudio keeps a stale
device list; :meth:`SoundBackend.reinit` terminates and re-initialises it (all streams must
be closed first).
"""

from __future__ import annotations

from typing import Any, Protocol


class DeviceError(Exception):
    """No usable device matches the config; the message lists the devices there are."""


class SoundBackend(Protocol):
    """The few things the live pipeline needs from sounddevice."""

    def query_devices(self) -> list[dict[str, Any]]:
        """Every device, as PortAudio describes it.

        Returns:
            Dicts with ``name``, ``max_input_channels``, ``max_output_channels``, ``default_samplerate``.
        """
        ...

    def default_device(self, kind: str) -> int:
        """Index of the default ``input`` or ``output`` device, -1 when none."""
        ...

    def input_stream(self, **kwargs: Any) -> Any:
        """A started-later ``sd.InputStream``-like object (``start``, ``stop``, ``abort``, ``close``)."""
        ...

    def output_stream(self, **kwargs: Any) -> Any:
        """A started-later ``sd.OutputStream``-like object."""
        ...

    def reinit(self) -> None:
        """Forget the device list and query the sound system again."""
        ...


class SoundDeviceBackend:
    """python-sounddevice (PortAudio); imported when first constructed.

    Raises:
        DeviceError: PortAudio itself is missing (``apt-get install libportaudio2``).

    """

    def __init__(self) -> None:
        try:
            import sounddevice as sd
        except OSError as e:
            raise DeviceError(
                f"{e}: install the PortAudio library (sudo apt-get install libportaudio2)"
            ) from None
        self.sd = sd
        self.PortAudioError = sd.PortAudioError

    def query_devices(self) -> list[dict[str, Any]]:
        """All devices PortAudio sees now."""
        return [dict(d) for d in self.sd.query_devices()]

    def default_device(self, kind: str) -> int:
        """Default input or output device index (-1 when there is none)."""
        try:
            dev = self.sd.default.device[0 if kind == "input" else 1]
        except Exception:  # PortAudio reports "no default" in several ways
            return -1
        if dev is None or int(dev) < 0:
            try:
                return int(self.sd.query_devices(kind=kind)["index"])
            except Exception:  # no device of that kind, in the same several ways
                return -1
        return int(dev)

    def input_stream(self, **kwargs: Any) -> Any:
        """``sd.InputStream(**kwargs)``."""
        return self.sd.InputStream(**kwargs)

    def output_stream(self, **kwargs: Any) -> Any:
        """``sd.OutputStream(**kwargs)``."""
        return self.sd.OutputStream(**kwargs)

    def reinit(self) -> None:
        """Terminate and re-initialise PortAudio (a new device list)."""
        self.sd._terminate()
        self.sd._initialize()


def describe_devices(devices: list[dict[str, Any]]) -> str:
    """One line per device: index, name, input/output channels, default rate."""
    if not devices:
        return "  (no audio devices: is a sound server running and the user in the 'audio' group?)"
    return "\n".join(
        f"  {i}: {d['name']!r} (in {d['max_input_channels']}, out {d['max_output_channels']}, "
        f"{d['default_samplerate']:.0f} Hz)"
        for i, d in enumerate(devices)
    )


def find_device(backend: SoundBackend, spec: str | int | None, kind: str) -> tuple[int, dict[str, Any]]:
    """Resolve a device from config.

    Args:
        backend: Where devices come from.
        spec: Index, exact name, or case-insensitive part of a name; None = system default.
        kind: ``input`` or ``output``.

    Returns:
        ``(index, device dict)``.

    Raises:
        DeviceError: nothing matches, or the match has no channels of that kind; the message
            lists every device.

    """
    devices = backend.query_devices()
    key = "max_input_channels" if kind == "input" else "max_output_channels"
    usable = [i for i, d in enumerate(devices) if d[key] > 0]
    idx: int | None = None
    if spec is None:
        idx = backend.default_device(kind)
        if idx not in usable:
            idx = usable[0] if usable else None
    elif isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        idx = int(spec)
        if idx not in usable:
            idx = None
    else:
        exact = [i for i in usable if devices[i]["name"] == spec]
        part = [i for i in usable if spec.lower() in devices[i]["name"].lower()]
        idx = (exact or part or [None])[0]
    if idx is None:
        what = "the default" if spec is None else repr(spec)
        raise DeviceError(
            f"no {kind} device matches {what}; set audio.{kind}_device to one of these "
            f"(index or name):\n{describe_devices(devices)}"
        )
    return idx, devices[idx]
