"""Frames to words: a vision-language model describes camera frames through a chat engine.

:class:`VlmDescriber` sends one or a few BGR frames to any :class:`~agent.engines.base.ChatEngine`
that takes images (``engine.vision``): the chat model's own projector (``[vision.vlm] engine =
"chat"``), a separate VLM as its own llama-server child, or an OpenAI-compatible vision
endpoint. Each frame becomes one :data:`~agent.engines.request.MEDIA_MARKER` in the prompt and
one JPEG in :attr:`Decoding.images <agent.engines.request.Decoding.images>`; the engine turns it
into image tokens (libmtmd in llama.cpp: ``tools/mtmd/mtmd.h``).

Frame size is chosen, not inherited: a frame is shrunk so its longer side is the projector's
native input (``clip.vision.image_size``, or ``clip.vision.preproc_image_size`` where set) or
``[vision.vlm] image_size``. A frame larger than a tiling model's input is cut into tiles, each
a full encoder pass: SmolVLM's ``longest_edge`` 2048 gives 13 passes a frame (llama.cpp
``tools/mtmd/clip.cpp``, idefics3 preprocessing).

The answer is cleaned to plain speech-ready text (markup and thinking removed) and bounded to
a token budget before it enters the chat model's context.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from agent.config.vlm import DEFAULT_VLM_PROMPT
from agent.control import StopSignal
from agent.engines.base import ChatEngine, LLMError
from agent.engines.request import MEDIA_MARKER, Decoding


class DescribeError(Exception):
    """A frame could not be described; the message says why and what still works."""


class VisionConfigError(DescribeError):
    """``[vision.vlm]`` names no model or projector where one is needed, or a file that is not there."""


@dataclass(frozen=True)
class Description:
    """What the vision-language model said about one moment.

    Attributes:
        text: The description, cleaned and bounded (plain sentences).
        t: Capture time of the newest frame described, monotonic s.
        frames: Frames sent.
        took_ms: Wall time of the describe call (image encode + generation), ms.
        image_tokens: Image tokens the engine reported (0 where it does not say).
        prompt_tokens: Prompt tokens evaluated, image tokens included.
        trigger: Why it was made: ``asked`` (the ``describe_scene`` skill), ``arrived``,
            ``scene changed``, ``first look``.
    """

    text: str
    t: float
    frames: int
    took_ms: float
    image_tokens: int = 0
    prompt_tokens: int = 0
    trigger: str = "asked"

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict (events, the console, the skill's result)."""
        return {
            "text": self.text,
            "frames": self.frames,
            "took_ms": round(self.took_ms, 1),
            "image_tokens": self.image_tokens,
            "trigger": self.trigger,
        }


def frame_jpeg(frame: np.ndarray, max_side: int, quality: int = 90) -> bytes:
    """JPEG bytes of a BGR frame shrunk so its longer side is at most ``max_side`` px.

    Args:
        frame: ``uint8`` BGR image, shape ``(h, w, 3)`` (or ``(h, w)`` grey).
        max_side: Longest side sent, px (a frame already smaller is not enlarged).
        quality: JPEG quality, 1..100.

    Raises:
        DescribeError: the frame is empty or cannot be encoded.
    """
    if frame is None or frame.size == 0 or frame.ndim not in (2, 3):
        raise DescribeError("the camera frame is empty")
    h, w = frame.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale < 1.0:
        frame = cv2.resize(
            frame, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA
        )
    ok, buf = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise DescribeError("the camera frame could not be JPEG-encoded")
    return buf.tobytes()


_MARKUP = re.compile(r"<\|?[a-z_\"]+\|?>|<[a-z_/]+\|>")
_THOUGHT = re.compile(r"<\|channel>.*?<channel\|>|<think>.*?</think>", re.S)
_TOOL_CALL = re.compile(r"<\|tool_call>.*?(<tool_call\|>|$)", re.S)


