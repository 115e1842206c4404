"""A scripted capable model: what it answers each round, on every engine the product speaks to.

A case table (:mod:`conformance_cases`) says, for each user turn, what a capable model writes
round by round: its words and its tool calls, and what it must have been shown (the newest tool
result). Two ways to play it against the product's real engines:

* :class:`ScriptedServer` — a small OpenAI-compatible server (``/v1/chat/completions``, streamed
  or not) on 127.0.0.1 that answers from the table as an OpenAI server would (``tool_calls``
  deltas with ids, then arguments in pieces). It checks every request against OpenAI's protocol
  (one ``tool`` message per call id after the calling message; arguments as JSON text; only
  OpenAI's request fields: it is no llama.cpp server) and records what broke it.
* :class:`ScriptedEngine` — wraps a real local engine (embedded llama.cpp, or llama-server) of the
  tiny Gemma 4 model (:mod:`gemma4_model`) and holds each round to the table's answer written in
  Bolt's native markup, with a GBNF grammar whose special tokens are referenced by id. The
  template renders, llama.cpp generates, the Bolt parser reads the stream: only the choice is
  scripted. It checks the prompt is in the template's own tool-result form.

A round the table has no answer for is answered with a short apology and recorded as a problem.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GEMMA_SPECIALS = ("<|tool_call>", "<tool_call|>", '<|"|>')


@dataclass(frozen=True)
class Call:
    """One tool call the model writes."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


def call(name: str, **args: Any) -> Call:
    """A :class:`Call` of ``name`` with keyword ``args``."""
    return Call(name, args)


@dataclass(frozen=True)
class Step:
    """One model round: its words, then its calls; ``sees``: text the newest tool result must hold.

    ``says`` may hold ``{result}``: the newest tool result's words, as the model read them.
    """

    says: str = ""
    calls: tuple[Call, ...] = ()
    sees: str = ""


@dataclass(frozen=True)
class Turn:
    """One user turn and the model's rounds; ``hears``: what the product says besides the model."""

    said: str
    steps: tuple[Step, ...]
    hears: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """A conversation of one or more turns, and what kind of decision it tests."""

    name: str
    kind: str
    turns: tuple[Turn, ...]
    estop: bool = False


