"""Vision-language describer: a multimodal GGUF model through llama-cpp-python.

Plugs into the same :class:`~hardware.scene.Describer` interface as the OpenCV describer.
The model sees the frame as an OpenAI-style chat message whose content holds an
``image_url`` part with a ``data:image/jpeg;base64,...`` URI (the frame downscaled so its
longer side is at most ``max_side`` px) and a text part with the prompt; llama-cpp-python's
multimodal chat handlers (``MTMDChatHandler`` for current models such as Gemma 3/4, Qwen2.5-VL,
SmolVLM; ``Llava15ChatHandler`` for LLaVA-1.5 style ones) read the projector from the
``mmproj`` GGUF file and embed the image. The model's answer becomes ``Scene.text`` and the
summary; faces, positions, brightness and motion still come from the base OpenCV describer
(``look_at`` needs boxes, which a VLM does not give).

The model is loaded on first use (seconds to minutes); one describe call runs one generation
(hundreds of ms to seconds on a Jetson), so keep ``rate_hz`` low with this describer.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from hardware.scene import DescriberError, OpenCVDescriber, Scene

log = logging.getLogger(__name__)

HANDLERS = {"mtmd": "MTMDChatHandler", "llava15": "Llava15ChatHandler"}


def image_data_uri(frame: np.ndarray, max_side: int = 512, quality: int = 85) -> str:
    """JPEG-encode a BGR frame (shrunk so its longer side ≤ ``max_side`` px) as a ``data:`` URI.

    Raises:
        DescriberError: the frame cannot be encoded.

    """
    h, w = frame.shape[:2]
    s = min(1.0, max_side / max(h, w))
    img = (
        cv2.resize(frame, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)
        if s < 1
        else frame
    )
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise DescriberError("could not JPEG-encode the frame")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


class VLMDescriber:
    """Describe frames with a multimodal llama.cpp model.

    Args:
        model_path: The language model GGUF.
        mmproj_path: The vision projector GGUF (``mmproj-*.gguf``).
        handler: ``"mtmd"`` or ``"llava15"``.
        prompt: What to ask about each frame.
        max_tokens: Longest answer, tokens.
        base: Describer for faces/people/brightness/motion (default: a new OpenCVDescriber).
        max_side: Frame size sent to the model, px (longer side).
        n_ctx: Context length, tokens (the image alone takes hundreds).
        n_gpu_layers: Layers offloaded to the GPU (-1 = all).
        llama_factory: Builds the model (tests and custom setups); default llama_cpp.Llama.

    """

    name = "vlm"

    def __init__(
        self,
        model_path: Path | str | None,
        mmproj_path: Path | str | None,
        *,
        handler: str = "mtmd",
        prompt: str = "Describe what you see in one short sentence.",
        max_tokens: int = 64,
        base: OpenCVDescriber | None = None,
        max_side: int = 512,
        n_ctx: int = 4096,
        n_gpu_layers: int = -1,
        llama_factory: Callable[..., Any] | None = None,
    ) -> None:
        if handler not in HANDLERS:
            raise DescriberError(f"vision.vlm_handler must be one of {', '.join(HANDLERS)}, got {handler!r}")
        self.model_path = Path(model_path) if model_path else None
        self.mmproj_path = Path(mmproj_path) if mmproj_path else None
        self.handler = handler
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.base = base or OpenCVDescriber()
        self.max_side = max_side
        self.n_ctx = n_ctx
        self.n_gpu_layers = n_gpu_layers
        self._factory = llama_factory
        self._llm: Any = None

    def build_messages(self, frame: np.ndarray) -> list[dict[str, Any]]:
        """Build the chat messages sent for one frame.

        One user turn with an ``image_url`` part
        (JPEG ``data:`` URI) followed by the prompt as a ``text`` part.
        """
        return [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": image_data_uri(frame, self.max_side)}},
                    {"type": "text", "text": self.prompt},
                ],
            }
        ]

    def request(self, frame: np.ndarray) -> dict[str, Any]:
        """Keyword arguments for ``Llama.create_chat_completion`` for one frame."""
        return {"messages": self.build_messages(frame), "max_tokens": self.max_tokens, "temperature": 0.1}

    def _load(self) -> Any:
        for what, p in (("vision.vlm_model", self.model_path), ("vision.vlm_mmproj", self.mmproj_path)):
            if p is None:
                raise DescriberError(f"the vlm describer needs {what} (a GGUF file)")
            if not p.is_file():
                raise DescriberError(f"{what} file {p} does not exist")
        if self._factory is not None:
            return self._factory(self.model_path, self.mmproj_path)
        try:
            from llama_cpp import Llama
            from llama_cpp import llama_chat_format as formats
        except ImportError as e:
            raise DescriberError(f"the vlm describer needs llama-cpp-python ({e})") from None
        chat_handler = getattr(formats, HANDLERS[self.handler])(
            clip_model_path=str(self.mmproj_path), verbose=False
        )
        return Llama(
            model_path=str(self.model_path),
            chat_handler=chat_handler,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            verbose=False,
        )

    def describe(self, frame: np.ndarray, t: float = 0.0) -> Scene:
        """Describe one BGR frame: OpenCV facts plus the model's sentence as ``text`` and ``summary``.

        Raises:
            DescriberError: model files missing, llama-cpp-python missing, or generation failed.

        """
        scene = self.base.describe(frame, t)
        if self._llm is None:
            self._llm = self._load()
        try:
            out = self._llm.create_chat_completion(**self.request(frame))
            text = str(out["choices"][0]["message"]["content"] or "").strip()
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as e:
            raise DescriberError(f"vision model failed: {e}") from None
        summary = f"{text} ({scene.summary})" if text else scene.summary
        return dataclasses.replace(scene, text=text, summary=summary, describer=self.name)
