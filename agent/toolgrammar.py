"""Tool calling for models without a native tool format: grammar-constrained JSON.

Small models such as the embedded SmolLM2-135M have no tool-call markup of their own. For
them the reply is constrained by a llama.cpp grammar built from the registered skills' JSON
schemas, so the output is always parseable and only names real tools::

    {"call": {"tool": "wave", "arguments": {"hand": "right"}}, "say": "Hello there!"}

The call comes first so the model decides on an action before it talks (and the tool prior
below acts on that choice); ``say`` is what the robot speaks. Only skills declared
``follow_up=False`` (movements) carry ``say`` with their call, a short acknowledgement the
model picks ("Sure!"): the call runs as soon as its object is complete
(:class:`CallStreamer`), so the arm moves while the speech is still being written and
synthesized. A data skill's call has no ``say``: its result is spoken in the
next round. Measured here: with this grammar even the 135M model picks the right tool for
simple commands. The tools are described in the system prompt in a compact,
signature-like form (the template of such models has no tool slot).

A 135M model still picks tools almost at random from names alone (measured on the command
fixtures: 4 of 10). :class:`ToolChoicePrior` adds a logit bonus, only at the position where
the tool name is written, to tools whose name or declared keywords the user actually said;
the grammar keeps every choice valid and the model still fills in arguments and speech.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.skills import Skill

NO_TOOL = "none"
SAY_MAX_CHARS = 160
ACKNOWLEDGEMENTS = ("Sure!", "Okay!", "All right!", "Of course!", "On it!", "Here I go!")
"""What the robot may say with a call that needs no follow-up: the model picks one. Free text
there wandered on SmolLM2-135M (measured: "Sure! Here's a little joke about your tool." while
waving, "You can't do that!" while setting a timer); a short acknowledgement is always right
and is a complete sentence after a couple of tokens, so its audio starts at once."""


def reply_schema(
    skills: list[Skill], allow_tools: bool = True, acks: tuple[str, ...] = ACKNOWLEDGEMENTS
) -> dict[str, Any]:
    """JSON schema of one grammar-constrained reply: a tool call, speech, or both.

    ``{"call": {"tool": NAME, "arguments": {...}}}`` calls a skill whose result needs a
    spoken follow-up (``follow_up=True``: ``get_time``); the next round speaks about the
    result, so what the robot says is grounded in it (a 135M model otherwise announces a
    made-up time before ``get_time`` has answered). ``{"call": {"tool": NAME, "arguments":
    {...}}, "say": ACK}`` calls a skill without follow-up (``wave``) and speaks in the same
    round, after the call so the words follow the choice; ``ACK`` is one of
    :data:`ACKNOWLEDGEMENTS`. ``{"call": {"tool": "none"},
    "say": TEXT}`` only speaks. One call per round keeps the choice simple; a multi-step
    request ("turn, then wave") takes several rounds.

    Args:
        skills: Tools the model may call.
        allow_tools: False gives the speech-only variant, used on the last round.
        acks: What a call without follow-up may say (a later round of a multi-step command
            leaves out what an earlier one said, so the robot does not repeat itself).

    Returns:
        A JSON schema object for ``LlamaGrammar.from_json_schema``.
    """
    say = {"type": "string", "minLength": 2, **({"maxLength": SAY_MAX_CHARS} if SAY_MAX_CHARS else {})}
    variants: list[dict[str, Any]] = []
    for s in skills if allow_tools else []:
        args = {k: v for k, v in s.parameters.items() if k in ("type", "properties", "required")}
        args.setdefault("type", "object")
        call = {
            "type": "object",
            "properties": {"tool": {"const": s.name}, "arguments": args},
            "required": ["tool", "arguments"],
        }
        if s.follow_up:
            variants.append({"type": "object", "properties": {"call": call}, "required": ["call"]})
        else:  # key order is the grammar's order: call first, then say
            ack = {"type": "string", "enum": list(acks or ACKNOWLEDGEMENTS)}
            variants.append(
                {"type": "object", "properties": {"call": call, "say": ack}, "required": ["call", "say"]}
            )
    speak = {"type": "object", "properties": {"tool": {"const": NO_TOOL}}, "required": ["tool"]}
    variants.append(
        {"type": "object", "properties": {"call": speak, "say": say}, "required": ["call", "say"]}
    )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _param_text(name: str, prop: dict[str, Any]) -> str:
    # Compact on purpose: the grammar enforces types and ranges; the prompt only has to
    # tell the model what exists (a 512-token context must still hold every tool).
    if "enum" in prop:
        return f"{name}={'|'.join(str(v) for v in prop['enum'])}"
    lo, hi = prop.get("minimum"), prop.get("maximum")
    if lo is not None and hi is not None:
        return f"{name} {lo:g}..{hi:g}"
    return name


def tools_prompt(skills: list[Skill]) -> str:
    """System-prompt text listing the tools (one compact line each) and the reply format."""
    lines = ["Tools:"]
    for s in skills:
        params = ", ".join(_param_text(k, v) for k, v in s.parameters.get("properties", {}).items())
        lines.append(f"- {s.name}({params}): {s.description}")
    lines.append(f"- {NO_TOOL}: just talk.")
    lines.append(
        'Reply in JSON: {"call": {"tool": TOOL, "arguments": {...}}} to act, or '
        f'{{"call": {{"tool": "{NO_TOOL}"}}, "say": TEXT}} to speak aloud. After a tool result, tell '
        "the user about it in one short sentence."
    )
    return "\n".join(lines)


_SAY = re.compile(r'"say"\s*:\s*"((?:[^"\\]|\\.)*)')


def parse_reply(text: str) -> tuple[str, list[dict[str, Any]], str]:
    """Parse a grammar-constrained reply.

    Args:
        text: The model output (normally complete JSON; may be cut off by ``max_tokens``).

    Returns:
        ``(say, calls, problem)``: the speech text, the calls as ``{"name", "arguments"}``
        dicts (empty for ``"none"``), and a message when the output was cut off or
        malformed (what could be recovered is still returned).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        m = _SAY.search(text)
        say = ""
        if m:
            try:
                say = json.loads(f'"{m.group(1)}"')
            except json.JSONDecodeError:
                say = ""
        return say.strip(), [], "reply was cut off before it was complete JSON; its tool call was not run"
    if not isinstance(data, dict):
        return "", [], "reply was not a JSON object"
    say = data.get("say") if isinstance(data.get("say"), str) else ""
    call = _call_of(data.get("call"))
    return say.strip(), [call] if call else [], ""


