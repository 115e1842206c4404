"""Reachy Mini cameras: the real one found on USB, and the simulator's eye camera (rendered in a child).

**The real robot.** A Reachy Mini *Lite*'s camera is a USB UVC device on the host that runs
the daemon; ``[camera] source = "reachy_mini"`` finds its ``/dev/videoN`` by USB ids (Pollen's
``reachy_mini/media/camera_constants.py``: the Lite camera ``38fb:1002``, the older Raspberry
Pi camera module ``1bcf:28c4``, the Arducam 12MP ``0c45:636d``, tried in that order) as
``"usb:VVVV:PPPP"`` finds any USB camera (:mod:`hardware.camera.usb`). A Reachy Mini *Wireless*
has its camera inside the robot (a CSI camera on its Raspberry Pi): it is not on this host's
USB at all, and reaches another computer only as the daemon's WebRTC stream, which needs
GStreamer's ``webrtc`` plugin (``webrtcbin``, in gst-plugins-bad; not packaged in Debian 12).
That stream is not supported here.

**The simulator.** ``[camera] source = "reachy_mini_sim"`` is the eye camera of Pollen's MuJoCo
model, posed from the daemon's joint state (:mod:`hardware.reachy_mini.sim_eye`), rendered in a
child process (:mod:`hardware.reachy_mini.sim_render`): a GL fault ends that child, is reported,
and the camera reopens with a new one. Both are named sources (:func:`camera_sources`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from hardware.camera.base import CameraError, FrameReader, NamedSource
from hardware.camera.usb import UsbCamera, find_first
from hardware.config import CameraConfig, ReachyMiniConfig
from hardware.reachy_mini.sim_eye import SIM_SCENE, SIM_SIZE, hfov_deg
from hardware.reachy_mini.sim_render import RenderProcess

log = logging.getLogger(__name__)

SIM_SOURCE = "reachy_mini_sim"
"""``[camera] source`` of the simulated eye camera."""
USB_ALIAS = "reachy_mini"
"""``[camera] source`` of a Reachy Mini Lite's USB camera (tries :data:`REACHY_USB_IDS` in order)."""

REACHY_USB_IDS = (
    UsbCamera(0x38FB, 0x1002, "Reachy Mini Lite camera"),
    UsbCamera(0x1BCF, 0x28C4, "older Reachy Mini camera (Raspberry Pi camera module)"),
    UsbCamera(0x0C45, 0x636D, "Arducam 12MP"),
)
"""Pollen's camera ids, in the order tried (``reachy_mini/media/camera_constants.py``:
``ReachyMiniLiteCamSpecs``, ``OlderRPiCamSpecs``, ``ArducamSpecs``; reachy-mini 1.13.0)."""

WIRELESS_HINT = (
    "a Reachy Mini Wireless has its camera inside the robot: it is reachable only as the daemon's "
    "WebRTC stream, which needs GStreamer's webrtc plugin (webrtcbin) and is not supported here"
)

SIM_FPS = 2.0
"""Default frame rate of the simulated camera, Hz (a frame costs about 0.1 s of one core)."""


def find_reachy_camera(sysfs_root: Path | str = "/sys") -> str:
    """A Reachy Mini Lite's camera → its ``/dev/videoN`` (Pollen's ids tried in order).

    Raises:
        CameraError: none of :data:`REACHY_USB_IDS` is plugged in (the message lists them and
            says that a Wireless robot's camera is not on USB).

    """
    dev = find_first(REACHY_USB_IDS, sysfs_root)
    if dev is None:
        ids = ", ".join(f"{c.ids()} ({c.name})" for c in REACHY_USB_IDS)
        raise CameraError(
            f"no Reachy Mini camera on USB (looked for {ids}): is the Lite's USB cable plugged into "
            f"this computer? (lsusb lists it); {WIRELESS_HINT}"
        )
    return dev


def sim_size(cfg: CameraConfig) -> tuple[int, int]:
    """The simulated camera's ``(width, height)``, px: ``cfg``'s, a missing side at 16:9, else 640x360."""
    width = cfg.width or (SIM_SIZE[0] if not cfg.height else round(cfg.height * 16 / 9))
    height = cfg.height or round(width * 9 / 16)
    return width, height


def sim_hfov_deg(cfg: CameraConfig) -> float:
    """The describer's field of view for ``cfg``, deg: ``hfov_deg`` when set, else the sim camera's own."""
    return cfg.hfov_deg if "hfov_deg" in cfg.model_fields_set else hfov_deg(*sim_size(cfg))


def open_sim_camera(cfg: CameraConfig, reachy: ReachyMiniConfig | None = None) -> FrameReader:
    """Open the simulated eye camera at ``cfg``'s size (default :data:`SIM_SIZE`), rendered in a child.

    The renderer runs in :class:`~hardware.reachy_mini.sim_render.RenderProcess`: a GL fault
    (a signal in Mesa, MuJoCo's abort on a second renderer) ends only that child.

    Args:
        cfg: ``[camera]`` (``width``/``height`` in px; 0 = 640x360).
        reachy: ``[robot.reachy_mini]``: the daemon's host and port (default ``localhost:8000``).

    Raises:
        CameraError: see :class:`SimEyeCamera` (the child's reason), or the child died or hung.

    """
    reachy = reachy or ReachyMiniConfig()
    return RenderProcess(reachy.host, reachy.port, *sim_size(cfg), scene=SIM_SCENE)


def camera_sources(reachy: ReachyMiniConfig) -> dict[str, NamedSource]:
    """A Reachy Mini's named camera sources, the simulated one posed from ``reachy``'s daemon.

    ``reachy_mini`` (the Lite's USB camera, found anew at each open) and ``reachy_mini_sim``
    (the eye camera rendered here at 2 Hz by default, with its own field of view). The rendered
    camera is live (dead and black feeds are real faults there: a daemon that stopped answering,
    a broken GL renderer) but its picture is legitimately identical while the head and the scene
    are still, so the frozen rule would reopen it forever: it is ``still``.
    """
    return {
        USB_ALIAS: NamedSource(USB_ALIAS, "v4l2", find=find_reachy_camera),
        SIM_SOURCE: NamedSource(
            SIM_SOURCE,
            "reachy_sim",
            open=lambda cfg: open_sim_camera(cfg, reachy),
            fps=SIM_FPS,
            still=True,
            hfov_deg=sim_hfov_deg,
        ),
    }
