"""Images into the embedded model's context: libmtmd (llama.cpp's multimodal library) on the same model.

A :class:`Projector` is an ``mtmd_context`` made from a projector file (``mmproj`` GGUF) and
the loaded ``llama_model`` (llama-cpp-python 0.3.36 ships libmtmd and its bindings,
``llama_cpp.mtmd_cpp``). :meth:`Projector.prompt` splits a rendered prompt at its
:data:`~agent.engines.request.MEDIA_MARKER` s with ``mtmd_tokenize``: text chunks become token ids,
each image one or more image chunks (idefics3: a tile plus an overview) wrapped in the family's
own tokens (``<|image>`` ... ``<image|>`` for Gemma 4; ``tools/mtmd/mtmd.cpp``). The result,
a :class:`MediaPrompt`, lists the ids with every image position given a negative key derived
from the image's bytes, so the KV-cache prefix match of
:class:`~agent.engines.embedded.model.ChatModel` runs through an image only when the same image
sits at the same place, and never into half of one.

:meth:`Projector.decode` encodes one image chunk (the vision encoder: the expensive part) and
decodes its embeddings into the KV cache at a position (``mtmd_helper_eval_chunk_single``); it
runs on the model's decode thread, like every decode (libgomp thread teams,
:mod:`~agent.engines.embedded.decode_thread`). Some families attend to an image's tokens
non-causally (Gemma 3; Gemma 4 except E2B/E4B, ``mtmd_decode_use_non_causal``): those images
must fit one micro-batch.

libmtmd logs through its own callback: it goes to this module's logger (info lines at DEBUG),
and the last error lines go into the :class:`~agent.engines.base.LLMError` a failure raises.
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.engines.base import LLMError
from agent.engines.media import ProjectorInfo, check_projector
from agent.engines.request import MEDIA_MARKER

log = logging.getLogger(__name__)

_LEVELS = {
    1: logging.DEBUG,
    2: logging.DEBUG,
    3: logging.WARNING,
    4: logging.WARNING,
}  # ggml.h: 3 warn, 4 error
_errors: collections.deque[str] = collections.deque(maxlen=6)
_log_callback: Any = None  # the ctypes callback libmtmd holds: must live as long as the process


def _install_log() -> None:
    """Send libmtmd's and its helpers' log lines to :data:`log` (once per process)."""
    global _log_callback
    if _log_callback is not None:
        return
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd

    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, user_data: Any) -> None:
        line = text.decode("utf-8", "replace").rstrip()
        lvl = last[0] if level == 5 else _LEVELS.get(level, logging.DEBUG)  # 5: continuation
        last[0] = lvl
        if not line:
            return
        if lvl >= logging.WARNING:
            _errors.append(line)
        log.log(lvl, "mtmd: %s", line)

    _log_callback = callback
    mtmd.mtmd_helper_log_set(callback, ctypes.c_void_p(0))  # also sets libmtmd's own (mtmd_log_set)


def _recent_errors() -> str:
    lines = list(_errors)
    _errors.clear()
    return ("; libmtmd: " + " | ".join(lines)) if lines else ""


@dataclass
class ImageSpan:
    """One image chunk of a prompt.

    Attributes:
        start: Position of its first token in the prompt.
        n_pos: Positions it takes (= ``n_tokens`` except with M-RoPE, e.g. Qwen-VL).
        n_tokens: Embeddings it decodes into the KV cache.
        key: The negative id its positions carry in ``MediaPrompt.ids``.
        chunk: The ``mtmd_input_chunk`` (owned by the prompt's chunk list).
        non_causal: Its tokens attend to each other both ways (must fit one micro-batch).
    """

    start: int
    n_pos: int
    n_tokens: int
    key: int
    chunk: Any
    non_causal: bool


@dataclass
class MediaPrompt:
    """A prompt with images, tokenized: ids for the KV-cache match, image chunks to decode.

    Attributes:
        ids: One entry per position: token ids, an image's positions its negative ``key``.
        images: The image chunks, in order.
        chunks: The ``mtmd_input_chunks`` that own them (freed by :meth:`close`).
    """

    ids: list[int]
    images: list[ImageSpan] = field(default_factory=list)
    chunks: Any = None

    @property
    def image_tokens(self) -> int:
        """Embeddings the images take in the KV cache."""
        return sum(s.n_tokens for s in self.images)

    @property
    def n_cells(self) -> int:
        """KV-cache cells the whole prompt takes (text tokens + image embeddings)."""
        return len(self.ids) - sum(s.n_pos for s in self.images) + self.image_tokens

    def close(self) -> None:
        """Free the chunks (the spans' ``chunk`` pointers die with them)."""
        if self.chunks is not None:
            import llama_cpp.mtmd_cpp as mtmd

            mtmd.mtmd_input_chunks_free(self.chunks)
            self.chunks = None


def _key(digest: str, index: int) -> int:
    """A negative id for the ``index``-th chunk of the image with ``digest`` (never a token id)."""
    return -1 - int(hashlib.sha1(f"{digest}:{index}".encode()).hexdigest()[:7], 16)


class Projector:
    """A vision projector (``mmproj``) loaded on a llama model through libmtmd.

    Args:
        path: The projector GGUF.
        model: The loaded text model (``llama_cpp.Llama``): the projector shares its vocabulary
            (image wrapper tokens) and checks its embedding width.
        threads: CPU threads for the vision encoder.
        use_gpu: Run the encoder on the GPU (when llama.cpp has one).
        flash_attn: Flash attention in the encoder.
        info: The file's :func:`~agent.engines.media.check_projector` result, when the caller
            already checked it (None: checked here).

    Raises:
        LLMError: the file is missing, truncated or damaged, not a projector, has no vision
            encoder, or does not fit the text model (libmtmd's own error lines are quoted).
    """

    def __init__(
        self,
        path: Path,
        model: Any,
        threads: int,
        use_gpu: bool,
        flash_attn: bool,
        info: ProjectorInfo | None = None,
    ) -> None:
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        self.path = Path(path)
        self.info = info if info is not None else check_projector(self.path)
        _install_log()
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = threads
        params.print_timings = False
        params.media_marker = MEDIA_MARKER.encode()
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if flash_attn
            else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        _errors.clear()
        self.ctx = mtmd.mtmd_init_from_file(str(self.path).encode(), model.model, params)
        if not self.ctx:
            raise LLMError(f"vision projector {self.path} failed to load{_recent_errors()}")
        if not mtmd.mtmd_support_vision(self.ctx):
            self.close()
            raise LLMError(f"vision projector {self.path} takes no images (an audio-only mmproj?)")
        log.info(
            "vision projector %s loaded (%s, %.1f MB, %s)",
            self.path.name,
            self.info.projector_type,
            self.info.nbytes / 1e6,
            "GPU" if use_gpu else "CPU",
        )

    def prompt(self, text: str, images: tuple[bytes, ...], bos: int | None) -> MediaPrompt:
        """Tokenize a rendered prompt whose :data:`MEDIA_MARKER` s stand for ``images``.

        Args:
            text: The prompt (special tokens parsed), one marker per image.
            images: Encoded images (JPEG, PNG, BMP, GIF; decoded by stb_image), in marker order.
            bos: Token to put first when the prompt lacks it (None: none).

        Returns:
            The tokenized prompt; call :meth:`MediaPrompt.close` when done with it.

        Raises:
            LLMError: an image cannot be decoded, or the markers and images do not match.
        """
        import llama_cpp.mtmd_cpp as mtmd

        bitmaps = []
        try:
            digests = []
            for i, data in enumerate(images):
                buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
                bm = mtmd.mtmd_helper_bitmap_init_from_buf(self.ctx, buf, len(data), False)
                if not bm:
                    raise LLMError(
                        f"image {i + 1} of {len(images)} ({len(data)} bytes) is not a readable image"
                    )
                bitmaps.append(bm)
                digests.append(hashlib.sha1(data).hexdigest())
                mtmd.mtmd_bitmap_set_id(bm, digests[-1].encode())
            raw = text.encode("utf-8")
            inp = mtmd.mtmd_input_text()
            inp.text, inp.text_len, inp.add_special, inp.parse_special = raw, len(raw), False, True
            chunks = mtmd.mtmd_input_chunks_init()
            arr = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            rc = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(inp), arr, len(bitmaps))
        finally:
            for bm in bitmaps:  # the chunks hold their own preprocessed copies
                mtmd.mtmd_bitmap_free(bm)
        out = MediaPrompt([], [], chunks)
        if rc != 0:
            out.close()
            raise LLMError(
                f"libmtmd could not tokenize the prompt with {len(images)} images "
                f"(code {rc}){_recent_errors()}"
            )
        seen: collections.Counter[str] = collections.Counter()
        for i in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t()
                ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                out.ids += [ptr[j] for j in range(n.value)]
                continue
            digest = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode()
            n_pos = mtmd.mtmd_input_chunk_get_n_pos(chunk)
            span = ImageSpan(
                start=len(out.ids),
                n_pos=n_pos,
                n_tokens=mtmd.mtmd_input_chunk_get_n_tokens(chunk),
                key=_key(digest, seen[digest]),
                chunk=chunk,
                non_causal=bool(mtmd.mtmd_decode_use_non_causal(self.ctx, chunk)),
            )
            seen[digest] += 1
            out.images.append(span)
            out.ids += [span.key] * n_pos
        if bos is not None and (not out.ids or out.ids[0] != bos):
            out.ids.insert(0, bos)
            for span in out.images:
                span.start += 1
        return out

    def decode(self, span: ImageSpan, ctx: Any, n_past: int, n_batch: int) -> int:
        """Encode one image chunk and decode its embeddings into the KV cache after ``n_past``.

        Args:
            span: The chunk.
            ctx: The ``llama_context`` pointer.
            n_past: Position of its first token.
            n_batch: Most embeddings per decode call.

        Returns:
            The position after it.

        Raises:
            LLMError: encoding or decoding failed (libmtmd's error lines are quoted).
        """
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        new = llama_cpp.llama_pos(0)
        rc = mtmd.mtmd_helper_eval_chunk_single(
            self.ctx, ctx, span.chunk, n_past, 0, n_batch, False, ctypes.byref(new)
        )
        if rc != 0:
            raise LLMError(f"the vision projector failed on an image (code {rc}){_recent_errors()}")
        return int(new.value)

    def close(self) -> None:
        """Free the libmtmd context (idempotent)."""
        if self.ctx:
            import llama_cpp.mtmd_cpp as mtmd

            mtmd.mtmd_free(self.ctx)
            self.ctx = None


def eval_media(
    llm: Any, projector: Projector, prompt: MediaPrompt, tail: list[int], cached: int
) -> tuple[int, float]:
    """Evaluate what of a prompt with images (and ``tail`` after it) the KV cache lacks.

    Runs on the decode thread. The cache is kept up to ``cached`` positions, cut back to the
    start of an image it would end inside, and at least the last position is evaluated (its
    logits start the token loop; a prompt always ends in text). Text runs go to ``Llama.eval``,
    images to :meth:`Projector.decode`.

    Args:
        llm: The ``llama_cpp.Llama`` (its ``n_tokens``/``input_ids`` follow the cache).
        projector: The loaded projector.
        prompt: The tokenized prompt.
        tail: Tokens after it (a forced prefix).
        cached: Positions of ``prompt.ids + tail`` already in the cache.

    Returns:
        ``(KV cells evaluated, ms spent encoding and decoding images)``.

    Raises:
        LLMError: a non-causal image does not fit one micro-batch, or the projector failed.
    """
    import time

    from agent.engines.embedded import vendor

    ids = prompt.ids + tail
    n_ubatch = int(llm.context_params.n_ubatch)
    for s in prompt.images:
        if s.non_causal and s.n_tokens > n_ubatch:
            raise LLMError(
                f"an image of {s.n_tokens} tokens must be decoded in one batch with this projector: "
                f"raise [llm] n_batch to {s.n_tokens} or more (it is {n_ubatch})"
            )
    keep = min(cached, len(ids) - 1)
    for s in prompt.images:
        if s.start < keep < s.start + s.n_pos:
            keep = s.start
    llm.n_tokens = keep
    pos, evaluated, ms = keep, 0, 0.0
    for s in prompt.images:
        end = s.start + s.n_pos
        if end <= pos:
            continue  # the same image is in the cache here
        if s.start > pos:
            llm.eval(ids[pos : s.start])
            evaluated += s.start - pos
        t0 = time.perf_counter()
        vendor.eval_embeddings(
            llm, lambda ctx, n_past, s=s: projector.decode(s, ctx, n_past, llm.n_batch), s.key
        )
        ms += (time.perf_counter() - t0) * 1000.0
        evaluated += s.n_tokens
        pos = end
    if pos < len(ids):
        llm.eval(ids[pos:])
        evaluated += len(ids) - pos
    return evaluated, ms