def _call_of(obj: Any) -> dict[str, Any] | None:
    """The ``{"name", "arguments"}`` call of a reply's ``call`` object (None for ``"none"``)."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("tool")
    if not isinstance(name, str) or name == NO_TOOL:
        return None
    args = obj.get("arguments") if isinstance(obj.get("arguments"), dict) else {}
    return {"name": name, "arguments": args}


class CallStreamer:
    """Spot the end of the ``call`` object in a grammar-constrained reply while it is generated.

    ``feed(piece)`` returns the call as ``{"name", "arguments"}`` once, on the piece that
    closes the ``call`` object, so the tool can run while the model still writes ``say``
    (the robot starts moving as it starts talking). ``"none"`` gives nothing. Works because
    the grammar puts ``call`` first: the first object nested in the reply is the call.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._start = -1
        self.done = False
        """The call object is complete (whether or not it named a tool)."""

    def feed(self, piece: str) -> dict[str, Any] | None:
        """Add generated text; return the call when this piece completed it, else None."""
        if self.done:
            return None
        start = len(self._buf)
        self._buf += piece
        for i in range(start, len(self._buf)):
            ch = self._buf[i]
            if self._in_str:  # braces inside strings are text, not structure
                if self._esc:
                    self._esc = False
                elif ch == "\\":
                    self._esc = True
                elif ch == '"':
                    self._in_str = False
            elif ch == '"':
                self._in_str = True
            elif ch == "{":
                self._depth += 1
                if self._depth == 2 and self._start < 0:
                    self._start = i
            elif ch == "}":
                self._depth -= 1
                if self._depth == 1 and self._start >= 0:
                    self.done = True
                    try:
                        return _call_of(json.loads(self._buf[self._start : i + 1]))
                    except json.JSONDecodeError:
                        return None
        return None


