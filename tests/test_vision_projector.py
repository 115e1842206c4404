"""The vision-only copy of a projector that also holds an audio encoder (``agent/vision/projector.py``).

``vision_only`` is what ``agent/vision/build.py`` hands llama.cpp for every projector. Checked
here: the copy holds exactly the source's vision tensors and keys, byte for byte (a small
random-weight Gemma 4 projector with an audio encoder added, ``tests/mtmd_report.py``), none of
the audio ones, and ``clip.has_audio_encoder`` false; it is written once; a projector without
audio is loaded as it is; a folder it cannot write to raises ``OSError``, which ``build.py`` turns
into a message. llama.cpp (libmtmd of llama-cpp-python 0.3.36, in a child process) loads the
copies: the small one with the tiny Gemma 4 text model, and that of the header-exact sparse copy
of Gemma 4 E4B's published mmproj (vision + audio, ~0.99 GB apparent) at full size, each
reporting a vision encoder and no audio encoder.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from gemma4_model import tiny_gemma4
from gguf import GGUFReader
from mtmd_report import agent_copy, measure_mtmd, sparse_projector, with_audio_encoder
from vision_models import gemma4v_projector

from agent.memplan import read_projector
from agent.memplan.vlm_shapes import GEMMA4_E4B_MMPROJ, gemma4_mmproj_metadata, gemma4_mmproj_tensors
from agent.vision.projector import AUDIO_TENSOR_PREFIXES, has_audio, vision_only

MiB = 1024**2

pytestmark = pytest.mark.timeout(300)


def _is_audio(name: str) -> bool:
    return name.startswith(AUDIO_TENSOR_PREFIXES)


def _fields(path: Path) -> dict[str, tuple[list[int], object]]:
    """Every key of a GGUF but the header's: ``{name: (value types, value)}``."""
    return {
        f.name: (list(f.types), f.contents())
        for f in GGUFReader(path).fields.values()
        if not f.name.startswith("GGUF.")
    }


@pytest.fixture(scope="module")
def vision_src() -> Path:
    """A small random-weight ``gemma4v`` projector (no audio)."""
    return gemma4v_projector()


@pytest.fixture(scope="module")
def combined(vision_src) -> Path:
    """``vision_src`` plus a small random-weight ``gemma4a`` audio encoder (its keys and tensors first)."""
    return with_audio_encoder(vision_src)


def test_the_copy_holds_exactly_the_vision_tensors_and_keys(combined, vision_src, tmp_path):
    copy, dropped = vision_only(combined, into=tmp_path)
    assert copy.parent == tmp_path and copy != combined and has_audio(combined) and not has_audio(copy)
    src, out = GGUFReader(combined), GGUFReader(copy)
    audio = [t for t in src.tensors if _is_audio(t.name)]
    assert audio and dropped == sum(int(t.n_bytes) for t in audio) == read_projector(combined).audio_bytes
    # tensors: the vision ones, in the source's order, same type, shape and bytes
    kept = [t for t in src.tensors if not _is_audio(t.name)]
    assert [t.name for t in out.tensors] == [t.name for t in kept]
    for a, b in zip(kept, out.tensors, strict=True):
        assert (a.tensor_type, list(a.shape), int(a.n_bytes)) == (
            b.tensor_type,
            list(b.shape),
            int(b.n_bytes),
        )
        assert np.asarray(a.data).tobytes() == np.asarray(b.data).tobytes(), a.name
    # ... and the same bytes as the projector the audio encoder was added to
    original = {t.name: np.asarray(t.data).tobytes() for t in GGUFReader(vision_src).tensors}
    assert {t.name: np.asarray(t.data).tobytes() for t in out.tensors} == original
    # keys: the vision ones unchanged, no clip.audio.*, has_audio_encoder false
    want = {k: v for k, v in _fields(combined).items() if not k.startswith("clip.audio.")}
    got = _fields(copy)
    assert got.pop("clip.has_audio_encoder")[1] is False and want.pop("clip.has_audio_encoder")[1] is True
    assert got == want
    assert not any(k.startswith("clip.audio.") for k in got)
    # the planner reads the copy as it plans the source: the vision encoder alone
    p, q = read_projector(combined), read_projector(copy)
    assert (q.audio_projector, q.audio_bytes, q.vision_bytes, q.file_bytes) == (
        "",
        0,
        p.vision_bytes,
        p.vision_bytes,
    )


