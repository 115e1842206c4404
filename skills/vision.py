"""Vision skills: describe what the camera sees, and turn the head toward someone.

Both need a camera (``needs=("camera",)``): on a robot configured without one they are not
offered, and "what can you do?" does not promise to "tell you what I see". They read the vision
service from ``ctx.scene`` (None where a context has no camera all the same: the skill then
fails with a message the model can pass on). With ``[vision] describer = "vlm"``,
``describe_scene`` also asks the vision-language model (``ctx.narrator``) for a description of
the newest frame. ``describe_scene`` is data (its result
is read back in a follow-up round; a camera look takes a moment, so "Let me look." is said as
soon as the model picks it); ``look_at`` is a movement (``follow_up=False``: spoken while
the head turns; a failed call still gets its follow-up round).
"""

from typing import Literal

from agent.skills import SkillContext, skill

TURN_DEG = {"left": 35.0, "right": -35.0, "centre": 0.0}
"""Head yaw for the fixed directions, degrees (positive = left, as in ``look``)."""


def _vision(ctx: SkillContext):
    if ctx.scene is None:
        raise RuntimeError("I have no camera, so I cannot see")
    return ctx.scene


@skill(
    keywords=("see", "camera", "who", "describe", "room", "holding"),
    preamble="Let me look.",
    timeout_s=30.0,  # a vision-language model's look: an image encode and a sentence
    side_effects=False,  # a look changes nothing: it may start before the user's silence confirms the turn
    ability="tell you what I see",
    needs=("camera",),  # not offered, nor promised in "what can you do?", without one
)
def describe_scene(ctx: SkillContext) -> dict:
    """Describe what the camera sees now: what is there, people, where they are, light and motion."""
    vision = _vision(ctx)
    scene = vision.describe_now()
    if scene is None:
        raise RuntimeError(f"the camera has no picture yet{': ' + vision.message if vision.message else ''}")
    out = scene.to_json()
    out["age_s"] = round(vision.age_s(scene) or 0.0, 1)
    narrator = ctx.narrator
    if narrator is not None:  # a vision-language model's words; OpenCV's facts stand without them
        try:
            described = narrator.describe_now(timeout_s=10.0)
        except Exception as e:  # noqa: BLE001 - the OpenCV answer is still worth giving
            out["description_error"] = str(e)
        else:
            out["description"] = described.text
    return out


@skill(
    follow_up=False,
    keywords=("look at", "face", "turn to", "watch"),
    needs=("head_yaw", "head_pitch", "camera"),
    ability="look at people",
)
def look_at(ctx: SkillContext, target: Literal["face", "person", "left", "right", "centre"] = "face") -> str:
    """Turn the head toward the nearest face or person, or to the left, right or centre.

    Args:
        ctx: The robot and the camera (left out of the tool schema).
        target: face or person = the nearest one the camera sees; left, right, centre = a fixed direction.

    Raises:
        RuntimeError: no camera, no picture yet, or nobody of ``target`` in view (the message is
            said to the user).
    """
    robot = ctx.robot
    if target in TURN_DEG:
        robot.move({"head_yaw": TURN_DEG[target], "head_pitch": 0.0}, duration_ms=600)
        return f"I am looking {'to the ' + target if target != 'centre' else 'straight ahead'}."
    vision = _vision(ctx)
    scene = vision.describe_now()
    if scene is None:
        raise RuntimeError("the camera has no picture yet")
    found = scene.faces if target == "face" else scene.people
    if not found:  # a failure said to people: "Sure!" alone left the user waiting for a turn
        raise RuntimeError(f"I see no {target} to look at, so I stay as I am")
    best = max(found, key=lambda d: d.box[2] * d.box[3])
    hfov = getattr(vision.describer, "hfov_deg", None) or getattr(
        getattr(vision.describer, "base", None), "hfov_deg", 62.2
    )
    vfov = hfov * scene.height / scene.width
    pos = robot.positions()
    yaw = pos.get("head_yaw", 0.0) + (0.5 - best.cx) * hfov
    pitch = pos.get("head_pitch", 0.0) + (0.5 - best.cy) * vfov
    robot.move({"head_yaw": yaw, "head_pitch": pitch}, duration_ms=500)
    place = "in the centre" if best.region == "centre" else f"on the {best.region}"
    return f"I am turning toward the {target} {place} (yaw {yaw:.0f}, pitch {pitch:.0f})."
