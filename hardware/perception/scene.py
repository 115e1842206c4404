"""Scene descriptions from camera frames: the data types and the default OpenCV describer.

A describer turns one BGR frame (``uint8``, shape ``(h, w, 3)``) into a :class:`Scene`: faces,
people, brightness, motion and a one-line English summary such as "2 people: one in the
centre about 1.5 m away, one on the left; the room is dim; something is moving".

:class:`OpenCVDescriber` uses only what ships inside ``opencv-python(-headless)`` 4.x: the
Haar frontal-face cascade (``cv2.data.haarcascades``) and the HOG + linear SVM people
detector, run on a copy resized to ``detect_width`` (640 px) wide; brightness is the mean
grey level; motion is frame differencing against the previous frame (so the describer keeps
one small grey frame of state and is not thread-safe: one caller at a time). OpenCV 5
removed both detectors from the main module, hence the ``<5`` pin.

Positions: "left"/"right" are the image's left/right thirds, which are the robot's own left
and right for a forward-facing camera. Distance uses a pinhole model on the face box width:
``distance = f_px × face_width_m / box_width_px`` with ``f_px = (image_width / 2) /
tan(hfov / 2)``; defaults assume a 0.16 m wide Haar face box (a real face is ~0.14-0.16 m; the
box includes some margin) and a 62.2° horizontal field of view (Raspberry Pi Camera v2 /
IMX219, the common Jetson CSI camera). People found only by HOG get no distance.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np

Box = tuple[int, int, int, int]
"""``(x, y, w, h)`` in pixels of the original frame."""


@dataclass(frozen=True)
class Detection:
    """A detected face or person.

    Attributes:
        kind: ``"face"`` or ``"person"``.
        box: ``(x, y, w, h)``, pixels of the original frame.
        cx: Horizontal centre, 0 (left edge) .. 1 (right edge).
        cy: Vertical centre of the face (or of the top sixth of a body box), 0 (top) .. 1.
        region: ``"left"``, ``"centre"`` or ``"right"``.
        distance_m: Pinhole estimate from the face width, metres; None without a face.

    """

    kind: str
    box: Box
    cx: float
    cy: float
    region: str
    distance_m: float | None = None


@dataclass(frozen=True)
class Scene:
    """One description of one frame.

    Attributes:
        t: Capture time of the frame, monotonic seconds.
        width: Frame width, px.
        height: Frame height, px.
        people: One entry per person (face and body merged), largest first.
        faces: Every face found.
        brightness: Mean grey level, 0..255.
        light: ``"dark"``, ``"dim"``, ``"normal"`` or ``"bright"``.
        motion: Fraction of pixels that changed since the previous frame, 0..1; None for the first.
        moving: ``motion`` above the threshold.
        summary: One line of English.
        text: Free text from a vision-language describer ("" for the OpenCV one).
        describer: Name of the describer.

    """

    t: float
    width: int
    height: int
    people: tuple[Detection, ...] = ()
    faces: tuple[Detection, ...] = ()
    brightness: float = 0.0
    light: str = "normal"
    motion: float | None = None
    moving: bool = False
    summary: str = ""
    text: str = ""
    describer: str = "opencv"

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict: people and faces (counts), positions, brightness, motion, summary."""
        return {
            "people": len(self.people),
            "faces": len(self.faces),
            "positions": [asdict(p) for p in self.people],
            "face_boxes": [list(f.box) for f in self.faces],
            "brightness": round(self.brightness, 1),
            "light": self.light,
            "motion": None if self.motion is None else round(self.motion, 4),
            "moving": self.moving,
            "summary": self.summary,
            "text": self.text,
            "describer": self.describer,
            "width": self.width,
            "height": self.height,
        }


class Describer(Protocol):
    """Anything that describes a frame (OpenCV built-ins, a vision-language model...)."""

    name: str

    def describe(self, frame: np.ndarray, t: float) -> Scene:
        """Describe one BGR ``uint8`` frame of shape ``(h, w, 3)`` captured at ``t`` (monotonic s)."""


class DescriberError(Exception):
    """A describer cannot run (missing model file, bad frame); the message says what to do."""


def region_of(cx: float) -> str:
    """Horizontal position 0..1 → ``"left"`` / ``"centre"`` / ``"right"`` (thirds)."""
    return "left" if cx < 1 / 3 else "right" if cx > 2 / 3 else "centre"


