"""Memory planner: what bolt-agent needs on a device, from GGUF headers, llama.cpp's sizing and measurements.

Split by concern: :mod:`.shape` (reading a GGUF header), :mod:`.gemma4` (Gemma 4 tensor
layouts and Bolt E4B's published shape), :mod:`.llm` (llama.cpp's weights / KV / compute
sizing), :mod:`.components` (Python, ASR, TTS, end-of-turn models), :mod:`.draft` (the
speculative-decoding drafter), :mod:`.vision_plan` (the OpenCV layer and the vision-language model
of ``[vision] describer = "vlm"``, with :mod:`.projector` for ``mmproj`` files and
:mod:`.vlm_shapes` for published shapes), :mod:`.options` (the vision choices side by side),
:mod:`.devices` (board profiles and
the unified-memory rule), :mod:`.plan` (totals, verdict, fixes, ``n_ctx = "fit"``) and
:mod:`.report` (table and JSON). Everything is pure computation on headers and config; no
weights are loaded.

The two entry points for the agent: :func:`check_budget` (``run`` refuses to start when it
says the config does not fit) and :func:`resolve_n_ctx` (turns ``n_ctx = "fit"`` into an int).
"""

from agent.memplan.devices import PROFILES, DeviceProfile, UnknownDeviceError, get_device, this_machine
from agent.memplan.draft import DraftPlan
from agent.memplan.llm import LLMMemory, LLMSettings, llm_memory
from agent.memplan.options import VisionOption, vision_options, vision_options_table
from agent.memplan.plan import (
    BudgetVerdict,
    Plan,
    PlanError,
    check_budget,
    load_model_shape,
    plan_config,
    resolve_n_ctx,
    settings_from_config,
)
from agent.memplan.projector import ImageTokens, ProjectorError, ProjectorShape, image_tokens, read_projector
from agent.memplan.report import plan_json, plan_table
from agent.memplan.shape import ModelShape, ShapeError, read_gguf_shape
from agent.memplan.vision_plan import VisionPlan, plan_vision

__all__ = [
    "PROFILES",
    "BudgetVerdict",
    "DeviceProfile",
    "DraftPlan",
    "ImageTokens",
    "LLMMemory",
    "LLMSettings",
    "ModelShape",
    "Plan",
    "PlanError",
    "ProjectorError",
    "ProjectorShape",
    "ShapeError",
    "UnknownDeviceError",
    "VisionOption",
    "VisionPlan",
    "check_budget",
    "get_device",
    "image_tokens",
    "llm_memory",
    "load_model_shape",
    "plan_config",
    "plan_json",
    "plan_table",
    "plan_vision",
    "read_gguf_shape",
    "read_projector",
    "resolve_n_ctx",
    "settings_from_config",
    "this_machine",
    "vision_options",
    "vision_options_table",
]
