"""Download the ``hf:`` models of a config ahead of time, and check model files without a network.

``bolt-agent models pull`` calls :func:`pull_model` for every ``hf:OWNER/REPO/FILE`` reference of
a config (:func:`config_model_refs`). A file already in the cache is only verified, with no network
access (so ``pull`` succeeds offline once the files are there). A missing one is downloaded with
``huggingface_hub.hf_hub_download`` into its cache (``HF_HOME`` / ``HF_HUB_CACHE``, endpoint
``HF_ENDPOINT``): a progress bar on stderr, and a connection cut mid-body is resumed with an HTTP
``Range`` request by the library itself. Afterwards the file's SHA-256 is compared with the hub's:
for LFS files (every GGUF) the cache names the blob by that hash (the ``X-Linked-Etag`` of the
resolve endpoint), so a mismatch is detected without a second request; the bad blob is deleted
and the error says so.

Hashing a multi-GB GGUF takes a minute on a Jetson, so a verified blob gets a marker
``blobs/<sha256>.verified`` holding its size, mtime and inode; while those are unchanged the
file is not hashed again (:func:`verify_cached`, the network-free check ``bolt-agent doctor`` uses).

Offline (``HF_HUB_OFFLINE=1``) or with the hub unreachable, the error names the file, the URL to
fetch it from elsewhere, and where to put it: ``models pull --from-dir DIR`` copies a file fetched
elsewhere into the cache (:func:`import_file`), or a local path can be set in the config.

A service reads the cache of its unit's ``Environment=HF_HOME``; :func:`service_hf_home` tells
``doctor`` and ``models pull`` to use that cache when they run for the service's config.

Datasets: a Reachy Mini's recorded emotions are a Hugging Face dataset, not a model file
(:func:`config_datasets`). :func:`pull_dataset` fetches the whole snapshot with
``huggingface_hub.snapshot_download(repo_type="dataset")`` into the same cache; a snapshot
already there is only checked with ``local_files_only=True`` (huggingface_hub compares it with
the file list it stored at download, so a half-finished download is fetched again). Offline,
the error names the dataset's URL and how to use a copy fetched elsewhere
(``[robot.reachy_mini] emotions_dir``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from agent.systemd import ServiceInfo

MODEL_FIELDS = ("model", "voice", "draft_model", "mmproj", "text_model")
LOCAL_REVISION = "0" * 40
"""Snapshot name for files copied in by :func:`import_file` (no hub commit is known offline)."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
log = logging.getLogger(__name__)


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
        origin: ``downloaded``, ``cached`` (already in the cache) or ``copied`` (``--from-dir``).
        hashed: False when an earlier verification of the unchanged file was reused.
    """

    key: str
    ref: str
    path: Path
    size: int
    sha256: str
    verified: bool
    origin: str = "downloaded"
    hashed: bool = True


@dataclass(frozen=True)
class PulledDataset:
    """One dataset snapshot in the Hugging Face cache (a Reachy Mini's recorded emotions).

    Attributes:
        key: Config field, dotted (``robot.reachy_mini.emotions_repo``).
        repo: The dataset id (``pollen-robotics/reachy-mini-emotions-library``).
        path: The snapshot folder in the cache.
        files: Number of files in the snapshot.
        size: Their total size, bytes.
        moves: Names of the recorded moves that load, sorted.
        problems: One message per move file that does not load (named by its path; skipped).
        origin: ``downloaded`` or ``cached`` (already in the cache).
    """

    key: str
    repo: str
    path: Path
    files: int
    size: int
    moves: tuple[str, ...]
    problems: tuple[str, ...] = ()
    origin: str = "downloaded"


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


def config_datasets(cfg: Any) -> list[tuple[str, str]]:
    """The Hugging Face datasets a config needs: a Reachy Mini's emotions, unless a local copy is set.

    Args:
        cfg: A :class:`~agent.config.Config`.

    Returns:
        ``(dotted field, dataset id)`` pairs: ``("robot.reachy_mini.emotions_repo", repo)`` when
        ``[robot] driver = "reachy_mini"`` and ``[robot.reachy_mini] emotions_dir`` is not set;
        else empty.
    """
    from hardware.config import REACHY_MINI

    robot = cfg.robot
    if robot.driver != REACHY_MINI or robot.reachy_mini.emotions_dir is not None:
        return []
    return [("robot.reachy_mini.emotions_repo", robot.reachy_mini.emotions_repo)]


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
    url = repo_url(ref)
    local = Path.home() / "models" / Path(filename).name
    section, _, field = key.rpartition(".")
    cache = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"
    where = str(config) if config else "your config (--config)"
    cfg_arg = f" --config {config}" if config else ""
    return (
        f"get {filename} from {url} on a machine with network access "
        f"(or `hf download {repo_id} {filename}` there), copy it to {local.parent}/ and run "
        f"`bolt-agent models pull{cfg_arg} --from-dir {local.parent}` (copies it into the cache), "
        f'or set [{section}] {field} = "{local}" in {where}; or copy that machine\'s {cache.name} '
        f"folder into {cache}"
    )


def pull_model(
    ref: str, key: str = "model", config: Path | None = None, from_dir: Path | None = None
) -> Pulled:
    """Make one ``hf:`` model present in the Hugging Face cache and verify its SHA-256.

    The cache is looked at first: a cached file is verified and returned with no network access.
    Otherwise it comes from ``from_dir`` when given (:func:`import_file`, never the network), or
    is downloaded.

    Args:
        ref: ``hf:OWNER/REPO/FILE``.
        key: Config field it came from, for messages.
        config: The config file, for messages.
        from_dir: Folder holding a copy of the file fetched elsewhere (offline install).

    Returns:
        The :class:`Pulled` file.

    Raises:
        PullError: bad reference; not in ``from_dir``; offline or hub unreachable (the message
            names the file and where to copy it); HTTP error; SHA-256 mismatch (the bad file is
            deleted; a bad cached copy is deleted and downloaded again).
    """
    repo_id, filename = split_hf(ref)
    try:
        hit = verify_cached(ref, key)
    except PullError as e:
        log.warning("%s; deleting the cached copy", e)
        hit = None
        try:
            _drop_cached(repo_id, filename)  # a corrupt cached copy: fetch it again
        except OSError as err:
            raise PullError(f"{e}; cannot delete it: {err}") from None
    if hit is not None:
        return hit
    if from_dir is not None:
        return import_file(ref, _find_copy(ref, key, from_dir), key)
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


def pull_dataset(repo: str, key: str = "dataset", config: Path | None = None) -> PulledDataset:
    """Make a Hugging Face dataset (a Reachy Mini's recorded emotions) present in the cache.

    A complete snapshot already in the cache is used with no network access
    (``local_files_only=True``). Otherwise the whole snapshot is downloaded with
    ``snapshot_download(repo, repo_type="dataset")`` (files already cached are kept). Either way
    its moves are loaded as the robot loads them (:func:`hardware.reachy_mini.moves.load_moves`), so a
    file that does not load is reported here, by name, rather than at ``run``.

    Args:
        repo: Dataset id (``pollen-robotics/reachy-mini-emotions-library``).
        key: Config field it came from, for messages.
        config: The config file, for messages.

    Returns:
        The :class:`PulledDataset`; ``problems`` lists the move files that were skipped.

    Raises:
        PullError: offline or hub unreachable with no cached snapshot (the message names the
            dataset's URL and how to use a copy fetched elsewhere); no such dataset; HTTP
            error; or a snapshot with no recorded move that loads.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    path = cached_dataset(repo)
    origin = "cached"
    if path is None:
        origin = "downloaded"
        failed = f"{key} dataset {repo}: download failed"
        unreachable = None if _offline() else _unreachable()
        try:
            if unreachable:
                raise LocalEntryNotFoundError(unreachable)
            path = Path(snapshot_download(repo, repo_type="dataset"))
        except RepositoryNotFoundError:
            raise PullError(
                f"{key} dataset {repo}: no such dataset at {dataset_url(repo)}; check [robot.reachy_mini] "
                f"emotions_repo in {config or 'your config'}"
            ) from None
        except LocalEntryNotFoundError as e:
            if isinstance(e.__cause__, HfHubHTTPError):  # the hub answered, with an error
                raise PullError(
                    f"{failed}: {_first_line(e.__cause__)}; run the command again to retry"
                ) from None
            reason = "offline (HF_HUB_OFFLINE=1)" if _offline() else f"hub unreachable: {_first_line(e)}"
            raise PullError(
                f"{key} dataset {repo}: cannot download, {reason}; {dataset_hint(repo, config)}"
            ) from None
        except (HfHubHTTPError, OSError, ValueError) as e:
            raise PullError(f"{failed}: {_first_line(e)}; run the command again to retry") from None
    return _dataset_contents(path, key, repo, origin)


def cached_dataset(repo: str) -> Path | None:
    """The snapshot folder of a dataset in the cache, without any network access.

    Args:
        repo: Dataset id.

    Returns:
        The folder, or None when the dataset is not cached or its snapshot is incomplete
        (huggingface_hub checks it against the file list it stored at download).
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo, repo_type="dataset", local_files_only=True))
    except (LocalEntryNotFoundError, OSError):  # an incomplete snapshot is a LocalEntryNotFoundError too
        return None


def dataset_url(repo: str) -> str:
    """The hub page of a dataset (``HF_ENDPOINT``): ``https://huggingface.co/datasets/OWNER/NAME``."""
    from huggingface_hub import constants

    return f"{constants.ENDPOINT}/datasets/{repo}"


def dataset_hint(repo: str, config: Path | None) -> str:
    """Where to get a dataset by hand and how to point the config at the copy.

    Args:
        repo: Dataset id.
        config: The config file, for the message (None = the default config).

    Returns:
        One paragraph naming the dataset's URL, the ``hf download`` command for a machine with
        network access, the ``[robot.reachy_mini] emotions_dir`` setting, and the cache folder
        ``run`` reads.
    """
    from huggingface_hub import constants

    name = repo.rpartition("/")[2]
    local = Path.home() / name
    cache = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
    where = str(config) if config else "your config (--config)"
    return (
        f"get the dataset from {dataset_url(repo)} on a machine with network access "
        f"(`hf download {repo} --repo-type dataset --local-dir {name}` there), copy that folder to "
        f'{local} and set [robot.reachy_mini] emotions_dir = "{local}" in {where}; or copy that '
        f"machine's {cache.name} folder into {cache}"
    )


def _dataset_contents(path: Path, key: str, repo: str, origin: str) -> PulledDataset:
    from hardware.reachy_mini.moves import load_moves

    files = [p for p in path.rglob("*") if p.is_file()]
    moves, problems = load_moves(path)
    if not moves:
        raise PullError(
            f"{key} dataset {repo}: no recorded move (*.json, also under data/) loads in {path}"
            + (f": {'; '.join(problems)}" if problems else "")
        )
    size = sum(p.stat().st_size for p in files)  # stat follows the snapshot's links to the blobs
    return PulledDataset(key, repo, path, len(files), size, tuple(sorted(moves)), tuple(problems), origin)


def import_file(ref: str, src: Path, key: str = "model") -> Pulled:
    """Copy a model file fetched elsewhere into the Hugging Face cache, where ``run`` finds it offline.

    The cache layout is huggingface_hub's: the blob named by the file's SHA-256, a snapshot
    symlink, and ``refs/main`` (kept when present, else :data:`LOCAL_REVISION`). Online, a later
    download of the same content reuses the blob. The hub's checksum cannot be checked offline:
    the result has ``verified`` False.

    Args:
        ref: ``hf:OWNER/REPO/FILE`` the file stands for.
        src: The file.
        key: Config field, for messages.

    Returns:
        The cached file.

    Raises:
        PullError: bad reference, or the copy failed (disk full, permissions).
    """
    repo_id, filename = split_hf(ref)
    from huggingface_hub import constants

    repo_dir = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"
    try:
        digest = sha256_file(src)
        blob = repo_dir / "blobs" / digest
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            part = blob.with_name(digest + ".incomplete")
            shutil.copyfile(src, part)
            os.replace(part, blob)
        ref_file = repo_dir / "refs" / "main"
        revision = ref_file.read_text().strip() if ref_file.is_file() else ""
        if not revision:
            ref_file.parent.mkdir(parents=True, exist_ok=True)
            ref_file.write_text(revision := LOCAL_REVISION)
        link = repo_dir / "snapshots" / revision / filename
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, link.parent))
    except OSError as e:
        raise PullError(f"{key} {ref}: cannot copy {src} into {repo_dir}: {e}") from None
    _mark_verified(blob, digest)
    return Pulled(key, ref, link, blob.stat().st_size, digest, False, "copied")


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
    got = _verify(Path(hit), key, ref, delete_bad=False)
    return Pulled(got.key, got.ref, got.path, got.size, got.sha256, got.verified, "cached", got.hashed)


def service_hf_home(
    config: Path | None, service: ServiceInfo | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The ``HF_HOME`` of the installed service, when a command for its config should use that cache.

    ``bolt-agent run`` under systemd reads the cache of the unit's ``Environment=HF_HOME``;
    ``doctor`` and ``models pull`` run from a shell would otherwise check and fill
    ``~/.cache/huggingface`` of whoever runs them.

    Args:
        config: The ``--config`` of this command (None = the default config).
        service: The installed unit (:func:`agent.systemd.service_info`), or None.
        environ: This process's environment (default ``os.environ``).

    Returns:
        The unit's ``HF_HOME`` when this command's config is the one in the unit's ``ExecStart``,
        the unit sets ``HF_HOME``, and neither ``HF_HOME`` nor ``HF_HUB_CACHE`` is set here; else None.
    """
    env = os.environ if environ is None else environ
    if env.get("HF_HOME") or env.get("HF_HUB_CACHE") or service is None:
        return None
    home = service.environment.get("HF_HOME")
    return home if home and serves_config(service, config) else None


def serves_config(service: ServiceInfo, config: Path | None) -> bool:
    """Whether the unit's ``ExecStart`` runs this config file.

    Args:
        service: The installed unit.
        config: A config file (None = the default config: never the service's).
    """
    if config is None or service.config is None:
        return False
    try:
        return Path(config).resolve() == service.config.resolve() or Path(config).samefile(service.config)
    except OSError:
        return False


def _find_copy(ref: str, key: str, folder: Path) -> Path:
    _, filename = split_hf(ref)
    for cand in (folder / filename, folder / Path(filename).name):
        if cand.is_file():
            return cand
    raise PullError(
        f"{key} {ref}: {folder / Path(filename).name} not found; copy {Path(filename).name} "
        f"(from the hub: {repo_url(ref)}) into {folder}"
    )


def repo_url(ref: str) -> str:
    """The hub URL a ``hf:`` file downloads from (``HF_ENDPOINT``, revision ``main``).

    Args:
        ref: ``hf:OWNER/REPO/FILE``.
    """
    from huggingface_hub import constants

    repo_id, filename = split_hf(ref)
    return f"{constants.ENDPOINT}/{repo_id}/resolve/main/{filename}"


def _drop_cached(repo_id: str, filename: str) -> None:
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo_id, filename)
    if isinstance(hit, str):
        path = Path(hit)
        blob = path.resolve()
        blob.unlink(missing_ok=True)
        _marker(blob).unlink(missing_ok=True)
        if path.is_symlink():
            path.unlink()


def _verify(path: Path, key: str, ref: str, *, delete_bad: bool) -> Pulled:
    blob = path.resolve()
    expected = blob.name if _SHA256.match(blob.name) else None
    size = blob.stat().st_size
    if expected is not None and _marked_verified(blob, expected):
        return Pulled(key, ref, path, size, expected, True, hashed=False)
    digest = sha256_file(blob)
    if expected is not None and digest != expected:
        what = "deleted it" if delete_bad else "run `bolt-agent models pull` to replace it"
        try:
            _marker(blob).unlink(missing_ok=True)
            if delete_bad:
                blob.unlink(missing_ok=True)
                if path.is_symlink():
                    path.unlink()
        except OSError as e:
            what = f"cannot delete it ({e}): delete it as the cache's owner"
        raise PullError(
            f"{key} {ref}: sha256 mismatch in {blob}: the hub says {expected}, the file has {digest}; {what}"
        )
    if expected is not None:
        _mark_verified(blob, digest)
    return Pulled(key, ref, path, size, digest, expected is not None)


def _marker(blob: Path) -> Path:
    return blob.with_name(blob.name + ".verified")


def _stamp(blob: Path, sha256: str) -> dict[str, Any]:
    st = blob.stat()
    return {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _marked_verified(blob: Path, sha256: str) -> bool:
    """True when the blob's marker records this hash for the blob's current size, mtime and inode."""
    try:
        return json.loads(_marker(blob).read_text()) == _stamp(blob, sha256)
    except (OSError, ValueError):
        return False


def _mark_verified(blob: Path, sha256: str) -> None:
    """Record that the blob hashed to ``sha256``; a read-only cache only means hashing again next time."""
    marker = _marker(blob)
    tmp = marker.with_name(marker.name + f".{os.getpid()}")
    try:
        tmp.write_text(json.dumps(_stamp(blob, sha256)))
        os.replace(tmp, marker)
    except OSError:
        tmp.unlink(missing_ok=True)


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
