"""What the console shows besides the conversation: static info, the body, the camera.

Pure functions from the agent's parts to JSON-ready dicts (sent as console messages), plus
the camera frame as a JPEG with the latest scene's face and person boxes drawn in.

* :func:`info` — models in use, the memory plan, joints with their limits and units,
  animations and the body's libraries (a Reachy Mini's dances and emotions), the driver
  (sent once to each page when it connects).
* :func:`body` — joint positions, the animation playing, whether the motors move, the
  posture, the driver's state, e-stop, torque, microphone mute.
* :func:`camera` — the latest scene (summary, boxes, age) or None before the first one.
* :func:`frame_jpeg` — the camera's newest frame, boxes drawn, at most 640 px wide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.config import Config
from hardware.config import REACHY_MINI
from hardware.perception.watcher import Vision
from hardware.reachy_mini.pose import HEAD_POSITION
from hardware.robot import Robot

if TYPE_CHECKING:
    from agent.memplan import BudgetVerdict

FRAME_WIDTH = 640
"""Frames are scaled down to at most this width for the page, px."""


def models(cfg: Config, vision: Vision | None) -> dict[str, str]:
    """The models in use, by role (config references as written)."""
    llm = cfg.llm.model or "(no local file)"
    if cfg.llm.engine == "openai":
        llm = f"{cfg.llm.openai.model_name or cfg.llm.model or 'remote model'} via {cfg.llm.openai.url}"
    return {
        "asr": f"{cfg.asr.model} ({cfg.asr.device}, {cfg.asr.compute_type})",
        "llm": f"{llm} ({cfg.llm.engine}, n_ctx {cfg.llm.n_ctx}, {cfg.llm.tool_format} tools)",
        "tts": cfg.tts.voice,
        "vision": cfg.vision.describer if vision is not None else "off",
    }


def memory(cfg: Config, verdict: BudgetVerdict | None = None) -> dict[str, Any]:
    """The memory plan: ``{"message": ..., "fits": ..., "plan": plan_json or None}``.

    Args:
        cfg: The config.
        verdict: ``run``'s :class:`~agent.memplan.BudgetVerdict` when it made one; otherwise
            it is made here (from GGUF headers only), except for a remote (``openai``) model.
    """
    if verdict is None and cfg.llm.engine != "openai":
        from agent.memplan import check_budget

        verdict = check_budget(cfg)
    if verdict is None:
        return {"message": "the model runs on another machine: no memory plan", "fits": True, "plan": None}
    from agent.memplan import plan_json

    plan = plan_json(verdict.plan) if verdict.plan is not None else None
    return {"message": verdict.message, "fits": verdict.fits, "plan": plan}


def joint_units(cfg: Config) -> dict[str, str]:
    """The unit of each configured joint's positions: ``"mm"`` or ``"deg"``.

    A Reachy Mini's head translations (``head_x/y/z`` on the ``reachy_mini`` driver) are
    millimetres (:mod:`hardware.reachy_mini.pose`); every other joint is in degrees.
    """
    robot = cfg.robot
    return {
        j.name: "mm" if (j.driver or robot.driver) == REACHY_MINI and j.name in HEAD_POSITION else "deg"
        for j in robot.joints
    }


def info(
    cfg: Config, robot: Robot, vision: Vision | None, verdict: BudgetVerdict | None = None
) -> dict[str, Any]:
    """The ``info`` message: models, memory plan, joints, animations, libraries and the driver.

    Each joint has ``min_deg``, ``max_deg`` and ``neutral_deg`` in its ``unit`` (``"deg"``, or
    ``"mm"`` for a Reachy Mini's head translations; the keys keep their names). ``libraries``
    lists the body's gestures by kind (``dances``, ``emotions``), playable like ``animations``.
    """
    units = joint_units(cfg)
    return {
        "event": "info",
        "turn_id": -1,
        "models": models(cfg, vision),
        "memory": memory(cfg, verdict),
        "joints": [
            {
                "name": j.name,
                "min_deg": j.min_deg,
                "max_deg": j.max_deg,
                "neutral_deg": j.neutral_deg,
                "unit": units.get(j.name, "deg"),
            }
            for j in robot.joints.values()
        ],
        "animations": sorted(robot.animations),
        "libraries": {kind: sorted(moves) for kind, moves in sorted(robot.libraries.items())},
        "postures": sorted(robot.postures),
        "driver": getattr(robot.driver, "name", ""),
        "camera": vision is not None,
    }


def body(robot: Robot, positions: dict[str, float], muted: bool, can_mute: bool) -> dict[str, Any]:
    """The ``body`` message: joint positions, animation, motion, posture, driver, e-stop, torque, mute.

    ``positions`` are in each joint's unit (see :func:`info`); ``moving`` is True while a
    gesture or the speech sway drives the motors; ``driver`` is the driver's ``state``
    (``connecting``, ``online``, ``offline``, ``closed``), its ``message`` (what is wrong) and
    its ``notes`` (e.g. a Reachy Mini's safety check that is off).
    """
    state, message = robot.status()
    return {
        "event": "body",
        "turn_id": -1,
        "positions": {k: round(v, 1) for k, v in positions.items()},
        "playing": robot.playing,
        "moving": robot.moving,
        "posture": robot.posture,
        "driver": {
            "state": state,
            "message": message,
            "notes": list(getattr(robot.driver, "notes", ())),
        },
        "estopped": robot.estopped,
        "torque": robot.torque_on,
        "muted": muted,
        "can_mute": can_mute,
    }


def camera(vision: Vision) -> dict[str, Any] | None:
    """The ``camera`` message for the latest scene (boxes in frame pixels), or None."""
    scene = vision.latest()
    if scene is None:
        return None
    offline = vision.camera is not None and vision.camera.state == "offline"
    return {
        "event": "camera",
        "turn_id": -1,
        "t": scene.t,
        "summary": scene.summary,
        "age_s": round(vision.age_s(scene) or 0.0, 1),
        "width": scene.width,
        "height": scene.height,
        "people": [list(p.box) for p in scene.people],
        "faces": [list(f.box) for f in scene.faces],
        "offline": offline,
    }


def frame_jpeg(vision: Vision) -> bytes | None:
    """The camera's newest frame as JPEG with the latest scene's boxes, or None without a frame.

    Faces are drawn green and people orange; the frame is scaled to at most
    :data:`FRAME_WIDTH` px wide. Costs a few ms: call it off the server's event loop.
    """
    import cv2

    got = vision.camera.latest() if vision.camera is not None else None
    if got is None:
        return None
    frame = got[0].copy()
    scene = vision.latest()
    if scene is not None and scene.width and scene.height:
        sx, sy = frame.shape[1] / scene.width, frame.shape[0] / scene.height
        for boxes, colour in (
            ([p.box for p in scene.people], (0, 140, 255)),
            ([f.box for f in scene.faces], (0, 200, 0)),
        ):
            for x, y, w, h in boxes:
                p1 = (int(x * sx), int(y * sy))
                p2 = (int((x + w) * sx), int((y + h) * sy))
                cv2.rectangle(frame, p1, p2, colour, 2)
    if frame.shape[1] > FRAME_WIDTH:
        scale = FRAME_WIDTH / frame.shape[1]
        frame = cv2.resize(frame, (FRAME_WIDTH, int(frame.shape[0] * scale)), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 75])
    return buf.tobytes() if ok else None