STOPWORDS = frozenset({"get", "set", "the", "and", "for", "you", "can", "your", "with", "make", "please"})


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def name_words(name: str) -> set[str]:
    """The words of a tool's name that the user must all say for a name match.

    Split at ``_``, generic verbs (:data:`STOPWORDS`) left out, short words kept: ``look_at``
    needs "look" *and* "at", so "please look to the left" names ``look``, not ``look_at``.
    """
    return {w for w in name.lower().split("_") if w and w not in STOPWORDS}


def tool_prior(user_text: str, skills: list[Skill], done: set[str], bonus: float) -> dict[str, float]:
    """Logit bonus per tool name from the user's own words (a prior for small models).

    A tool gets ``bonus`` when every word of its name (split at ``_``) or one of its
    declared ``keywords`` is in the user's text, half of it for a shared 4-letter stem ("dancing")
    when no tool matches exactly.
    Tools already called this turn get nothing; ``"none"`` gets the bonus when no other
    tool does (small talk stays small talk) and minus the bonus when one does.

    Args:
        user_text: What the user said this turn.
        skills: Tools on offer.
        done: Tool names already called this turn.
        bonus: Logit bonus for a full match (0 disables the prior).

    Returns:
        Tool name → logit bonus (only names with a bonus; ``"none"`` always present).
    """
    if bonus <= 0:
        return {}
    said = _words(user_text)
    text = " ".join(re.findall(r"[a-z]+", user_text.lower()))
    out: dict[str, float] = {}
    for s in skills:
        parts = name_words(s.name)
        keys = {w for w in parts if len(w) > 2} | {k for k in s.keywords if " " not in k}
        phrase = any(f" {k} " in f" {text} " for k in s.keywords)  # keywords may be phrases ("look at")
        # The whole name said ("emergency stop" — not just "stop"), or one of its keywords.
        if (parts and parts <= said) or phrase:
            out[s.name] = bonus
        elif any(len(k) >= 4 and len(w) >= 4 and k[:4] == w[:4] for k in keys for w in said):
            out[s.name] = bonus / 2
    if any(v == bonus for v in out.values()):  # an exact word beats a shared stem ("timer" vs "time")
        out = {k: v for k, v in out.items() if v == bonus}
    out = {k: v for k, v in out.items() if k not in done}
    # Push "none" the other way when the user named an action, toward it when they did not.
    out[NO_TOOL] = -bonus if out else bonus
    return out


def tool_words(user_text: str, skill: Skill) -> set[str]:
    """The user's words that point at ``skill``, as :func:`tool_prior` finds them (empty: none do).

    Its name's words when all were said, the words of each keyword said, or, failing those,
    the said words sharing a 4-letter stem with one of them ("dancing").
    """
    said = _words(user_text)
    text = f" {' '.join(re.findall(r'[a-z]+', user_text.lower()))} "
    parts = name_words(skill.name)
    out = set(parts) if parts and parts <= said else set()
    for k in skill.keywords:
        if f" {k} " in text:
            out |= set(k.split())
    if not out:
        keys = {w for w in parts if len(w) > 2} | {k for k in skill.keywords if " " not in k}
        out = {w for w in said if len(w) >= 4 and any(len(k) >= 4 and k[:4] == w[:4] for k in keys)}
    return out


