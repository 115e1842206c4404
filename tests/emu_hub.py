"""A Hugging Face hub resolve endpoint on 127.0.0.1, for ``HF_ENDPOINT`` in tests.

``huggingface_hub.hf_hub_download`` sends ``HEAD {endpoint}/{repo}/resolve/{rev}/{file}`` and reads
``X-Repo-Commit``, ``X-Linked-Etag`` (the LFS SHA-256, quoted), ``X-Linked-Size`` and ``ETag``; then
``GET`` on the same URL, with ``Range: bytes=N-`` when it resumes. The server answers exactly that
for the files it is given. Faults: ``cut_first`` sends half of the first GET body and closes the
connection (the client sees a short body); ``corrupt`` serves bytes that differ from the advertised
SHA-256 (same length).
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    """Serve ``files`` (``"owner/repo/path" -> bytes``) as the hub's resolve endpoint.

    Attributes:
        url: ``http://127.0.0.1:PORT``, the value for ``HF_ENDPOINT``.
        requests: ``(method, path, Range header or "")`` of every request, in order.
    """

    def __init__(self, files: dict[str, bytes], *, cut_first: bool = False, corrupt: bool = False) -> None:
        self.files = files
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

    def _lookup(self, path: str) -> bytes | None:
        repo_and_rest = path.lstrip("/").split("/resolve/", 1)
        if len(repo_and_rest) != 2:
            return None
        repo, rest = repo_and_rest
        _rev, _, filename = rest.partition("/")
        return self.files.get(f"{repo}/{filename}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _headers(self, data: bytes, status: int, start: int) -> None:
                sha = hashlib.sha256(data).hexdigest()
                self.send_response(status)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{sha}"')
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(data) - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()

            def do_HEAD(self) -> None:
                hub.requests.append(("HEAD", self.path, self.headers.get("Range", "")))
                data = hub._lookup(self.path)
                if data is None:
                    self.send_error(404)
                    return
                self._headers(data, 200, 0)

            def do_GET(self) -> None:
                rng = self.headers.get("Range", "")
                hub.requests.append(("GET", self.path, rng))
                data = hub._lookup(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start = int(rng.removeprefix("bytes=").split("-")[0]) if rng.startswith("bytes=") else 0
                self._headers(data, 206 if start else 200, start)
                body = data[start:]
                if hub.corrupt:
                    body = bytes(b ^ 0xFF for b in body[:1]) + body[1:]
                if hub.cut_first and not hub._cut_done:
                    hub._cut_done = True
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        return Handler
