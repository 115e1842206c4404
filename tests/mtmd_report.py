"""What libmtmd (llama.cpp's multimodal library) itself reports for a projector, captured in a child process.

:func:`measure_mtmd` loads a text model (vocabulary and hyperparameters only) and a projector
with ``mtmd_init_from_file`` from llama-cpp-python, with file descriptor 2 pointed at a file, so
llama.cpp's own log lines are kept: ``model size: X MiB`` (every tensor of the projector file)
and one ``compute buffer size = X MiB`` per encoder it reserves (vision first, then audio). Then
it tokenizes the media marker with frames of given sizes and returns each frame's chunks (type,
``n_tokens``): the image tokens libmtmd puts in the language model's context. A child process
keeps the C library's log handler and memory out of the test process, as
``tests/llama_buffers.py`` does for the language model.

:func:`sparse_projector` writes a projector whose header is exact and whose tensor data are a
hole (a sparse file), for full-size shapes that libmtmd loads without any real weights.
:func:`with_audio_encoder` adds a small random-weight Gemma 4 audio encoder to a vision
projector (a combined file like Gemma 4 E4B's published mmproj), and :func:`agent_copy` is what
the agent hands llama.cpp for a projector: its vision-only copy
(:func:`agent.vision.projector.vision_only`), written once beside the test models.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gemma4_model import CACHE, _atomic

_CHILD = r"""
import ctypes, json, os, sys
args = json.loads(sys.argv[1])
fd = os.open(args["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.dup2(fd, 2)
import llama_cpp
import llama_cpp.mtmd_cpp as m
llama = llama_cpp.Llama(model_path=args["model"], vocab_only=True, verbose=True) if args["model"] else None
p = m.mtmd_context_params_default()
p.use_gpu = False
p.n_threads = 1
p.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if args["flash_attn"]
                     else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
ctx = m.mtmd_init_from_file(args["mmproj"].encode(), llama.model if llama else None, p)
if not ctx:
    sys.exit(3)
frames = []
marker = m.mtmd_default_marker()
for w, h in args["images"]:
    data = (ctypes.c_uint8 * (w * h * 3))()
    bmp = m.mtmd_bitmap_init(w, h, data)
    chunks = m.mtmd_input_chunks_init()
    text = m.mtmd_input_text()
    text.text, text.text_len, text.add_special, text.parse_special = marker, len(marker), False, True
    bitmaps = (m.mtmd_bitmap_p_ctypes * 1)(bmp)
    if m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1) != 0:
        sys.exit(4)
    frames.append([(m.mtmd_input_chunk_get_type(m.mtmd_input_chunks_get(chunks, i)),
                    m.mtmd_input_chunk_get_n_tokens(m.mtmd_input_chunks_get(chunks, i)))
                   for i in range(m.mtmd_input_chunks_size(chunks))])
    m.mtmd_input_chunks_free(chunks)
    m.mtmd_bitmap_free(bmp)
m.mtmd_free(ctx)
print(json.dumps(frames))
"""
_MODEL_SIZE = re.compile(r"model size:\s+([\d.]+) MiB")
_COMPUTE = re.compile(r"reserve_compute_meta:\s+\S+ compute buffer size =\s+([\d.]+) MiB")
IMAGE_CHUNK = 1  # MTMD_INPUT_CHUNK_TYPE_IMAGE


@dataclass
class MtmdReport:
    """libmtmd's figures for one projector (MiB, tokens).

    Attributes:
        model_size: ``model size`` it logs: every tensor of the file, MiB.
        compute: ``compute buffer size`` per reservation, in order (vision, then audio), MiB.
        frames: Per frame, its chunks as ``(type, n_tokens)`` (type 0 text, 1 image).
        log: The whole log.
    """

    model_size: float = 0.0
    compute: list[float] = field(default_factory=list)
    frames: list[list[tuple[int, int]]] = field(default_factory=list)
    log: str = ""

    def image_tokens(self, i: int) -> int:
        """Image tokens of frame ``i`` (every image chunk)."""
        return sum(n for kind, n in self.frames[i] if kind == IMAGE_CHUNK)

    def text_tokens(self, i: int) -> int:
        """Marker and separator tokens of frame ``i`` (every text chunk)."""
        return sum(n for kind, n in self.frames[i] if kind != IMAGE_CHUNK)


def measure_mtmd(
    model: Path | None, mmproj: Path, images: Sequence[tuple[int, int]] = (), flash_attn: bool = False
) -> MtmdReport:
    """Load ``mmproj`` for ``model`` in a child process (CPU) and parse libmtmd's report.

    Args:
        model: The text model GGUF (only its header and vocabulary are loaded); None loads the
            projector alone (libmtmd then skips the width check; no ``images`` can be tokenized).
        mmproj: The projector GGUF.
        images: Frame sizes ``(width, height)`` px to tokenize (blank frames).
        flash_attn: Flash attention in the encoders.

    Raises:
        RuntimeError: the child failed; the message quotes the log's end.
    """
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "mtmd.log"
        args = {"model": str(model) if model else "", "mmproj": str(mmproj), "log": str(log),
                "flash_attn": flash_attn, "images": [list(i) for i in images]}  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True, timeout=600
        )
        text = log.read_text(errors="replace") if log.exists() else ""
    if proc.returncode != 0:
        raise RuntimeError(f"libmtmd failed ({proc.returncode}): {text[-3000:]}{proc.stderr[-2000:]}")
    m = _MODEL_SIZE.search(text)
    return MtmdReport(
        model_size=float(m.group(1)) if m else 0.0,
        compute=[float(x) for x in _COMPUTE.findall(text)],
        frames=[[tuple(c) for c in f] for f in json.loads(proc.stdout.strip().splitlines()[-1])],
        log=text,
    )


def sparse_projector(name: str, metadata: dict[str, object], tensors: Sequence) -> Path:
    """A header-exact, data-free projector GGUF (cached under ``~/.cache/bolt-agent/test-models``).

    Args:
        name: File name stem.
        metadata: ``clip.*`` keys (bool, str or int values; ``general.architecture`` is ``clip``).
        tensors: :class:`agent.memplan.shape.TensorInfo` items (ggml order shapes).

    Returns:
        The path (apparent size = the real file's; a few KB on disk).
    """
    blob = json.dumps(
        [sorted((k, str(v)) for k, v in metadata.items()), [(t.name, t.ggml_type, t.shape) for t in tensors]]
    )
    target = CACHE / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}.gguf"
    if target.exists():
        return target

    def write(tmp: Path) -> None:
        from gguf import GGMLQuantizationType, GGUFWriter

        w = GGUFWriter(tmp, "clip")
        for key, value in metadata.items():
            if key == "general.architecture":
                continue
            if isinstance(value, bool):
                w.add_bool(key, value)
            elif isinstance(value, str):
                w.add_string(key, value)
            else:
                w.add_uint32(key, int(value))
        w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-6)
        w.add_array("clip.vision.image_mean", [0.0, 0.0, 0.0])
        w.add_array("clip.vision.image_std", [1.0, 1.0, 1.0])
        w.add_bool("clip.use_gelu", True)
        for t in tensors:
            w.add_tensor_info(t.name, tuple(reversed(t.shape)), np.dtype(np.float32), t.nbytes,
                              raw_dtype=GGMLQuantizationType[t.ggml_type])  # fmt: skip
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        fout = w.fout[0]
        fout.flush()
        start = w.ggml_pad(fout.tell(), w.data_alignment)
        fout.truncate(start + sum(w.ggml_pad(t.nbytes, w.data_alignment) for t in tensors))  # a hole
        w.close()

    return _atomic(target, write)


def agent_copy(mmproj: Path) -> tuple[Path, int]:
    """The projector the agent loads for ``mmproj``: ``vision_only`` into the test-model cache.

    Returns:
        ``(path, audio bytes left out)``: ``mmproj`` itself and 0 when it has no audio encoder.
    """
    from agent.vision.projector import vision_only

    return vision_only(mmproj, into=CACHE / "vision-only")


AUDIO_TEST_SHAPE = {"a_width": 64, "a_layers": 1, "a_ff": 128, "a_out": 64}
"""The small ``gemma4a`` audio encoder :func:`with_audio_encoder` adds (E4B's: 1024 wide, 12 blocks)."""


def with_audio_encoder(mmproj: Path, seed: int = 0) -> Path:
    """``mmproj`` with a small random-weight ``gemma4a`` audio encoder added (cached).

    The vision keys and tensors are the source's, byte for byte and in its order; the audio keys
    (``clip.has_audio_encoder``, ``clip.audio.*``) and tensors (``a.*``, ``mm.a.*``, the layout of
    :func:`agent.memplan.vlm_shapes.gemma4_mmproj_tensors` at :data:`AUDIO_TEST_SHAPE`) come first,
    so a copy that keeps the vision part must pick it out, not cut the file's end.

    Args:
        mmproj: A vision projector (``clip.vision.projection_dim`` sets the audio projection's width).
        seed: Audio weight RNG seed.
    """
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

    from agent.memplan.vlm_shapes import gemma4_mmproj_tensors

    mmproj = Path(mmproj)
    digest = hashlib.sha256(f"{mmproj.resolve()}|{mmproj.stat().st_size}|{seed}|v1".encode()).hexdigest()[:16]
    target = CACHE / f"{mmproj.stem}-with-audio-{digest}.gguf"
    if target.exists():
        return target
    reader = GGUFReader(mmproj)
    dim = int(reader.fields["clip.vision.projection_dim"].contents())
    audio = [t for t in gemma4_mmproj_tensors(dim, **AUDIO_TEST_SHAPE) if t.name.startswith(("a.", "mm.a."))]

    def write(tmp: Path) -> None:
        rng = np.random.default_rng(seed)
        w = GGUFWriter(tmp, "clip")
        w.add_bool("clip.has_audio_encoder", True)
        w.add_string("clip.audio.projector_type", "gemma4a")
        sizes = {"embedding_length": 64, "feed_forward_length": 128, "block_count": 1,
                 "attention.head_count": 4, "projection_dim": dim, "num_mel_bins": 128}  # fmt: skip
        for key, value in sizes.items():
            w.add_uint32(f"clip.audio.{key}", value)
        w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-6)
        for f in reader.fields.values():
            if f.name == "general.architecture" or f.name.startswith("GGUF."):
                continue
            vtype = f.types[0]
            sub = f.types[-1] if vtype == GGUFValueType.ARRAY else None
            w.add_key_value(f.name, f.contents(), vtype, sub_type=sub)
        for t in audio:
            dtype = np.float16 if t.ggml_type == "F16" else np.float32
            data = (0.02 * rng.standard_normal(tuple(reversed(t.shape)), dtype=np.float32)).astype(dtype)
            w.add_tensor(t.name, data, raw_dtype=GGMLQuantizationType[t.ggml_type])
        for t in reader.tensors:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    return _atomic(target, write)