def clean(text: str) -> str:
    """Plain sentences from a model's answer: thinking, tool-call and template markup removed.

    Whitespace is collapsed to single spaces; list bullets and headings become plain text.
    """
    text = _THOUGHT.sub(" ", text)
    text = _TOOL_CALL.sub(" ", text)
    text = _MARKUP.sub(" ", text)
    text = re.sub(r"(^|\n)\s*(?:[-*•]|\d+[.)]|#+)\s*", r"\1", text)
    text = " ".join(text.split())
    if len(text) > 1 and text[0] in "\"'“" and text[-1] in "\"'”" and text.count(text[0]) <= 2:
        text = text[1:-1].strip()  # a description wrapped in quotes
    return text


def bound(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """Cut ``text`` to at most ``max_tokens`` tokens, at a sentence end where one fits, else a word.

    Args:
        text: Cleaned text.
        max_tokens: Budget, tokens of the chat model's vocabulary.
        count: Token counter (``ChatEngine.count_tokens``).

    Returns:
        ``text`` itself when it fits; otherwise the longest whole-sentence prefix that fits, or
        the longest word prefix followed by ``…``.
    """
    if not text or count(text) <= max_tokens:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    kept = ""
    for s in sentences:
        candidate = f"{kept} {s}".strip()
        if count(candidate) > max_tokens:
            break
        kept = candidate
    if kept:
        return kept
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the longest word prefix that fits with its ellipsis
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + "…" if lo else ""


class VlmDescriber:
    """Describe frames with a chat engine that takes images.

    Args:
        engine: The engine (``engine.vision`` must be True).
        image_size: Longest side of a frame sent, px (the projector's native input).
        prompt: The question asked about the frames.
        max_tokens: Longest answer generated, tokens.
        context_tokens: Longest description kept for the chat model's context, tokens of
            ``count`` (the chat model's vocabulary).
        count: Token counter for ``context_tokens`` (default: the describing engine's).
        render: Builds the prompt text for ``(question with markers)``; default: the engine's
            template with one user message. The chat model's own vision passes the conversation's
            renderer so the system prompt and history already in the KV cache are reused.
        owns_engine: :meth:`close` closes the engine (a separate VLM, not the chat model).
        name: Shown in messages (``chat model``, ``llama-server VLM``, ``remote VLM``).

    Raises:
        DescribeError: the engine cannot take images.
    """

    def __init__(
        self,
        engine: ChatEngine,
        image_size: int = 512,
        prompt: str = DEFAULT_VLM_PROMPT,
        max_tokens: int = 48,
        context_tokens: int = 80,
        count: Callable[[str], int] | None = None,
        render: Callable[[str], str] | None = None,
        owns_engine: bool = False,
        name: str = "vision model",
    ) -> None:
        if not getattr(engine, "vision", False):
            raise DescribeError(f"the {name} cannot take images (no vision projector loaded)")
        self.engine = engine
        self.image_size = image_size
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.context_tokens = context_tokens
        self.count = count or engine.count_tokens
        self.render = render
        self.owns_engine = owns_engine
        self.name = name

    def request(self, frames: Sequence[np.ndarray]) -> Decoding:
        """The round that describes ``frames`` (oldest first): one marker and one JPEG each.

        Raises:
            DescribeError: no frame, or a frame that cannot be encoded.
            LLMError: the template rejected the message.
        """
        if not frames:
            raise DescribeError("no camera frame to describe")
        images = tuple(frame_jpeg(f, self.image_size) for f in frames)
        question = MEDIA_MARKER * len(images) + "\n" + self.prompt
        message = {"role": "user", "content": question}
        prompt = None
        if self.render is not None:
            try:
                prompt = self.render(question)
            except LLMError:  # e.g. mid-turn, where the template wants a tool response next
                prompt = None
        if prompt is None:
            prompt = self.engine.render([message])
        return Decoding(
            prompt,
            messages=(message,),
            images=images,
            max_tokens=self.max_tokens,
            temperature=0.0,
            template_vars={"enable_thinking": False},
        )

    def describe(
        self, frames: Sequence[np.ndarray], t: float, trigger: str = "asked", stop: StopSignal | None = None
    ) -> Description | None:
        """Describe ``frames`` (oldest first; ``t`` = capture time of the newest, monotonic s).

        Returns:
            The description, or None when ``stop`` ended the round first (preempted by a turn).

        Raises:
            DescribeError: the frames cannot be encoded, the engine failed, or the answer was empty.
        """
        request = self.request(frames)
        t0 = time.perf_counter()
        try:
            gen = self.engine.complete(request, stop)
        except LLMError as e:
            raise DescribeError(f"the {self.name} failed: {e}") from None
        took_ms = (time.perf_counter() - t0) * 1000.0
        if gen.cancelled:
            return None
        text = clean(gen.text)
        if gen.finish_reason == "length":  # cut off by max_tokens: keep the whole sentences
            whole = re.match(r"^(.*[.!?])\s", text + " ", re.S)
            text = whole.group(1) if whole else text
        text = bound(text, self.context_tokens, self.count)
        if not text:
            raise DescribeError(f"the {self.name} gave no description")
        return Description(
            text,
            t,
            len(frames),
            took_ms,
            int(gen.extra.get("image_tokens", 0)),
            gen.prompt_tokens,
            trigger,
        )

    def close(self) -> None:
        """Close a separate vision engine (the chat model is closed by its owner)."""
        if self.owns_engine:
            self.engine.close()


DYNAMIC_FRAME_SIDE = {
    "gemma4v": 576,
    "qwen2vl_merger": 512,
    "qwen2.5vl_merger": 512,
    "qwen3vl_merger": 512,
    "pixtral": 512,
}
"""Longest frame side sent to a dynamic-resolution projector, px. Its ``clip.vision.image_size`` is
a nominal size (224 for Gemma 4), not its input: llama.cpp resizes a frame to a grid of cells (48
px for gemma4v, 32 for Qwen-VL) within a token range (``tools/mtmd/clip.cpp``, 70..1120 tokens for
gemma4v), so a 224 px frame would be blown up to the 576x336 grid of the fewest tokens. 576 px
(gemma4v: 576x336 = 84 tokens for a 16:9 frame) and 512 px (Qwen-VL: 512x288 = 144 tokens) send
that grid's detail at the smallest token count that keeps it."""


def frame_side(projector_type: str, image_size: int, preproc_image_size: int = 0) -> int:
    """Longest frame side to send with ``[vision.vlm] image_size = 0``, px.

    Tiling projectors (``preproc_image_size`` set, SmolVLM's idefics3): that size, so a frame is
    one tile plus the overview; dynamic-resolution ones: :data:`DYNAMIC_FRAME_SIDE`; the rest:
    their fixed input ``image_size``.
    """
    if preproc_image_size:
        return preproc_image_size
    return DYNAMIC_FRAME_SIDE.get(projector_type, image_size)


def native_image_size(mmproj: Path | None, fallback: int = 512) -> int:
    """The projector's native frame side, px (:func:`frame_side` of its header).

    Args:
        mmproj: The projector GGUF, or None (a remote model: ``fallback``).
        fallback: Used without a file or without the keys, px.

    Raises:
        DescribeError: the file is not a readable GGUF.
    """
    if mmproj is None:
        return fallback
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(mmproj))
    except (OSError, ValueError) as e:
        raise DescribeError(f"{mmproj}: not a readable GGUF projector ({e})") from None

    def value(key: str) -> object:
        field = reader.fields.get(key)
        return field.contents() if field is not None else None

    kind = str(value("clip.vision.projector_type") or value("clip.projector_type") or "")
    side = frame_side(
        kind, int(value("clip.vision.image_size") or 0), int(value("clip.vision.preproc_image_size") or 0)
    )
    return side or fallback
