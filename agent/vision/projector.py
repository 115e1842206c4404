"""A vision-only copy of a projector that also holds an audio encoder (Gemma 4's mmproj).

llama.cpp's libmtmd loads every encoder a projector file holds (``tools/mtmd/clip.cpp``:
``clip_init`` builds a vision and an audio context when ``clip.has_vision_encoder`` and
``clip.has_audio_encoder`` are both set). Gemma 4 E4B's published mmproj carries both; the robot
hears through its own ASR, so the audio encoder is weight memory for nothing: about 0.58 GiB
of weights plus a ~0.1 GiB compute buffer on an 8 GB Orin Nano (``docs/facts.md``, "Vision
memory"). :func:`vision_only` writes, once, a copy without the audio tensors (``a.*`` and
``mm.a.*``, ``clip-impl.h``'s ``TN_*`` audio names) and keys (``clip.audio.*``), with
``clip.has_audio_encoder = false``; the vision tensors and keys are copied byte for byte.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

AUDIO_TENSOR_PREFIXES = ("a.", "mm.a.")
"""Tensor names of libmtmd's audio encoders and audio projectors (``clip-impl.h``)."""


def cache_dir() -> Path:
    """Where vision-only copies go: ``$XDG_CACHE_HOME/bolt-agent/projectors`` (``~/.cache`` by default)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "projectors"


def has_audio(path: Path) -> bool:
    """Whether a projector GGUF holds an audio encoder (``clip.has_audio_encoder``).

    Raises:
        OSError, ValueError: the file cannot be read as GGUF.
    """
    import gguf

    field = gguf.GGUFReader(path).fields.get("clip.has_audio_encoder")
    return bool(field is not None and field.contents())


def _is_audio_key(key: str) -> bool:
    return key.startswith("clip.audio.")


def vision_only(path: Path, into: Path | None = None) -> tuple[Path, int]:
    """The projector itself when it has no audio encoder, else a vision-only copy (written once).

    Args:
        path: The projector GGUF.
        into: Folder for the copy (default :func:`cache_dir`); the copy's name carries a hash
            of the source's path, size and modification time, so a new download gets a new copy
            (and the copies of earlier downloads of that name are removed).

    Returns:
        ``(path to load, bytes of audio weights left out)``.

    Raises:
        OSError: the copy cannot be written (the folder is read-only or the disk is full).
        ValueError: the file cannot be read as GGUF.
    """
    import gguf

    path = Path(path)
    reader = gguf.GGUFReader(path)
    audio = reader.fields.get("clip.has_audio_encoder")
    if audio is None or not audio.contents():
        return path, 0
    dropped = sum(int(t.n_bytes) for t in reader.tensors if t.name.startswith(AUDIO_TENSOR_PREFIXES))
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|v1".encode()).hexdigest()[:16]
    folder = into or cache_dir()
    target = folder / f"{path.stem}-vision-only-{key}.gguf"
    if target.is_file():
        return target, dropped
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=folder, suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        w = gguf.GGUFWriter(tmp, str(reader.fields["general.architecture"].contents()))
        for field in reader.fields.values():
            name = field.name
            if name == "general.architecture" or name.startswith("GGUF.") or _is_audio_key(name):
                continue
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            value = False if name == "clip.has_audio_encoder" else field.contents()
            w.add_key_value(name, value, vtype, sub_type=sub)
        kept = [t for t in reader.tensors if not t.name.startswith(AUDIO_TENSOR_PREFIXES)]
        for t in kept:
            w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for t in kept:
            w.write_tensor_data(t.data)
        w.close()
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    for old in folder.glob(f"{path.stem}-vision-only-*.gguf"):  # copies of an earlier download
        if old != target:
            old.unlink(missing_ok=True)
    log.info("wrote a vision-only projector %s (%.0f MiB of audio encoder left out)", target, dropped / 2**20)
    return target, dropped