def face_distance_m(box_w_px: float, image_w_px: int, hfov_deg: float, face_width_m: float) -> float:
    """Pinhole distance to a face of assumed width ``face_width_m`` (m) seen ``box_w_px`` wide."""
    f_px = (image_w_px / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    return f_px * face_width_m / max(box_w_px, 1.0)


def light_of(brightness: float) -> str:
    """Mean grey 0..255 → ``dark`` (<40), ``dim`` (<90), ``normal`` (<190), ``bright``."""
    return (
        "dark"
        if brightness < 40
        else "dim"
        if brightness < 90
        else "normal"
        if brightness < 190
        else "bright"
    )


def _inside(inner: Box, outer: Box) -> bool:
    cx, cy = inner[0] + inner[2] / 2, inner[1] + inner[3] / 2
    return outer[0] <= cx <= outer[0] + outer[2] and outer[1] <= cy <= outer[1] + outer[3]


_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
_LIGHT = {
    "dark": "the room is dark",
    "dim": "the room is dim",
    "normal": "the room is well lit",
    "bright": "the room is bright",
}


def summarize(people: tuple[Detection, ...], light: str, moving: bool | None) -> str:
    """Write the one-line summary (see the module docstring for an example)."""

    def where(p: Detection) -> str:
        place = "in the centre" if p.region == "centre" else f"on the {p.region}"
        return place + (f" about {p.distance_m:.1f} m away" if p.distance_m is not None else "")

    if not people:
        parts = ["nobody in view"]
    elif len(people) == 1:
        parts = [f"1 person: {where(people[0])}"]
    else:
        shown = ", ".join(f"one {where(p)}" for p in people[:4])
        more = f", and {len(people) - 4} more" if len(people) > 4 else ""
        parts = [f"{len(people)} people: {shown}{more}"]
    parts.append(_LIGHT[light])
    if moving is not None:
        parts.append("something is moving" if moving else "nothing is moving")
    return "; ".join(parts)


@dataclass
class OpenCVDescriber:
    """Faces (Haar), people (HOG), brightness and motion with OpenCV built-ins only.

    Attributes:
        detect_width: Frames are resized to this width before detection, px.
        hfov_deg: Camera horizontal field of view, degrees.
        face_width_m: Assumed face box width, m.
        people_detector: Run HOG (about 30-70 ms per 640 px frame on one core).
        motion_threshold: Changed-pixel fraction that counts as motion, 0..1.

    """

    detect_width: int = 640
    hfov_deg: float = 62.2
    face_width_m: float = 0.16
    people_detector: bool = True
    motion_threshold: float = 0.01
    name: str = "opencv"
    _prev: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        path = cv2.data.haarcascades + "haarcascade_frontalface_default.xml"
        self._faces = cv2.CascadeClassifier(path)
        if self._faces.empty():
            raise DescriberError(
                f"cannot load the Haar cascade {path}; is opencv-python-headless 4.x installed?"
            )
        self._hog = cv2.HOGDescriptor()
        self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def describe(self, frame: np.ndarray, t: float = 0.0) -> Scene:
        """Describe one BGR frame (``uint8``, ``(h, w, 3)``, or ``(h, w)`` grey) captured at ``t`` (s).

        Raises:
            DescriberError: not an image array.

        """
        if not isinstance(frame, np.ndarray) or frame.ndim not in (2, 3) or frame.size == 0:
            raise DescriberError(
                f"expected an image array (h, w, 3), got {getattr(frame, 'shape', type(frame))}"
            )
        if frame.ndim == 2:
            frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        h, w = frame.shape[:2]
        scale = self.detect_width / w if w > self.detect_width else 1.0
        small = cv2.resize(frame, (round(w * scale), round(h * scale))) if scale != 1.0 else frame
        gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
        up = 1.0 / scale

        def to_box(r: np.ndarray) -> Box:
            return (int(r[0] * up), int(r[1] * up), int(r[2] * up), int(r[3] * up))

        faces = []
        for r in self._faces.detectMultiScale(gray, scaleFactor=1.1, minNeighbors=5, minSize=(24, 24)):
            b = to_box(r)
            cx, cy = (b[0] + b[2] / 2) / w, (b[1] + b[3] / 2) / h
            faces.append(
                Detection(
                    "face",
                    b,
                    cx,
                    cy,
                    region_of(cx),
                    face_distance_m(b[2], w, self.hfov_deg, self.face_width_m),
                )
            )
        bodies: list[Box] = []
        if self.people_detector:
            rects, weights = self._hog.detectMultiScale(small, winStride=(8, 8), padding=(8, 8), scale=1.05)
            keep = [to_box(r) for r, wt in zip(rects, np.ravel(weights), strict=False) if wt > 0.5]
            bodies = [
                b
                for i, b in enumerate(keep)
                if not any(_inside(b, o) for j, o in enumerate(keep) if j != i and o[2] * o[3] > b[2] * b[3])
            ]
        people = []
        used: set[int] = set()
        for b in bodies:
            inner = [i for i, f in enumerate(faces) if i not in used and _inside(f.box, b)]
            if inner:
                used.add(inner[0])
                people.append(faces[inner[0]])
            else:
                cx, cy = (b[0] + b[2] / 2) / w, (b[1] + b[3] / 12) / h
                people.append(Detection("person", b, cx, cy, region_of(cx)))
        people += [f for i, f in enumerate(faces) if i not in used]
        people.sort(key=lambda d: -d.box[2] * d.box[3])
        brightness = float(gray.mean())
        motion = self._motion(gray)
        moving = motion is not None and motion > self.motion_threshold
        light = light_of(brightness)
        return Scene(
            t=t,
            width=w,
            height=h,
            people=tuple(people),
            faces=tuple(faces),
            brightness=brightness,
            light=light,
            motion=motion,
            moving=moving,
            summary=summarize(tuple(people), light, None if motion is None else moving),
            describer=self.name,
        )

    def _motion(self, gray: np.ndarray) -> float | None:
        tiny = cv2.GaussianBlur(
            cv2.resize(gray, (160, max(1, round(160 * gray.shape[0] / gray.shape[1])))), (5, 5), 0
        )
        prev, self._prev = self._prev, tiny
        if prev is None or prev.shape != tiny.shape:
            return None
        return float(np.count_nonzero(cv2.absdiff(prev, tiny) > 25)) / tiny.size

    def reset(self) -> None:
        """Forget the previous frame (a new source starts)."""
        self._prev = None
