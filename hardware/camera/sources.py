"""Camera sources: what ``[camera] source`` names, and opening it as a frame reader.

Sources (:func:`parse_source`): a V4L2 device (``"0"`` or ``"/dev/video0"``), a GStreamer
pipeline string (anything containing ``!``, e.g. Jetson CSI ``nvarguscamerasrc ! ... !
appsink`` — needs an OpenCV built with GStreamer: JetPack's system OpenCV, not the PyPI
wheels), a video file (played at its own frame rate, looping), a folder of images (cycled at
``fps``, default 2 Hz) or a still image. A USB camera by its ids (``"usb:VVVV:PPPP"``,
:mod:`hardware.camera.usb`) resolves to its V4L2 device each time it opens. A robot's own camera
is a named source (:class:`~hardware.camera.base.NamedSource`: ``reachy_mini``,
``reachy_mini_sim``), passed in by the caller (:func:`hardware.registry.camera_sources`).
Frames are BGR ``uint8`` arrays of shape ``(h, w, 3)``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np

from hardware.camera.base import CameraError, FrameReader, NamedSource
from hardware.camera.usb import is_usb_source, resolve_usb_source
from hardware.config import CameraConfig

log = logging.getLogger(__name__)

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def parse_source(source: str, named: Mapping[str, NamedSource] | None = None) -> tuple[str, int | str | Path]:
    """Classify a camera source string.

    Args:
        source: ``[camera] source``.
        named: The named sources known here (:func:`hardware.registry.camera_sources`).

    Returns:
        ``("v4l2", index|path)``, ``("gstreamer", pipeline)``, ``("file", path)``,
        ``("folder", path)``, ``("image", path)``, or a named source's ``(kind, name)``; a USB
        camera by ids (``usb:VVVV:PPPP``, or a named device such as ``reachy_mini``) is
        ``("v4l2", "/dev/videoN")``.

    Raises:
        CameraError: empty, a path that does not exist, or a USB camera that is not plugged in.

    """
    s = str(source).strip()
    if not s:
        raise CameraError("no camera source configured")
    known = (named or {}).get(s)
    if known is not None:
        return (known.kind, known.find()) if known.find is not None else (known.kind, s)
    if is_usb_source(s):
        return "v4l2", resolve_usb_source(s)
    if s.isdigit():
        return "v4l2", int(s)
    if "!" in s:
        return "gstreamer", s
    p = Path(s).expanduser()
    if s.startswith("/dev/"):
        if not p.exists():
            raise CameraError(f"camera {s} does not exist (is it plugged in? see ls /dev/video*)")
        return "v4l2", s
    if not p.exists():
        raise CameraError(
            f"camera source {s} does not exist (expected a device, pipeline, video file or image folder)"
        )
    if p.is_dir():
        return "folder", p
    return ("image", p) if p.suffix.lower() in IMAGE_EXTS else ("file", p)


def read_image(path: Path | str) -> np.ndarray:
    """Read one image file as BGR ``uint8`` ``(h, w, 3)``.

    Raises:
        CameraError: missing, unreadable or not a decodable image.

    """
    p = Path(path)
    if not p.is_file():
        raise CameraError(f"image {p} does not exist")
    img = cv2.imread(str(p), cv2.IMREAD_COLOR)
    if img is None or img.size == 0:
        raise CameraError(f"image {p} could not be decoded (corrupt or not an image)")
    return img


class _FolderReader:
    """Cycles through readable images (corrupt ones are reported in ``problems`` and skipped)."""

    def __init__(self, path: Path) -> None:
        self.frames: list[np.ndarray] = []
        self.problems: list[str] = []
        if path.is_file():
            self.frames.append(read_image(path))
        else:
            for f in sorted(path.iterdir()):
                if f.suffix.lower() in IMAGE_EXTS:
                    try:
                        self.frames.append(read_image(f))
                    except CameraError as e:
                        self.problems.append(str(e))
                        log.warning("%s; skipped", e)
            if not self.frames:
                raise CameraError(f"image folder {path} has no readable images")
        self.i = 0

    def read(self) -> tuple[bool, np.ndarray | None]:
        frame = self.frames[self.i % len(self.frames)]
        self.i += 1
        return True, frame

    def release(self) -> None:
        self.frames = []


def open_reader(
    source: str, cfg: CameraConfig | None = None, named: Mapping[str, NamedSource] | None = None
) -> tuple[FrameReader, str, float]:
    """Open a source; returns ``(reader with read()/release(), kind, pacing fps or 0)``.

    Args:
        source: See :func:`parse_source`.
        cfg: ``[camera]`` (size, rate).
        named: The named sources known here (a robot's own cameras).

    Raises:
        CameraError: the source does not exist, cannot be opened, or yields no frame.

    """
    cfg = cfg or CameraConfig(source=source)
    kind, arg = parse_source(source, named)
    if kind in ("folder", "image"):
        return _FolderReader(Path(arg)), kind, cfg.fps or 2.0
    known = (named or {}).get(str(source).strip())
    if known is not None and known.open is not None:
        return known.open(cfg), kind, cfg.fps or known.fps
    if kind == "gstreamer":
        cap = cv2.VideoCapture(arg, cv2.CAP_GSTREAMER)
    elif kind == "v4l2":
        cap = cv2.VideoCapture(arg, cv2.CAP_V4L2)
    else:
        cap = cv2.VideoCapture(str(arg), cv2.CAP_FFMPEG)
    if not cap.isOpened():
        hint = (
            " (this OpenCV has no GStreamer: use JetPack's OpenCV on a Jetson)"
            if kind == "gstreamer" and "GStreamer:                   YES" not in cv2.getBuildInformation()
            else ""
        )
        if kind == "file":
            raise CameraError(f"cannot open video file {arg}{hint}; it may be empty, corrupt or in use")
        raise CameraError(f"cannot open camera {arg}{hint}; it may not exist, or another program uses it")
    if kind == "v4l2":
        if cfg.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, cfg.width)
        if cfg.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)
        if cfg.fps:
            cap.set(cv2.CAP_PROP_FPS, cfg.fps)
    ok, frame = cap.read()
    if not ok or frame is None:
        cap.release()
        raise CameraError(f"{'video file' if kind == 'file' else 'camera'} {arg} gives no frames")
    if kind == "file":
        cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        fps = cfg.fps or cap.get(cv2.CAP_PROP_FPS) or 25.0
        return cap, kind, min(fps, 60.0)
    return cap, kind, 0.0
