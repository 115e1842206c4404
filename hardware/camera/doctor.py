"""``bolt-agent doctor``'s camera check: the source exists (nothing is opened) and OpenCV's GStreamer."""

from __future__ import annotations

from collections.abc import Mapping

from hardware.camera.base import CameraError, NamedSource
from hardware.camera.sources import parse_source
from hardware.check import Check
from hardware.config import CameraConfig


def check_camera(camera: CameraConfig, named: Mapping[str, NamedSource] | None = None) -> Check:
    """The configured camera source and whether OpenCV was built with GStreamer.

    Args:
        camera: ``[camera]``.
        named: The named sources known here (a robot's own cameras).
    """
    source = camera.source
    try:
        import cv2
    except ImportError:
        return Check(
            "camera",
            not source,
            "OpenCV not installed",
            "pip install 'opencv-python-headless<5'",
            bool(source),
        )
    info = cv2.getBuildInformation()
    gst = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if "GStreamer" in ln), "NO")
    has_gst = gst.upper().startswith("YES")
    head = f"OpenCV {cv2.__version__}, GStreamer: {'YES' if has_gst else 'NO'}"
    if not source:
        return Check("camera", True, f"{head}; no camera configured", blocking=False)
    if "!" in source and not has_gst:
        return Check(
            "camera",
            False,
            f"{head}; source is a GStreamer pipeline",
            "sudo apt-get install -y python3-opencv && pip uninstall -y opencv-python-headless",
            blocking=False,
        )
    try:  # devices, files, a camera by USB id, a robot's own (named) camera
        kind, where = parse_source(source, named)
    except CameraError as e:
        return Check("camera", False, f"{head}; {e}", "v4l2-ctl --list-devices", blocking=False)
    shown = source if str(where) == source else f"{source} ({where})"
    return Check("camera", True, f"{head}; source {shown}", blocking=False)