def tools_left(user_text: str, skills: list[Skill], called: set[str], bonus: float) -> dict[str, float]:
    """:func:`tool_prior` for a later round of a turn: only tools the user's words still point at.

    A tool not yet called keeps its bonus only when some of the words that point at it are
    not explained by a tool already called: after ``look_at`` for "look to the left", ``look``
    (pointed at by the same word) is not wanted too; after ``wave`` for "turn your head and
    then wave", ``look`` (pointed at by "turn") still is.

    Args:
        user_text: What the user said this turn.
        skills: Tools on offer.
        called: Tool names already called this turn.
        bonus: Logit bonus for a full match (0 disables the prior: returns ``{}``).

    Returns:
        Tool name → logit bonus, as :func:`tool_prior` (``"none"`` positive when nothing is left).
    """
    bonuses = tool_prior(user_text, skills, called, bonus)
    if not bonuses:
        return bonuses
    by_name = {s.name: s for s in skills}
    covered: set[str] = set()
    for name in called:
        if name in by_name:
            covered |= tool_words(user_text, by_name[name])
    out = {
        n: b
        for n, b in bonuses.items()
        if n != NO_TOOL and b > 0 and not tool_words(user_text, by_name[n]) <= covered
    }
    out[NO_TOOL] = -bonus if out else bonus
    return out


