"""Images in a round: the marker that places them, the checks every engine makes, the projector file.

A round with images (:attr:`~agent.engines.request.Decoding.images`) carries one
:data:`~agent.engines.request.MEDIA_MARKER` in its prompt (and in its messages' contents) per
image, in order. Each engine puts the images where the markers are: the embedded one through
libmtmd (:mod:`agent.engines.embedded.vision`), the server engines as llama-server's
``multimodal_data`` or OpenAI ``image_url`` parts (:mod:`agent.engines.remote.body`).

The projector (``mmproj`` GGUF: vision encoder + projection into the text model's embeddings)
is checked here before llama.cpp sees it (:func:`check_projector`): libmtmd loads a truncated
file without complaint (the missing tensor bytes read as garbage; measured with
llama-cpp-python 0.3.36), and its own errors go to its log, not to the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.engines.base import LLMError
from agent.engines.request import MEDIA_MARKER, Decoding


@dataclass(frozen=True)
class ProjectorInfo:
    """What a projector file says about itself.

    Attributes:
        path: The file.
        projector_type: ``clip.vision.projector_type`` (or ``clip.projector_type``), e.g.
            ``gemma4v``, ``idefics3``, ``qwen3vl_merger``.
        projection_dim: Width of the embeddings it produces (the text model's ``n_embd``).
        image_size: ``clip.vision.image_size``, px.
        has_audio: The file also holds an audio encoder (Gemma 4's combined mmproj).
        nbytes: File size, bytes.
    """

    path: Path
    projector_type: str
    projection_dim: int
    image_size: int
    has_audio: bool
    nbytes: int


def check_projector(path: Path, n_embd_text: int | None = None) -> ProjectorInfo:
    """Check that ``path`` is a whole, vision-capable projector for a text model of ``n_embd_text``.

    Reads the GGUF header and tensor table (``gguf.GGUFReader``, memory-mapped: well under a
    second for a 1 GB file); no weights are loaded.

    Args:
        path: The ``mmproj`` GGUF.
        n_embd_text: The text model's embedding width, checked against the projection's output
            (None: not checked).

    Returns:
        What the file says about itself.

    Raises:
        LLMError: the file is missing, unreadable, truncated, not a projector, has no vision
            encoder, or projects to another width; the message names the file.
    """
    import gguf

    path = Path(path)
    if not path.is_file():
        raise LLMError(f"vision projector {path} not found (the mmproj GGUF of the vision model)")
    first = _first_string_field(path)
    if first is not None and first[0] == "general.architecture" and first[1] != "clip":
        raise _not_a_projector(path, first[1])  # a whole model: no need to parse its vocabulary
    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # the reader raises ValueError, struct.error, IndexError... on bad bytes
        raise LLMError(
            f"vision projector {path} is not a readable GGUF (truncated or damaged?): {e}"
        ) from None
    size = path.stat().st_size
    end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=0)
    if end > size:
        raise LLMError(
            f"vision projector {path} is truncated: its tensors need {end} bytes, the file has {size}"
        )

    def field(key: str) -> Any:
        f = reader.fields.get(key)
        return f.contents() if f is not None else None

    arch = field("general.architecture")
    if arch != "clip":
        raise _not_a_projector(path, arch)
    if not field("clip.has_vision_encoder"):
        raise LLMError(f"vision projector {path} has no vision encoder (an audio-only mmproj?)")
    dim = int(field("clip.vision.projection_dim") or 0)
    if n_embd_text is not None and dim and dim != n_embd_text:
        raise LLMError(
            f"vision projector {path} projects to {dim}-wide embeddings but the chat model is "
            f"{n_embd_text} wide: it belongs to another model"
        )
    return ProjectorInfo(
        path=path,
        projector_type=str(field("clip.vision.projector_type") or field("clip.projector_type") or ""),
        projection_dim=dim,
        image_size=int(field("clip.vision.image_size") or 0),
        has_audio=bool(field("clip.has_audio_encoder")),
        nbytes=size,
    )


def _not_a_projector(path: Path, arch: object) -> LLMError:
    return LLMError(
        f"{path} is not a vision projector (general.architecture = {arch!r}, expected 'clip'): "
        "point the projector setting at the model's mmproj GGUF, not at the model itself"
    )


def _first_string_field(path: Path) -> tuple[str, str] | None:
    """The first key/value of a GGUF when it is a string (``ggml/src/gguf.cpp`` layout), else None.

    Writers put ``general.architecture`` first; reading only it spares parsing a model's
    vocabulary (``GGUFReader`` takes seconds on a 262k-token one).
    """
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(4096)
        if head[:4] != b"GGUF":
            return None
        (n,) = struct.unpack_from("<Q", head, 24)
        key = head[32 : 32 + n].decode("utf-8")
        pos = 32 + n
        (vtype,) = struct.unpack_from("<I", head, pos)
        if vtype != 8:  # GGUF_TYPE_STRING
            return None
        (m,) = struct.unpack_from("<Q", head, pos + 4)
        return key, head[pos + 12 : pos + 12 + m].decode("utf-8")
    except (OSError, struct.error, UnicodeDecodeError):
        return None


def check_images(request: Decoding, vision: bool, engine: str) -> None:
    """Refuse a round whose images this engine cannot take, or whose markers do not match them.

    Args:
        request: The round.
        vision: The engine takes images.
        engine: The engine, as the message names it (e.g. ``"the embedded engine (model.gguf)"``).

    Raises:
        LLMError: images without vision, or a count of :data:`MEDIA_MARKER` in the prompt other
            than the number of images.
    """
    if not request.images:
        return
    if not vision:
        raise LLMError(
            f"{engine} cannot take images: it was started without a vision projector (mmproj); "
            "send the round without images"
        )
    n = request.prompt.count(MEDIA_MARKER)
    if n != len(request.images):
        raise LLMError(f"the prompt has {n} image markers {MEDIA_MARKER!r} for {len(request.images)} images")


def image_mime(data: bytes) -> str:
    """MIME type of encoded image bytes by their signature (``image/jpeg`` when unknown)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:2] == b"BM":
        return "image/bmp"
    return "image/jpeg"
