"""Build the vision-language layer from ``[vision]`` / ``[vision.vlm]``.

Every problem here leaves the agent running with OpenCV only and says so in one message:
a missing or broken projector, a VLM server that does not start, a chat model without vision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from agent.config import Config, LLMConfig, OpenAIConfig
from agent.config.vlm import VlmConfig, vlm_server_llm
from agent.engines import ChatEngine, make_chat_model
from agent.engines.base import LLMError
from agent.models import ModelNotFoundError, resolve_model
from agent.vision.describer import (
    DescribeError,
    Description,
    VisionConfigError,
    VlmDescriber,
    native_image_size,
)
from agent.vision.narrator import SceneNarrator
from hardware.perception.watcher import Vision

log = logging.getLogger(__name__)

OPENCV_ONLY = "describing with OpenCV only"


def wants_vlm(cfg: Config) -> bool:
    """Whether the config asks for a vision-language describer."""
    return cfg.vision.enabled and cfg.vision.describer == "vlm"


def loadable_projector(path: Path) -> Path:
    """The projector to hand to llama.cpp: a vision-only copy when the file also holds audio.

    Raises:
        DescribeError: the copy cannot be written (disk full, read-only cache): loading the
            whole file instead would cost the audio encoder's memory the plan does not count.
    """
    from agent.vision.projector import vision_only

    try:
        loadable, dropped = vision_only(path)
    except (OSError, ValueError) as e:
        raise DescribeError(
            f"{path.name} also holds an audio encoder and a vision-only copy could not be written ({e})"
        ) from None
    if dropped:
        log.info(
            "%s: loading a vision-only copy (%.0f MiB of audio encoder left out)", path.name, dropped / 2**20
        )
    return loadable


def check_projector(path: Path) -> int:
    """Check a projector file (whole, a vision projector); returns its native input size, px.

    Raises:
        DescribeError: missing, unreadable, truncated, not a vision projector (the message
            names the file; :func:`agent.engines.media.check_projector`).
    """
    from agent.engines.media import check_projector as check

    try:
        check(path)
    except LLMError as e:
        raise DescribeError(str(e)) from None
    return native_image_size(path)


def chat_projector(cfg: Config) -> tuple[Path | None, list[str]]:
    """The projector to load next to the chat model (``[vision.vlm] engine = "chat"``).

    Returns:
        ``(path or None, messages)``: None with a message when the projector is missing or
        broken (the chat model then loads without vision and the agent runs on with OpenCV).
    """
    vlm = cfg.vision.vlm
    if not wants_vlm(cfg) or vlm.engine != "chat":
        return None, []
    if not vlm.mmproj:
        return None, [
            '[vision] describer = "vlm" with engine "chat" needs [vision.vlm] mmproj (the chat model\'s '
            f"projector GGUF); {OPENCV_ONLY}"
        ]
    try:
        path = resolve_model(vlm.mmproj, "vision projector")
        check_projector(path)
        return loadable_projector(path), []
    except (ModelNotFoundError, DescribeError) as e:
        return None, [f"vision: {e}; {OPENCV_ONLY}"]


def _server_engine(cfg: Config, vlm: VlmConfig) -> tuple[ChatEngine, Path | None]:
    """A separate VLM as its own llama-server child process."""
    if not vlm.model or not vlm.mmproj:
        raise VisionConfigError('[vision.vlm] engine = "llama-server" needs model and mmproj (GGUF files)')
    try:
        model = resolve_model(vlm.model, "vision model")
        mmproj = resolve_model(vlm.mmproj, "vision projector")
    except ModelNotFoundError as e:
        raise VisionConfigError(str(e)) from None
    check_projector(mmproj)
    mmproj = loadable_projector(mmproj)
    llm = vlm_server_llm(vlm, cfg.llm, str(model))
    try:
        return make_chat_model(llm, model, mmproj=mmproj, mmproj_offload=vlm.mmproj_offload), mmproj
    except LLMError as e:
        raise DescribeError(f"the vision model's llama-server did not start: {e}") from None


def _openai_engine(vlm: VlmConfig) -> ChatEngine:
    """An OpenAI-compatible vision endpoint (``/v1/chat/completions`` with ``image_url`` parts)."""
    llm = LLMConfig(
        engine="openai",
        model="",
        warmup=False,
        openai=OpenAIConfig(
            url=vlm.url,
            api="chat",
            model_name=vlm.model,
            api_key_env=vlm.api_key_env,
            request_timeout_s=vlm.request_timeout_s,
            llama_cpp_extensions=False,
        ),
    )
    try:
        return make_chat_model(llm, None, vision=True)
    except LLMError as e:
        raise DescribeError(f"the remote vision model: {e}") from None


def _chat_engine(cfg: Config) -> tuple[ChatEngine, Path]:
    """The chat model loaded with its projector, on its own (``bolt-agent see``, benchmarks)."""
    mmproj, messages = chat_projector(cfg)
    if mmproj is None:
        why = messages[0].rsplit(";", 1)[0] if messages else "no projector configured"
        ref = cfg.vision.vlm.mmproj
        named = bool(ref) and (ref.startswith(("hf:", "packaged:")) or Path(ref).expanduser().exists())
        raise (DescribeError if named else VisionConfigError)(why)  # a broken file, or a config to fix
    try:
        path = resolve_model(cfg.llm.model, "LLM") if cfg.llm.model else None
        return make_chat_model(
            cfg.llm, path, mmproj=mmproj, mmproj_offload=cfg.vision.vlm.mmproj_offload
        ), mmproj
    except (ModelNotFoundError, LLMError) as e:
        raise DescribeError(f"the chat model with its projector did not load: {e}") from None


def make_vlm_describer(
    cfg: Config,
    chat: ChatEngine | None = None,
    chat_mmproj: Path | None = None,
    render: Callable[[str], str] | None = None,
) -> VlmDescriber:
    """The describer ``[vision.vlm]`` asks for.

    Args:
        cfg: The validated config (``[vision] describer = "vlm"``).
        chat: The running chat model (None: for ``engine = "chat"`` it is loaded here, with its
            projector, and closed with the describer).
        chat_mmproj: The projector ``chat`` was loaded with.
        render: The conversation's renderer (the chat model's own vision reuses its KV cache).

    Raises:
        VisionConfigError: the config names no model or projector where one is needed, or a
            local file that is not there (``bolt-agent see`` exits 2, as for any bad config).
        DescribeError: a model or projector is broken, a server did not start, or the engine
            cannot take images; the message names the file or server.
    """
    vlm = cfg.vision.vlm
    count = chat.count_tokens if chat is not None else None  # the context's own tokens
    if vlm.engine == "chat":
        owns = chat is None
        if chat is None:
            chat, chat_mmproj = _chat_engine(cfg)
        if chat_mmproj is None or not getattr(chat, "vision", False):
            raise DescribeError("the chat model was loaded without its vision projector")
        engine, mmproj, name = chat, chat_mmproj, "chat model's vision"
    else:
        owns, render = True, None  # a separate model: its own prompt, closed with the describer
        if vlm.engine == "llama-server":
            engine, mmproj = _server_engine(cfg, vlm)
            name = "vision model (llama-server)"
        else:
            engine, mmproj = _openai_engine(vlm), None
            name = f"remote vision model at {vlm.url}"
    return VlmDescriber(
        engine,
        vlm.image_size or native_image_size(mmproj),
        vlm.prompt,
        vlm.max_tokens,
        vlm.context_tokens,
        count=count,
        render=render,
        owns_engine=owns,
        name=name,
    )


def build_narrator(
    cfg: Config,
    vision: Vision | None,
    chat: ChatEngine,
    chat_mmproj: Path | None,
    render: Callable[[str], str] | None = None,
    on_described: Callable[[Description], None] | None = None,
    on_error: Callable[[str], None] | None = None,
) -> tuple[SceneNarrator | None, list[str]]:
    """The vision-language layer the config asks for, or None with the reason.

    Args:
        cfg: The validated config.
        vision: The camera's OpenCV layer (None: no camera, so nothing to describe).
        chat: The chat model (described with when ``engine = "chat"``; counts context tokens).
        chat_mmproj: The projector loaded next to the chat model (None when it is not).
        render: The conversation's renderer for the chat model's own vision (reuses its cache).
        on_described: Receives each description.
        on_error: Receives failure messages.

    Returns:
        ``(narrator or None, messages)``; messages say why vision-language descriptions are off.
    """
    if not wants_vlm(cfg):
        return None, []
    if vision is None:
        return None, ["vision: no camera, so no scene descriptions"]
    vlm = cfg.vision.vlm
    if vlm.engine == "chat" and (chat_mmproj is None or not getattr(chat, "vision", False)):
        return None, []  # chat_projector() or the model load already said why
    try:
        describer = make_vlm_describer(cfg, chat, chat_mmproj, render)
    except DescribeError as e:
        return None, [f"vision: {e}; {OPENCV_ONLY}"]
    narrator = SceneNarrator(
        vision,
        describer,
        frames=vlm.frames,
        frame_gap_s=vlm.frame_gap_s,
        change_threshold=vlm.change_threshold,
        min_interval_s=vlm.min_interval_s,
        on_arrival=vlm.on_arrival,
        shares_model=vlm.engine == "chat",
        on_described=on_described,
        on_error=on_error,
        clock=vision.clock,
    )
    return narrator, []
