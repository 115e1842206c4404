"""A Hugging Face hub on 127.0.0.1 (resolve endpoint; datasets' API too), for ``HF_ENDPOINT`` in tests.

``huggingface_hub.hf_hub_download`` sends ``HEAD {endpoint}/{repo}/resolve/{rev}/{file}`` and reads
``X-Repo-Commit``, ``X-Linked-Etag`` (the LFS SHA-256, quoted), ``X-Linked-Size`` and ``ETag``; then
``GET`` on the same URL, with ``Range: bytes=N-`` when it resumes. The server answers exactly that
for the files it is given. Faults: ``cut_first`` sends half of the first GET body and closes the
connection (the client sees a short body); ``corrupt`` serves bytes that differ from the advertised
SHA-256 (same length).

Datasets (``datasets``: dataset id -> a folder whose files are the repo), for
``snapshot_download(repo_type="dataset")`` of huggingface_hub 1.33 (``_snapshot_download.py``,
``hf_api.py``):

- ``GET /api/datasets/{repo}/revision/{rev}`` (``HfApi.dataset_info``): ``{"id", "sha",
  "siblings": [{"rfilename"}]}``; the ``sha`` is the commit the snapshot is stored under;
- ``GET /api/datasets/{repo}/tree/{rev}?recursive=true`` (``HfApi.list_repo_tree``, one page: no
  ``Link`` header): ``{"type": "file", "path", "size", "oid"}`` per file (``"lfs": {"oid":
  sha256, "size", "pointerSize"}`` for LFS files) and ``{"type": "directory", "path", "oid"}``;
  huggingface_hub keeps it as ``trees/{sha}.json`` and later checks the cached snapshot against it;
- ``HEAD``/``GET /datasets/{repo}/resolve/{commit}/{path}`` (``hf_hub_download`` per file): as for
  models, except that a plain git file (:data:`GIT_SUFFIXES`: JSON, Markdown...) has only an
  ``ETag`` (its git blob SHA-1) and no ``X-Linked-*``, as the hub answers; other files are LFS.

An unknown dataset answers 404 with ``X-Error-Code: RepoNotFound`` (huggingface_hub raises
``RepositoryNotFoundError``). Files are read when asked for, so a test may change the folder.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GIT_SUFFIXES = (".json", ".md", ".txt", ".gitattributes")
"""Dataset files stored in git itself (ETag = git blob SHA-1); the rest is LFS (ETag = SHA-256)."""


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file's content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer:
    """Serve ``files`` (``"owner/repo/path" -> bytes``) as the hub's resolve endpoint, and ``datasets``.

    Args:
        files: Model files by ``"owner/repo/path"``.
        datasets: Dataset folders by dataset id (``"owner/name"``): every file under a folder is
            a file of that dataset, at its relative path.
        cut_first: Cut the first model-file GET at half its body.
        corrupt: Serve model files with their first byte changed.

    Attributes:
        url: ``http://127.0.0.1:PORT``, the value for ``HF_ENDPOINT``.
        requests: ``(method, path, Range header or "")`` of every request, in order.
    """

    def __init__(
        self,
        files: dict[str, bytes],
        *,
        datasets: dict[str, Path] | None = None,
        cut_first: bool = False,
        corrupt: bool = False,
    ) -> None:
        self.files = files
        self.datasets = {repo: Path(folder) for repo, folder in (datasets or {}).items()}
        self.cut_first = cut_first
        self.corrupt = corrupt
        self.requests: list[tuple[str, str, str]] = []
        self._cut_done = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _dataset_files(self, repo: str) -> dict[str, bytes] | None:
        """Every file of a dataset by repo path (``data/nod.json``), or None for an unknown dataset."""
        folder = self.datasets.get(repo)
        if folder is None:
            return None
        return {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }

    def _dataset_api(self, path: str) -> bytes | None:
        """The JSON body of ``/api/datasets/{repo}/revision|tree/...``; None: no such dataset."""
        rest = path.removeprefix("/api/datasets/")
        for kind in ("/revision/", "/tree/"):
            if kind in rest:
                repo = rest.split(kind, 1)[0]
                files = self._dataset_files(repo)
                if files is None:
                    return None
                if kind == "/revision/":
                    info = {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": f} for f in files]}
                    return json.dumps(info).encode()
                entries: list[dict] = []
                folders = sorted({f.rsplit("/", 1)[0] for f in files if "/" in f})
                for folder in folders:  # the hub lists folders too; huggingface_hub skips them
                    entries.append({"type": "directory", "path": folder, "oid": "0" * 40})
                for name, data in files.items():
                    entry: dict = {
                        "type": "file",
                        "path": name,
                        "size": len(data),
                        "oid": git_blob_sha1(data),
                    }
                    if not name.endswith(GIT_SUFFIXES):
                        sha = hashlib.sha256(data).hexdigest()
                        entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 134}
                    entries.append(entry)
                return json.dumps(entries).encode()
        return None

    def _dataset_file(self, path: str) -> tuple[bytes, bool] | None:
        """``(content, is LFS)`` for ``/datasets/{repo}/resolve/{rev}/{file}``, or None."""
        repo_and_rest = path.removeprefix("/datasets/").split("/resolve/", 1)
        if len(repo_and_rest) != 2:
            return None
        repo, rest = repo_and_rest
        _rev, _, filename = rest.partition("/")
        data = (self._dataset_files(repo) or {}).get(filename)
        return None if data is None else (data, not filename.endswith(GIT_SUFFIXES))

    def _lookup(self, path: str) -> bytes | None:
        repo_and_rest = path.lstrip("/").split("/resolve/", 1)
        if len(repo_and_rest) != 2:
            return None
        repo, rest = repo_and_rest
        _rev, _, filename = rest.partition("/")
        return self.files.get(f"{repo}/{filename}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_HubHandler,), {"hub": self})


class _HubHandler(BaseHTTPRequestHandler):
    """The hub's HTTP answers; :attr:`hub` is set per server (:meth:`HubServer._handler`)."""

    hub: HubServer

    def log_message(self, *args: object) -> None:
        pass

    def _headers(self, data: bytes, status: int, start: int, lfs: bool = True) -> None:
        sha = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{sha}"')
        if lfs:
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()

    def _not_found(self, code: str) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _dataset(self, path: str, body: bool) -> None:
        """Answer a dataset request (API or resolve); ``body``: GET rather than HEAD."""
        if path.startswith("/api/datasets/"):
            doc = self.hub._dataset_api(path)
            if doc is None:
                self._not_found("RepoNotFound")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            if body:
                self.wfile.write(doc)
            return
        found = self.hub._dataset_file(path)
        if found is None:
            self._not_found("EntryNotFound")
            return
        data, lfs = found
        rng = self.headers.get("Range", "") if body else ""
        start = int(rng.removeprefix("bytes=").split("-")[0]) if rng.startswith("bytes=") else 0
        self._headers(data, 206 if start else 200, start, lfs)
        if body:
            self.wfile.write(data[start:])

    def do_HEAD(self) -> None:
        self.hub.requests.append(("HEAD", self.path, self.headers.get("Range", "")))
        path = unquote(urlsplit(self.path).path)
        if path.startswith(("/api/datasets/", "/datasets/")):
            self._dataset(path, body=False)
            return
        data = self.hub._lookup(self.path)
        if data is None:
            self.send_error(404)
            return
        self._headers(data, 200, 0)

    def do_GET(self) -> None:
        rng = self.headers.get("Range", "")
        self.hub.requests.append(("GET", self.path, rng))
        path = unquote(urlsplit(self.path).path)
        if path.startswith(("/api/datasets/", "/datasets/")):
            self._dataset(path, body=True)
            return
        data = self.hub._lookup(self.path)
        if data is None:
            self.send_error(404)
            return
        start = int(rng.removeprefix("bytes=").split("-")[0]) if rng.startswith("bytes=") else 0
        self._headers(data, 206 if start else 200, start)
        body = data[start:]
        if self.hub.corrupt:
            body = bytes(b ^ 0xFF for b in body[:1]) + body[1:]
        if self.hub.cut_first and not self.hub._cut_done:
            self.hub._cut_done = True
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)
