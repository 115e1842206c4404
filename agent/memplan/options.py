"""The vision choices side by side: what each costs on a device and whether the config still fits.

``bolt-agent budget --vision-options`` plans the same config three ways, changing only
``[vision]``: no vision-language model (the OpenCV layer alone), the chat model's own vision
(``[vision.vlm] engine = "chat"``: its projector beside it, as the agent loads it: a vision-only
copy, any audio encoder in the file left out) and a separate 2B VLM (``engine =
"llama-server"``: Cosmos Reason 2 2B unless ``[vision.vlm] model`` names another, with flash
attention on as :func:`agent.config.vlm.vlm_server_llm` starts it). The engine the config
names keeps its own files and settings; the others are planned from published shapes. Each is a
full :func:`~agent.memplan.plan.plan_config` with its verdict
(:func:`~agent.memplan.plan.check_budget`), so ``n_ctx = "fit"`` and the fixes see the vision
rows too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.memplan.devices import DeviceProfile
from agent.memplan.llm import GiB, MiB
from agent.memplan.plan import BudgetVerdict, Plan, check_budget, plan_config

if TYPE_CHECKING:
    from agent.config import Config

__all__ = ["VISION_CHOICES", "VisionOption", "vision_options", "vision_options_table"]

VISION_CHOICES = ("none", "chat", "llama-server")
"""The options compared: no VLM, the chat model's own vision (a vision-only copy of its
projector), a separate VLM process."""
_LABELS = {
    "none": "no VLM (OpenCV faces + people only)",
    "chat": "the chat model's own vision (vision-only projector)",
    "llama-server": "a separate 2B VLM (llama-server)",
}


@dataclass(frozen=True)
class VisionOption:
    """One way to see, planned.

    Attributes:
        choice: ``none``, ``chat`` or ``llama-server`` (:data:`VISION_CHOICES`).
        label: One line for people.
        plan: The whole config's plan with this choice.
        verdict: Fits or not, with the fix when not.
        vision_bytes: What the vision rows add (bytes; OpenCV included).
    """

    choice: str
    label: str
    plan: Plan
    verdict: BudgetVerdict
    vision_bytes: int

    @property
    def fits(self) -> bool:
        """Whether the config fits the device with this choice."""
        return self.plan.fits

    @property
    def headroom(self) -> int:
        """Budget left (negative: over), bytes."""
        return self.plan.headroom


def _variant(cfg: Config, choice: str) -> Config:
    """``cfg`` with ``[vision]`` set to ``choice``; an engine the config does not name gets no files."""
    vision = cfg.vision
    if choice == "none":
        return cfg.model_copy(update={"vision": vision.model_copy(update={"describer": "opencv"})})
    vlm = vision.vlm
    keep = vlm.engine == choice  # the config's own files for the engine it names; published shapes otherwise
    update: dict[str, object] = {"engine": choice}
    if not keep:
        update |= {"model": "", "mmproj": ""}
    new = vision.model_copy(update={"describer": "vlm", "vlm": vlm.model_copy(update=update)})
    return cfg.model_copy(update={"vision": new})


def vision_options(cfg: Config, device: DeviceProfile | str | None = None) -> list[VisionOption]:
    """Plan ``cfg`` with each of :data:`VISION_CHOICES`.

    Args:
        cfg: The config (needs a ``[camera] source``; without one there is nothing to see).
        device: Profile or name; None = ``[llm] device_profile``.

    Returns:
        One :class:`VisionOption` per choice, in :data:`VISION_CHOICES` order.

    Raises:
        PlanError: no plan can be made (chat model not here and no published shape, bad device).
        ValueError: the config has no camera.
    """
    if not getattr(cfg.camera, "source", ""):
        raise ValueError("no [camera] source: vision is off, there is nothing to compare")
    out = []
    for choice in VISION_CHOICES:
        variant = _variant(cfg, choice)
        plan = plan_config(variant, device)
        verdict = check_budget(variant, plan.device)
        vis = plan.vision.total if plan.vision is not None else 0
        out.append(VisionOption(choice, _LABELS[choice], plan, verdict, vis))
    return out


def vision_options_table(options: list[VisionOption]) -> str:
    """The options as aligned text: vision's cost, the total, and fits or not with the headroom (GiB)."""
    if not options:
        return ""
    dev = options[0].plan.device
    rows = [
        (
            o.label,
            f"{o.vision_bytes / MiB:,.0f}",
            f"{o.plan.total / GiB:.2f}",
            ("fits, " if o.fits else "OVER, ") + f"{o.headroom / GiB:+.2f} GiB",
            str(o.plan.settings.n_ctx),
        )
        for o in options
    ]
    head = ("vision option", "vision MiB", "total GiB", f"of {dev.budget / GiB:.2f} GiB", "n_ctx")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, 3) else f"{{:>{w}}}" for i, w in enumerate(widths))
    out = [f"vision options on {dev.name} ({dev.description}):", fmt.format(*head)]
    out += [fmt.format(*r).rstrip() for r in rows]
    for o in options:
        if not o.fits:
            out.append(f"  {o.label}: {o.verdict.message}")
    return "\n".join(out)
