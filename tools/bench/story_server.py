"""A long-talking chat model for ``bench --floor``: an OpenAI-compatible server that tells a story.

The floor bench needs the robot to talk for many seconds (clips are said over its speech); the
embedded stand-in model answers a story request in a sentence or two, and its decoding shares
the two cores with the listening path, which the robot's real model does not (it decodes on the
GPU). :class:`StoryServer` answers every ``/v1/chat/completions`` request, streamed, with the
same long story at :data:`TOKENS_PER_S`, on 127.0.0.1 only; :func:`story_config` writes the
agent's config pointing its ``openai`` engine at it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tomllib

STORY = (
    "Once upon a time, a small robot lived in a workshop at the edge of a quiet town. "
    "Every morning it watched the baker open her shop across the street, and every evening it "
    "counted the lamps as they came on, one by one, along the river. "
    "One day a paper kite got stuck in the old oak tree beside the workshop, and a little girl "
    "stood under it, looking up and wondering what to do. "
    "The robot rolled outside, stretched its arm as far as it would go, and still it could not "
    "reach the string. "
    "So it asked the baker for a long wooden spoon, and the baker laughed and gave it the "
    "longest one she had. "
    "With the spoon in its hand the robot reached again, and this time it caught the string and "
    "brought the kite gently down. "
    "The girl clapped her hands, and the baker gave them both a warm loaf of bread. "
    "From that day on the robot kept the spoon beside the door, in case anything else in the "
    "town ever needed reaching. "
    "And every evening, when the lamps came on along the river, it counted one more light than "
    "before, because the girl had hung a lantern in her window just for it."
)
"""What the server says, whatever it is asked: some 60 s of speech."""

TOKENS_PER_S = 25.0
"""Words streamed per second (a 4B model's decode on a Jetson Orin's GPU is of this order)."""


class StoryServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that streams :data:`STORY` (context manager).

    Attributes:
        url: ``http://127.0.0.1:PORT`` (the ``[llm.openai] url``).
        requests: Chat requests answered.
    """

    def __init__(self, tokens_per_s: float = TOKENS_PER_S) -> None:
        self.requests = 0
        server = self
        pause_s = 1.0 / tokens_per_s

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/v1/models":
                    self._json({"object": "list", "data": [{"id": "story", "object": "model"}]})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                server.requests += 1
                if not body.get("stream"):
                    msg = {"role": "assistant", "content": STORY}
                    self._json({"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for i, word in enumerate(STORY.split(" ")):
                        self._event({"content": word if i == 0 else " " + word})
                        time.sleep(pause_s)
                    self._event({}, "stop")
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent cancelled the turn (an interruption)

            def _event(self, delta: dict[str, Any], finish: str | None = None) -> None:
                chunk = {
                    "id": "chatcmpl-story",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            def _json(self, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="story-server", daemon=True)

    def __enter__(self) -> StoryServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def story_config(base: Path, url: str, out: Path) -> Path:
    """Write ``base`` with its chat model replaced by the story server at ``url``; returns ``out``.

    Raises:
        OSError, tomllib.TOMLDecodeError: ``base`` cannot be read.
    """
    raw = tomllib.loads(base.read_text(encoding="utf-8"))
    llm = raw.setdefault("llm", {})
    llm.update(engine="openai", model="", max_reply_sentences=0)  # the whole story, not two sentences
    llm["openai"] = {**llm.get("openai", {}), "url": url, "api": "chat"}
    out.write_text(toml_text(raw), encoding="utf-8")
    return out


def toml_text(table: dict[str, Any], prefix: str = "") -> str:
    """A TOML document of ``table`` (as ``tomllib`` gives it: tables, arrays, scalars)."""
    plain = [f"{k} = {_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    parts = ["\n".join(plain)] if plain else []
    for k, v in table.items():
        if isinstance(v, dict):
            name = f"{prefix}.{k}" if prefix else k
            parts.append(f"[{name}]\n" + toml_text(v, name))
    return "\n\n".join(p for p in parts if p.strip()) + "\n"


def _value(v: Any) -> str:
    """One TOML value: inline tables and arrays, strings JSON-escaped (valid TOML basic strings)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)