def test_the_copy_is_written_once(combined, tmp_path):
    first, dropped = vision_only(combined, into=tmp_path)
    stamp = first.stat().st_mtime_ns
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    again = vision_only(combined, into=tmp_path)
    assert again == (first, dropped)
    assert first.stat().st_mtime_ns == stamp and hashlib.sha256(first.read_bytes()).hexdigest() == digest
    assert sorted(tmp_path.iterdir()) == [first]  # no temporary file left behind


def test_a_new_source_file_gets_a_new_copy_and_the_old_one_goes(combined, tmp_path):
    src = tmp_path / "mmproj.gguf"
    src.write_bytes(combined.read_bytes())
    first, _ = vision_only(src, into=tmp_path / "copies")
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))  # a new download
    second, _ = vision_only(src, into=tmp_path / "copies")
    assert second != first and second.is_file() and not first.exists()
    assert list((tmp_path / "copies").iterdir()) == [second]


def test_a_projector_without_audio_is_loaded_as_it_is(vision_src, tmp_path):
    assert not has_audio(vision_src)
    assert vision_only(vision_src, into=tmp_path / "copies") == (vision_src, 0)
    assert not (tmp_path / "copies").exists()


def test_a_folder_it_cannot_write_raises_oserror_and_build_says_so(combined, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    with pytest.raises(OSError):
        vision_only(combined, into=blocked)
    with pytest.raises(OSError):
        vision_only(combined, into=blocked / "below")
    if os.geteuid() != 0:  # root writes to a read-only folder anyway
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        with pytest.raises(OSError):
            vision_only(combined, into=ro)
    assert not list(tmp_path.glob("**/*.tmp"))

    from agent.vision.build import loadable_projector
    from agent.vision.describer import DescribeError

    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # the cache lies below a file: no folder there
    # Loading the whole file would cost the audio encoder's memory the plan leaves out: no VLM.
    with pytest.raises(DescribeError, match="vision-only copy could not be written"):
        loadable_projector(combined)


def test_llama_cpp_loads_the_small_copy_with_only_its_vision_encoder(combined, vision_src, gemma4_vocab):
    copy, _ = agent_copy(combined)
    model = tiny_gemma4(gemma4_vocab)
    rep = measure_mtmd(model, copy, [(512, 288)], flash_attn=True)
    ref = measure_mtmd(model, vision_src, [(512, 288)], flash_attn=True)
    print(f"small copy: {rep.model_size:.3f} MiB, compute {rep.compute}, frames {rep.frames}")
    assert "has vision encoder" in rep.log and "has audio encoder" not in rep.log
    assert (rep.model_size, rep.compute, rep.frames) == (ref.model_size, ref.compute, ref.frames)
    assert rep.image_tokens(0) == 84


def test_llama_cpp_loads_the_e4b_copy_at_full_size():
    """Gemma 4 E4B's published mmproj (sparse, header-exact): the copy is its 353 MiB vision encoder."""
    e4b = sparse_projector("mmproj-gemma4-e4b-sparse", gemma4_mmproj_metadata(), gemma4_mmproj_tensors())
    copy, dropped = agent_copy(e4b)
    assert dropped == GEMMA4_E4B_MMPROJ.audio_bytes
    src, out = GGUFReader(e4b), GGUFReader(copy)
    vision = gemma4_mmproj_tensors(audio=False)
    assert [(t.name, int(t.n_bytes)) for t in out.tensors] == [(t.name, t.nbytes) for t in vision]
    by_name = {t.name: t for t in src.tensors}
    for t in out.tensors:
        assert (t.tensor_type, list(t.shape)) == (by_name[t.name].tensor_type, list(by_name[t.name].shape))
    for name in ("v.patch_embd.weight", "v.blk.7.ffn_up.weight", "mm.input_projection.weight"):
        a, b = by_name[name], next(t for t in out.tensors if t.name == name)
        assert np.array_equal(np.asarray(a.data), np.asarray(b.data)), name
    assert _fields(copy)["clip.has_audio_encoder"][1] is False
    rep = measure_mtmd(None, copy, flash_attn=True)  # the projector alone: no text model's width check
    print(f"E4B copy: model size {rep.model_size:.2f} MiB, compute {rep.compute}")
    assert "has vision encoder" in rep.log and "has audio encoder" not in rep.log
    assert abs(rep.model_size - GEMMA4_E4B_MMPROJ.vision_bytes / MiB) < 0.01
    assert len(rep.compute) == 1
