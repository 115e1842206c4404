"""USB cameras by their ids: ``[camera] source = "usb:VVVV:PPPP"`` → the camera's ``/dev/videoN``.

The node is found in sysfs (:func:`find_usb_camera`: ``/sys/class/video4linux/video*/device`` up
to the USB device's ``idVendor``/``idProduct``, the node with the lowest ``index``, which is the
capture node of a UVC camera; the metadata node is ``index`` 1), again each time the camera
opens, so a camera plugged into another port, or in later, is found. A robot's own USB camera is
a named source that tries its models' ids in order (:func:`find_first`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hardware.camera.base import CameraError

log = logging.getLogger(__name__)

USB_PREFIX = "usb:"


@dataclass(frozen=True)
class UsbCamera:
    """A USB camera model by its ids (hex ``vid:pid`` as ``lsusb`` prints them)."""

    vid: int
    pid: int
    name: str

    def ids(self) -> str:
        """``"38fb:1002"``."""
        return f"{self.vid:04x}:{self.pid:04x}"


def parse_usb_ids(spec: str) -> UsbCamera:
    """``"usb:38fb:1002"`` (hex, case-insensitive) → :class:`UsbCamera`.

    Raises:
        CameraError: not of the form ``usb:VVVV:PPPP``.

    """
    parts = spec.strip().split(":")
    try:
        if len(parts) != 3 or parts[0].lower() != "usb":
            raise ValueError(spec)
        vid, pid = (int(p, 16) for p in parts[1:])
        if not (0 <= vid <= 0xFFFF and 0 <= pid <= 0xFFFF):
            raise ValueError(spec)
    except ValueError:
        raise CameraError(
            f"camera source {spec!r} is not usb:VVVV:PPPP "
            "(hex USB vendor and product ids, as lsusb prints them)"
        ) from None
    return UsbCamera(vid, pid, f"USB camera {vid:04x}:{pid:04x}")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _usb_ids_of(node: Path, sysfs_root: Path) -> tuple[int, int] | None:
    """The ``(idVendor, idProduct)`` of the USB device above a video node, or None (not USB)."""
    try:
        here = (node / "device").resolve(strict=True)
    except OSError:
        return None
    root = sysfs_root.resolve()
    while here != root and root in here.parents:
        vid, pid = _read(here / "idVendor"), _read(here / "idProduct")
        if vid and pid:
            try:
                return int(vid, 16), int(pid, 16)
            except ValueError:
                return None
        here = here.parent
    return None


def find_usb_camera(vid: int, pid: int, sysfs_root: Path | str = "/sys") -> str | None:
    """The capture node of a USB camera, ``"/dev/videoN"``, or None when none is plugged in.

    Walks ``<sysfs_root>/class/video4linux/video*``: each node's ``device`` link leads to the USB
    interface, whose parent USB device holds ``idVendor``/``idProduct`` (hex). Of the matching
    nodes, the one with the lowest ``index`` attribute wins (the kernel numbers a device's nodes
    in registration order: a UVC camera registers its capture node first, ``index`` 0, then its
    metadata node, ``index`` 1; udev's ``/dev/v4l/by-id/...-video-index0`` links use the same
    attribute), then the lowest ``N``.

    Args:
        vid: USB vendor id.
        pid: USB product id.
        sysfs_root: Where sysfs is mounted (tests pass a fake tree).

    """
    base = Path(sysfs_root) / "class" / "video4linux"
    try:
        nodes = [p for p in base.iterdir() if p.name.startswith("video")]
    except OSError:
        return None
    found: list[tuple[int, int, str]] = []
    for node in nodes:
        if _usb_ids_of(node, Path(sysfs_root)) != (vid, pid):
            continue
        index = _read(node / "index")
        number = node.name.removeprefix("video")
        found.append(
            (
                int(index) if index and index.isdigit() else 0,
                int(number) if number.isdigit() else 1 << 30,
                node.name,
            )
        )
    return f"/dev/{min(found)[2]}" if found else None


def find_first(cameras: Sequence[UsbCamera], sysfs_root: Path | str = "/sys") -> str | None:
    """The ``/dev/videoN`` of the first of ``cameras`` that is plugged in (tried in order), or None."""
    for cam in cameras:
        dev = find_usb_camera(cam.vid, cam.pid, sysfs_root)
        if dev is not None:
            log.debug("%s (%s) is %s", cam.name, cam.ids(), dev)
            return dev
    return None


def is_usb_source(source: str) -> bool:
    """Whether a camera source names a USB camera by ids (``usb:VVVV:PPPP``)."""
    return source.strip().lower().startswith(USB_PREFIX)


def resolve_usb_source(source: str, sysfs_root: Path | str = "/sys") -> str:
    """``"usb:VVVV:PPPP"`` → the camera's ``/dev/videoN``, resolved now.

    Raises:
        CameraError: malformed ids, or no such camera plugged in.

    """
    cam = parse_usb_ids(source)
    dev = find_first([cam], sysfs_root)
    if dev is None:
        raise CameraError(
            f"no USB camera {cam.ids()} is plugged in (lsusb lists what is; see ls /dev/video*)"
        )
    return dev