def turn_of(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The newest user words of a conversation (state line cut off) and the round being asked for.

    Args:
        messages: OpenAI-shaped messages, system first.

    Returns:
        ``(words, round)``: the round is the number of assistant messages after that user message.
    """
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    said = str(messages[last].get("content") or "").split("\n\n[")[0].strip()
    rounds = sum(1 for m in messages[last + 1 :] if m.get("role") == "assistant")
    return said, rounds


class Script:
    """The table's answers by user words, and what went wrong while playing them.

    Args:
        cases: The case table.
    """

    def __init__(self, cases: list[Case]) -> None:
        self.steps: dict[str, tuple[Step, ...]] = {}
        for case in cases:
            for t in case.turns:
                assert t.said not in self.steps, f"two turns say {t.said!r}"
                self.steps[t.said] = t.steps
        self.problems: list[str] = []
        self.rounds = 0
        self.answered: dict[tuple[str, int], Step] = {}

    def step(self, said: str, rnd: int, newest_result: str) -> Step:
        """The answer to round ``rnd`` of the turn ``said``; checks it was shown what it ``sees``."""
        step = self._step(said, rnd, newest_result)
        if "{result}" in step.says:
            try:
                words = json.loads(newest_result)
            except ValueError:
                words = newest_result
            step = dataclasses.replace(step, says=step.says.replace("{result}", str(words)))
        self.answered[(said, rnd)] = step
        return step

    def _step(self, said: str, rnd: int, newest_result: str) -> Step:
        self.rounds += 1
        steps = self.steps.get(said)
        if steps is None:
            if said.lower().startswith(("hello", "(the background task")):
                return Step("Hi.")  # the warm-up; a background result's note
            self.problems.append(f"no turn says {said!r}")
            return Step("Sorry.")
        if rnd >= len(steps):
            self.problems.append(f"{said!r}: round {rnd} asked for, the model planned {len(steps)}")
            return Step("Sorry.")
        step = steps[rnd]
        if step.sees and step.sees not in newest_result:
            self.problems.append(
                f"{said!r} round {rnd}: not shown {step.sees!r} (newest result {newest_result!r})"
            )
        return step


# --- Bolt's native markup, forced by a grammar -----------------------------------------------------
def gemma_value(value: Any) -> list[tuple[str, str]]:
    """An argument value in Gemma 4's notation, as pieces: ``("text", s)`` or ``("special", marker)``."""
    q = [("special", '<|"|>')]
    if isinstance(value, bool):
        return [("text", "true" if value else "false")]
    if isinstance(value, str):
        return [*q, ("text", value), *q]
    if isinstance(value, (int, float)):
        return [("text", json.dumps(value))]
    if isinstance(value, list):
        out: list[tuple[str, str]] = [("text", "[")]
        for i, v in enumerate(value):
            out += ([("text", ",")] if i else []) + gemma_value(v)
        return [*out, ("text", "]")]
    if isinstance(value, dict):
        out = [("text", "{")]
        for i, (k, v) in enumerate(sorted(value.items())):
            out += ([("text", ",")] if i else []) + [("text", f"{k}:")] + gemma_value(v)
        return [*out, ("text", "}")]
    raise TypeError(f"no Gemma notation for {type(value).__name__}")


def bolt_pieces(step: Step) -> list[tuple[str, str]]:
    """A step as Bolt writes it: its words, then each call ``<|tool_call>call:NAME{...}<tool_call|>``."""
    out: list[tuple[str, str]] = [("text", step.says)] if step.says else []
    for c in step.calls:
        out += [("special", "<|tool_call>"), ("text", f"call:{c.name}{{")]
        for i, (k, v) in enumerate(sorted(c.args.items())):
            out += ([("text", ",")] if i else []) + [("text", f"{k}:")] + gemma_value(v)
        out += [("text", "}"), ("special", "<tool_call|>")]
    return out


def gbnf(pieces: list[tuple[str, str]], ids: dict[str, int]) -> str:
    """A GBNF grammar that allows exactly ``pieces`` (special markers by token id: ``<[id]>``)."""
    parts = []
    for kind, text in pieces:
        if kind == "special":
            parts.append(f"<[{ids[text]}]>")
        elif text:
            parts.append(json.dumps(text))
    return "root ::= " + (" ".join(parts) or '""')


class ScriptedEngine:
    """A real local engine whose every round is held to the script's answer (Bolt markup).

    Everything but :meth:`stream` is the wrapped engine's own (rendering, tokens, the KV cache).

    Args:
        engine: The embedded ``ChatModel`` or a ``ServerChatModel`` of a llama-server, with a
            Gemma 4 template.
        script: The answers.
        ids: Token ids of :data:`GEMMA_SPECIALS` in the model's vocabulary.
    """

    def __init__(self, engine: Any, script: Script, ids: dict[str, int]) -> None:
        self.engine, self.script, self.ids = engine, script, ids
        self.prompts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def stream(self, request: Any, gen: Any, stop: Any = None) -> Iterator[str]:
        """Generate the round with the grammar of the script's answer for it."""
        messages = [dict(m) for m in request.messages]
        said, rnd = turn_of(messages)
        tools = [m for m in messages if m.get("role") == "tool"]
        newest = str(tools[-1].get("content", "")) if tools and rnd else ""
        step = self.script.step(said, rnd, newest)
        self.prompts.append(request.prompt)
        if rnd and not request.prompt.endswith("<tool_response|><|channel>thought\n<channel|>"):
            self.script.problems.append(
                f"{said!r} round {rnd}: the prompt does not go on after the tool responses: "
                f"{request.prompt[-160:]!r}"
            )
        pieces = bolt_pieces(step)
        # The grammar holds the round to the answer; the copy prior and drafting on the answer's
        # text make its tokens the greedy ones, so the grammar seldom has to check the whole
        # 262k-token vocabulary (a random model's own choice is always refused).
        text = "".join(t for _, t in pieces)
        forced = dataclasses.replace(
            request,
            grammar=gbnf(pieces, self.ids),
            copy_from=(text,),
            copy_bonus=30.0,
            draft=True,
            temperature=0.0,
        )
        yield from self.engine.stream(forced, gen, stop)


# --- an OpenAI-compatible server -------------------------------------------------------------------
OPENAI_FIELDS = frozenset(
    "model messages tools tool_choice stream stream_options max_tokens max_completion_tokens temperature "
    "top_p seed stop n presence_penalty frequency_penalty logit_bias user parallel_tool_calls "
    "response_format".split()
)
"""Request fields of OpenAI's chat completions; anything else is a server's own extension."""


def protocol_problems(body: dict[str, Any]) -> list[str]:
    """Where a chat-completions request breaks OpenAI's protocol (empty when it does not).

    Checked: only OpenAI's fields; a ``model``; tools as ``{"type": "function", "function":
    {name, description, parameters}}``; each assistant call with an id, ``type: function`` and
    JSON-object arguments as text; right after it, exactly one ``tool`` message per call id (and
    no ``tool`` message elsewhere); message contents as text.
    """
    out = [f"field {k!r} is no OpenAI field" for k in body if k not in OPENAI_FIELDS]
    if not body.get("model"):
        out.append("no model")
    for t in body.get("tools") or []:
        fn = t.get("function") or {}
        if t.get("type") != "function" or not fn.get("name") or "parameters" not in fn:
            out.append(f"malformed tool {t!r}")
    msgs = body.get("messages") or []
    i = 0
    while i < len(msgs):
        out += _message_problems(i, msgs[i])
        calls = msgs[i].get("tool_calls") or [] if msgs[i].get("role") == "assistant" else []
        if not calls:
            i += 1
            continue
        j = i + 1
        answered = []
        while j < len(msgs) and msgs[j].get("role") == "tool":
            answered.append(msgs[j].get("tool_call_id"))
            extra = set(msgs[j]) - {"role", "content", "tool_call_id", "name"}
            if extra:
                out.append(f"message {j}: tool message keys {sorted(extra)}")
            j += 1
        ids = [c.get("id") for c in calls]
        if sorted(answered, key=str) != sorted(ids, key=str):
            out.append(f"message {i}: calls {ids} answered by tool messages {answered}")
        i = j
    return out


def _message_problems(i: int, m: dict[str, Any]) -> list[str]:
    """What is wrong with message ``i`` on its own: its role, its content, its calls' ids and arguments."""
    out = []
    role = m.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        out.append(f"message {i}: role {role!r}")
    if role == "tool":
        out.append(f"message {i}: a tool message that answers no call")
    if not isinstance(m.get("content", ""), (str, list)) and not (
        role == "assistant" and m.get("tool_calls")
    ):
        out.append(f"message {i}: content is {type(m.get('content')).__name__}")
    for c in m.get("tool_calls") or [] if role == "assistant" else []:
        fn = c.get("function") or {}
        if not isinstance(c.get("id"), str) or not c["id"] or c.get("type") != "function":
            out.append(f"message {i}: call without id or type: {c!r}")
        try:
            if not isinstance(json.loads(fn.get("arguments")), dict):
                raise ValueError
        except (TypeError, ValueError):
            out.append(f"message {i}: arguments are not JSON object text: {fn.get('arguments')!r}")
    return out


class ScriptedServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers from a :class:`Script`.

    Attributes:
        url: ``http://127.0.0.1:PORT``.
        requests: Every chat-completions body received.
        problems: Protocol breaks (:func:`protocol_problems`) and unknown endpoints, per request.
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self._calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "scripted-bolt", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"no {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no {self.path}"}})
                    return
                server.requests.append(body)
                server.problems += [f"request {len(server.requests)}: {p}" for p in protocol_problems(body)]
                said, rnd = turn_of(body["messages"])
                tools = [m for m in body["messages"] if m.get("role") == "tool"]
                newest = str(tools[-1].get("content", "")) if tools and rnd else ""
                step = server.script.step(said, rnd, newest)
                if body.get("stream"):
                    self._stream(step, body)
                else:
                    self._json(200, server.whole(step))

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, step: Step, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in server.chunks(
                    step, bool((body.get("stream_options") or {}).get("include_usage"))
                ):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-server", daemon=True)
        self._thread.start()

    def _ids(self, step: Step) -> list[str]:
        ids = []
        for _ in step.calls:
            self._calls += 1
            ids.append(f"call_{self._calls:04d}")
        return ids

    def chunks(self, step: Step, usage: bool) -> Iterator[dict[str, Any]]:
        """The streamed answer: words in pieces, then each call's id and name, then its arguments."""

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        words = step.says.split(" ")
        for i, w in enumerate(words):
            if w:
                yield chunk({"content": w if i == 0 else " " + w})
        for i, (c, cid) in enumerate(zip(step.calls, self._ids(step), strict=True)):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": c.name, "arguments": ""},
                        }
                    ]
                }
            )
            text = json.dumps(c.args)
            for k in range(0, len(text), 7):
                yield chunk({"tool_calls": [{"index": i, "function": {"arguments": text[k : k + 7]}}]})
        yield chunk({}, "tool_calls" if step.calls else "stop")
        if usage:
            yield {
                "id": "chatcmpl-scripted",
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            }

    def whole(self, step: Step) -> dict[str, Any]:
        """The answer at once (``stream: false``)."""
        message: dict[str, Any] = {"role": "assistant", "content": step.says or None}
        if step.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                for c, cid in zip(step.calls, self._ids(step), strict=True)
            ]
        finish = "tool_calls" if step.calls else "stop"
        return {
            "id": "chatcmpl-scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