class ToolChoicePrior:
    """llama.cpp logits processor that turns :func:`tool_prior` bonuses into a bias on whole tool names.

    A bonus belongs to a *name*, but the model writes the name in pieces ("d" + "ance", "de" +
    "scribe" ...), and pieces are shared ("no" starts both ``none`` and ``nod``). With ``L(w)``
    the lowest bonus among the names that the written text ``w`` can still become, a piece that
    takes the written value from ``w`` to ``w'`` gets ``L(w') - L(w)``. Along any spelling of a
    name the pieces' biases add up to that name's bonus (minus one constant), so a bonus is never
    counted twice; and a shared piece gets the *lowest* bonus of its names (unless it already
    spells a whole name, which then counts as that name), because a small
    model that writes an ambiguous piece has usually already chosen: measured on SmolLM2-135M
    after "what do you see", "d" goes on to "ance" (logit 35.3) far more than to "escribe"
    (20.8), so a bonus on "d" for ``describe_scene`` made the robot dance. The favoured name
    is reached through its own pieces ("de", "describe"). The grammar still decides what is
    allowed; the bias only tips the choice between valid tools.

    Args:
        tokenize: The model's tokenizer (text → token ids, no BOS).
        detokenize: Token ids → text.
        n_prompt: Prompt length in tokens (generated tokens follow it).
        bonuses: Tool name → logit bonus (names not listed have 0).
        names: Every tool name the grammar allows here (``"none"`` included).
    """

    _AT_NAME = re.compile(r'"tool"\s*:\s*("?)([^"]*)$')
    _ENDS = ('",', '"}', '" ')  # what the JSON grammar may write right after a name

    def __init__(
        self, tokenize: Any, detokenize: Any, n_prompt: int, bonuses: dict[str, float], names: list[str]
    ) -> None:
        self.tokenize = tokenize
        self.detokenize = detokenize
        self.n_prompt = n_prompt
        self.bonuses = bonuses
        self.names = names
        self._first: dict[str, dict[int, str]] = {}
        # Every full value the grammar can write, with its name's bonus.
        self._targets = [('"' + n + end, bonuses.get(n, 0.0)) for n in names for end in self._ENDS]

    def _prefix_tokens(self, text: str) -> dict[int, str]:
        """Every token whose text is a prefix of ``text``, with that text (cached per text)."""
        if text not in self._first:
            toks: dict[int, str] = {}
            for k in range(1, min(len(text), 40) + 1):
                ids = self.tokenize(text[:k])
                if len(ids) == 1:
                    toks[ids[0]] = text[:k]
            self._first[text] = toks
        return self._first[text]

    def _floor(self, written: str) -> float | None:
        """``L(written)``: the lowest bonus among the names the written value can still become.

        A value that already spells a whole name counts as that name: "look" for ``look``
        (favoured) is not held back by ``look_at``, which would still need "_at".
        """
        if written[1:] in self.bonuses and written.startswith('"'):
            return self.bonuses[written[1:]]
        vals = [b for t, b in self._targets if t.startswith(written)]
        return min(vals) if vals else None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Return ``scores`` (float32 logits over the vocabulary) with the name bias added in place."""
        if not self.bonuses or not any(self.bonuses.values()):
            return scores
        # Only the last tokens matter (the name position): keep the per-token cost flat.
        tail = self.detokenize(list(input_ids[max(self.n_prompt, len(input_ids) - 32) :]))
        m = self._AT_NAME.search(tail[-48:])
        if not m:
            return scores
        written = m.group(1) + m.group(2)  # '' before the opening quote, else '"' + partial name
        here = self._floor(written)
        if here is None:
            return scores
        seen: dict[int, str] = {}
        for target, _ in self._targets:
            if not target.startswith(written):
                continue
            rest = target[len(written) :]
            seen.update(self._prefix_tokens(rest))
            if not written:  # the opening quote may come with the space before it
                seen.update({t: p[1:] for t, p in self._prefix_tokens(" " + rest).items() if len(p) > 1})
        for tok, piece in seen.items():
            after = self._floor(written + piece)
            if after is not None and after != here:
                scores[tok] += after - here
        return scores


class SayStreamer:
    """Pull the ``say`` string out of a grammar-constrained reply while it is generated.

    ``feed(piece)`` returns the newly decoded characters of the ``say`` value (JSON escapes
    resolved), so speech can start before the JSON is complete. Works because the grammar
    fixes the key order and puts ``say`` last.
    """

    _KEY = re.compile(r'"say"\s*:\s*"')

    def __init__(self) -> None:
        self._buf = ""
        self._start = -1
        self._pos = 0
        self.done = False

    def feed(self, piece: str) -> str:
        """Add generated text; return the speech characters it completed (may be "")."""
        self._buf += piece
        if self._start < 0:
            m = self._KEY.search(self._buf)
            if not m:
                return ""
            self._start = self._pos = m.end()
        out = []
        while not self.done and self._pos < len(self._buf):
            ch = self._buf[self._pos]
            if ch == '"':
                self.done = True
                break
            if ch == "\\":
                if self._pos + 1 >= len(self._buf):
                    break
                nxt = self._buf[self._pos + 1]
                if nxt == "u":
                    if self._pos + 6 > len(self._buf):
                        break
                    try:
                        out.append(json.loads(f'"{self._buf[self._pos : self._pos + 6]}"'))
                    except json.JSONDecodeError:
                        pass
                    self._pos += 6
                    continue
                out.append({"n": " ", "t": " ", "r": " "}.get(nxt, nxt))
                self._pos += 2
                continue
            out.append(ch)
            self._pos += 1
        return "".join(out)


def as_grammar_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History in the JSON shape the grammar path's model produces; tool results as user text."""
    out: list[dict[str, Any]] = []
    for m in history:
        if m["role"] == "assistant":
            if m.get("raw"):  # exactly what was generated: the KV cache reuses it token for token
                out.append({"role": "assistant", "content": m["raw"]})
                continue
            if m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                reply = {"call": {"tool": fn["name"], "arguments": fn["arguments"]}}
                if m.get("content"):  # a call without follow-up speaks in the same reply
                    reply["say"] = m["content"]
            else:
                reply = {"call": {"tool": NO_TOOL}, "say": m["content"]}
            out.append({"role": "assistant", "content": json.dumps(reply)})
        elif m["role"] == "tool":
            line = f"Result of {m['name']}: {m['content']}"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("Result of "):
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + line}
            else:
                out.append({"role": "user", "content": line})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out
