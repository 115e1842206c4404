"""Model references: packaged defaults, local paths, and Hugging Face downloads (from a local cache)."""

import pytest

from agent.models import PACKAGED, ModelNotFoundError, resolve_model


def test_every_packaged_model_resolves():
    for name in PACKAGED:
        assert resolve_model(f"packaged:{name}").exists()


def test_unknown_packaged_name_lists_choices():
    with pytest.raises(ModelNotFoundError, match="packaged:smollm2-135m"):
        resolve_model("packaged:llama-70b", "LLM")


def test_missing_local_path_says_what(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"LLM file not found: .*bolt\.gguf") as e:
        resolve_model(str(tmp_path / "bolt.gguf"), "LLM")
    # a packaged model of the same kind (it offered the speech recognizer for an LLM)
    assert str(e.value).endswith("such as packaged:smollm2-135m")
    with pytest.raises(ModelNotFoundError) as e:
        resolve_model(str(tmp_path / "voice.onnx"), "voice")
    assert str(e.value).endswith("such as packaged:piper-joe-medium")
    # no package carries a projector: it was offered the chat model
    with pytest.raises(ModelNotFoundError) as e:
        resolve_model(str(tmp_path / "mmproj.gguf"), "vision projector")
    assert (
        str(e.value)
        == f"vision projector file not found: {tmp_path / 'mmproj.gguf'}; fix the path in the config"
    )


def test_hf_reference_resolves_from_cache_offline(tmp_path, monkeypatch):
    """The real download code path (hf_hub_download), served from a local HF cache without network."""
    from huggingface_hub import constants

    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--nvidia--Bolt-GGUF"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    snap = repo / "snapshots" / sha
    snap.mkdir(parents=True)
    (snap / "bolt-q4.gguf").write_bytes(b"GGUF" + b"\0" * 16)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    path = resolve_model("hf:nvidia/Bolt-GGUF/bolt-q4.gguf", "LLM")
    assert path.read_bytes().startswith(b"GGUF")
    with pytest.raises(ModelNotFoundError, match="not in the local Hugging Face cache"):
        resolve_model("hf:nvidia/Bolt-GGUF/other.gguf", "LLM")
    with pytest.raises(ModelNotFoundError, match="expected hf:OWNER/REPO/FILE"):
        resolve_model("hf:nvidia/only", "LLM")
