"""What every camera source shares: its error, the reader protocol, and named sources.

A *named source* is a camera that ``[camera] source`` names by a word rather than by a device,
pipeline or path: a robot's own camera (``reachy_mini``: a Reachy Mini Lite's USB camera;
``reachy_mini_sim``: the simulator's rendered eye camera). Each robot package exports its named
sources as :class:`NamedSource` values; :func:`hardware.registry.camera_sources` gathers them,
and the camera code takes them as an argument (it imports no robot).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hardware.config import CameraConfig


class CameraError(Exception):
    """A camera source cannot be opened or read; the message names the source and the cause."""


class FrameReader(Protocol):
    """What the capture loop reads from: ``cv2.VideoCapture``, the image-folder reader, a renderer."""

    def read(self) -> tuple[bool, np.ndarray | None]:
        """The next frame: ``(ok, BGR uint8 (h, w, 3) or None)``."""
        ...

    def release(self) -> None:
        """Close the source."""
        ...


@dataclass(frozen=True)
class NamedSource:
    """A camera named by a word in ``[camera] source`` (see the module docstring).

    Exactly one of ``find`` and ``open`` is set.

    Attributes:
        name: The word (``reachy_mini``).
        kind: What :func:`~hardware.camera.sources.parse_source` reports for it: ``"v4l2"``
            for a device found by ``find``, else the source's own kind (``"reachy_sim"``).
        find: A device found anew at each open (it may be plugged into another port): returns
            its ``/dev/videoN``; raises :class:`CameraError` (saying what to check) when absent.
        open: Opens a reader of another kind (a renderer) at ``[camera]``'s size; raises
            :class:`CameraError`.
        fps: Pacing of an opened reader when ``[camera] fps`` is 0, Hz.
        live: An opened reader shows the present (dead and black feeds are faults).
        still: Its picture may legitimately stay identical while nothing moves (a rendered
            scene): the frozen-feed rule does not apply.
        hfov_deg: Its own horizontal field of view for ``[camera]``, deg (None: ``hfov_deg``).
    """

    name: str
    kind: str
    find: Callable[[], str] | None = None
    open: Callable[[CameraConfig], FrameReader] | None = None
    fps: float = 0.0
    live: bool = True
    still: bool = False
    hfov_deg: Callable[[CameraConfig], float] | None = None
