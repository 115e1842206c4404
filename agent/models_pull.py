"""Download the ``hf:`` models of a config ahead of time, and check model files without a network.

``bolt-agent models pull`` calls :func:`pull_model` for every ``hf:OWNER/REPO/FILE`` reference of
a config (:func:`config_model_refs`). The download is ``huggingface_hub.hf_hub_download`` into its
cache (``HF_HOME`` / ``HF_HUB_CACHE``, endpoint ``HF_ENDPOINT``): a progress bar on stderr, and a
connection cut mid-body is resumed with an HTTP ``Range`` request by the library itself. Afterwards
the file's SHA-256 is compared with the hub's: for LFS files (every GGUF) the cache names the blob
by that hash (the ``X-Linked-Etag`` of the resolve endpoint), so a mismatch is detected without a
second request; the bad blob is deleted and the error says so.

Offline (``HF_HUB_OFFLINE=1``) or with the hub unreachable, the error names the file, the URL to
fetch it from elsewhere, and where to copy it: a local path to set in the config, or the cache folder.

:func:`verify_cached` is the network-free check ``bolt-agent doctor`` uses.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

MODEL_FIELDS = ("model", "voice", "draft_model", "vlm_model")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PullError(Exception):
    """A model could not be downloaded or did not verify; the message says what to do."""


@dataclass(frozen=True)
class Pulled:
    """One downloaded model file.

    Attributes:
        key: Config field, dotted (``llm.model``).
        ref: The ``hf:`` reference.
        path: Local file in the Hugging Face cache.
        size: File size, bytes.
        sha256: Hex SHA-256 of the file.
        verified: True when the hub gave a SHA-256 and it matched; False when it gave none.
    """

    key: str
    ref: str
    path: Path
    size: int
    sha256: str
    verified: bool


def config_model_refs(cfg: Any) -> list[tuple[str, str]]:
    """Every model reference of a config.

    Args:
        cfg: A :class:`~agent.config.Config`.

    Returns:
        ``(dotted field, reference)`` pairs, e.g. ``("llm.model", "hf:nvidia/...gguf")``;
        empty references are left out.
    """
    found: list[tuple[str, str]] = []

    def walk(obj: Any, prefix: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                key = f"{prefix}.{k}" if prefix else str(k)
                if k in MODEL_FIELDS and isinstance(v, (str, Path)) and str(v):
                    found.append((key, str(v)))
                else:
                    walk(v, key)

    walk(cfg.model_dump(), "")
    return found


def split_hf(ref: str) -> tuple[str, str]:
    """Split ``hf:OWNER/REPO/PATH`` into repo id and file path.

    Args:
        ref: The reference.

    Returns:
        ``(OWNER/REPO, PATH)``.

    Raises:
        PullError: not of that form.
    """
    parts = ref.removeprefix("hf:").split("/")
    if not ref.startswith("hf:") or len(parts) < 3 or not all(parts):
        raise PullError(f"{ref!r}: expected hf:OWNER/REPO/FILE")
    return "/".join(parts[:2]), "/".join(parts[2:])


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in ``chunk``-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def offline_hint(ref: str, key: str, config: Path | None) -> str:
    """Where to get a model file by hand and where to put it on this machine.

    Args:
        ref: The ``hf:`` reference.
        key: Config field (``llm.model``).
        config: The config file, for the message (None = the default config).

    Returns:
        One paragraph naming the URL, a local path to copy the file to and set in the config,
        and the cache folder that ``run`` reads.
    """
    from huggingface_hub import constants

    repo_id, filename = split_hf(ref)
    url = f"{constants.ENDPOINT}/{repo_id}/resolve/main/{filename}"
    local = Path.home() / "models" / Path(filename).name
    section, _, field = key.rpartition(".")
    cache = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"
    where = str(config) if config else "your config (--config)"
    return (
        f"get {filename} from {url} on a machine with network access "
        f"(or `hf download {repo_id} {filename}` there), copy it to {local} and set "
        f'[{section}] {field} = "{local}" in {where}; or copy that machine\'s {cache.name} '
        f"folder into {cache}"
    )


def pull_model(ref: str, key: str = "model", config: Path | None = None) -> Pulled:
    """Download one ``hf:`` model into the Hugging Face cache and verify its SHA-256.

    Args:
        ref: ``hf:OWNER/REPO/FILE``.
        key: Config field it came from, for messages.
        config: The config file, for messages.

    Returns:
        The :class:`Pulled` file (already cached files are only re-verified).

    Raises:
        PullError: bad reference; offline or hub unreachable (the message names the file and
            where to copy it); HTTP error; SHA-256 mismatch (the bad file is deleted).
    """
    repo_id, filename = split_hf(ref)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    unreachable = None if _offline() else _unreachable()
    try:
        if unreachable:
            raise LocalEntryNotFoundError(unreachable)
        path = Path(hf_hub_download(repo_id=repo_id, filename=filename))
    except LocalEntryNotFoundError as e:
        reason = "offline (HF_HUB_OFFLINE=1)" if _offline() else f"hub unreachable: {_first_line(e)}"
        raise PullError(f"{key} {ref}: cannot download, {reason}; {offline_hint(ref, key, config)}") from None
    except (HfHubHTTPError, OSError, ValueError) as e:
        raise PullError(
            f"{key} {ref}: download failed: {_first_line(e)}; run the command again to retry"
        ) from None
    return _verify(path, key, ref, delete_bad=True)


def verify_cached(ref: str, key: str = "model") -> Pulled | None:
    """Check an ``hf:`` model already in the cache, without any network access.

    Args:
        ref: ``hf:OWNER/REPO/FILE``.
        key: Config field, for messages.

    Returns:
        The verified file, or None when it is not in the cache.

    Raises:
        PullError: bad reference, or the cached file's SHA-256 differs from its blob name
            (nothing is deleted).
    """
    repo_id, filename = split_hf(ref)
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo_id, filename)
    if not isinstance(hit, str) or not Path(hit).exists():
        return None
    return _verify(Path(hit), key, ref, delete_bad=False)


def _verify(path: Path, key: str, ref: str, *, delete_bad: bool) -> Pulled:
    blob = path.resolve()
    expected = blob.name if _SHA256.match(blob.name) else None
    digest = sha256_file(blob)
    if expected is not None and digest != expected:
        what = "deleted it" if delete_bad else "run `bolt-agent models pull` to replace it"
        if delete_bad:
            blob.unlink(missing_ok=True)
            if path.is_symlink():
                path.unlink()
        raise PullError(
            f"{key} {ref}: sha256 mismatch in {blob}: the hub says {expected}, the file has {digest}; {what}"
        )
    return Pulled(key, ref, path, blob.stat().st_size, digest, expected is not None)


def _unreachable(timeout_s: float = 3.0) -> str | None:
    """Why the hub's host cannot be reached (one TCP connect), or None.

    Fails fast where huggingface_hub would retry for ~25 s. Skipped (None) behind an HTTP proxy.
    """
    if any(
        os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")
    ):
        return None
    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout_s).close()
    except OSError as e:
        return f"{url.hostname}:{port}: {e}"
    return None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else e.__class__.__name__
