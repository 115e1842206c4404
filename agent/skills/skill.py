"""What a skill is: the ``@skill`` marker, the context a skill receives, and its schema.

A skill is a plain function marked with :func:`skill`. :func:`build_skill` turns it into a
:class:`Skill`: the name, the description (the docstring's first paragraph) and the JSON
schema of the arguments come from the signature. ``Literal[...]`` becomes an ``enum``,
``Annotated[float, Field(ge=.., le=..)]`` becomes ``minimum``/``maximum``, and
``Field(description=...)`` or the docstring's ``Args:`` section gives each parameter's
description (put units there: degrees, seconds). A first parameter annotated
:class:`SkillContext` receives the robot, clock and camera and is left out of the schema.

An enum that depends on the robot (its animation names) is declared with
``Annotated[str, Choices("animations", default=...)]``: the names are handed to the
registry (``load_registry(..., animations=robot.animations)``) and become a ``Literal``
when the skill is built, so the schema lists exactly what this robot has.

Marking registers nothing (no import side effects); the registry (``registry.py``) and
the loader (``loader.py``) decide what the model is offered. This module is the bottom of
the ``agent.skills`` package: it imports none of its siblings.
"""

from __future__ import annotations

import inspect
import re
import threading
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo

if TYPE_CHECKING:
    from agent.state.memory import Memory
    from agent.state.timers import TimerBook
    from agent.state.volume import Volume
    from hardware.perception.watcher import Vision
    from hardware.robot import Robot

_MARK = "__bolt_skill__"


GENERIC_NAME_WORDS = frozenset({"get", "set", "make", "do"})
"""Words of a skill's name that say nothing of the skill (``get_time``, ``set_timer``): the tool
prior does not wait for them to be said, its logit bias lets the words after them decide, and
``skills new`` leaves them out of a template's keywords (``get_battery`` → "battery")."""


DEVICES = {
    "camera": "I have no camera, so I cannot see.",
    "microphone_array": "I have no microphone array, so I cannot tell where a sound comes from.",
}
"""Devices a skill may name in ``@skill(needs=...)`` besides the body's joints, each with what the
robot says when asked for a skill it is not offered for want of it. On a robot configured
without one the skill is not offered (``describe_scene`` and ``look_at`` need the camera). Any
other name in ``needs`` is a joint."""


@dataclass
class SkillContext:
    """What a skill may touch: the robot body and the wall clock.

    Attributes:
        robot: The robot facade (joints, animations, stop).
        now: Returns the current local time (injected so tests control it).
        shutdown: Set when the agent stops; long-running (background) skills wait on it
            instead of sleeping so they end promptly.
        scene: The vision service (latest scene, describe now), or None without a camera.
        narrator: The vision-language layer (``describe_now(timeout_s)`` returns a description
            with ``.text``; :class:`agent.vision.narrator.SceneNarrator`), or None when
            ``[vision] describer = "opencv"`` or it could not start.
        timers: The running timers (:class:`agent.state.timers.TimerBook`; the pipeline always
            hands one over, kept across restarts when a state store is on), or None in a bare
            context: ``set_timer`` then only waits, and ``cancel_timer`` finds nothing to cancel.
        abilities: What the robot can do, one phrase per skill offered, to say after "I can"
            (:meth:`agent.skills.SkillRegistry.abilities`).
        memory: What the user asked the robot to remember (:class:`agent.state.memory.Memory`;
            the pipeline always hands one over, kept across restarts when a state store is on),
            or None in a bare context: ``remember`` then keeps nothing.
        robot_name: The robot's own name (``[agent] name``), said when asked.
        volume: The speaking volume (:class:`agent.state.volume.Volume`) the speaker scales its
            samples by (the pipeline always hands one over, kept across restarts when a state
            store is on), or None in a bare context: the volume skills then say they cannot.

    """

    robot: Robot
    now: Callable[[], datetime] = datetime.now
    shutdown: threading.Event = field(default_factory=threading.Event)
    scene: Vision | None = None
    narrator: Any = None
    timers: TimerBook | None = None
    abilities: list[str] = field(default_factory=list)
    memory: Memory | None = None
    robot_name: str = "Bolt"
    volume: Volume | None = None


@dataclass(frozen=True)
class Choices:
    """Parameter metadata: a string parameter whose enum is a list of names handed to the registry.

    Use as ``name: Annotated[str, Choices("animations", default=(...))]``. When the skill is
    built, the parameter becomes ``Literal[...]`` of the names the registry holds under
    ``key`` (sorted, duplicates dropped), or of ``default`` when it holds none; an empty
    list gives the single choice ``"none"``.

    Attributes:
        key: Which list of names (``"animations"``: the robot's animation names).
        default: Names used when the registry was handed no list under ``key``.

    """

    key: str
    default: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # accept any iterable of names; keep the marker hashable
        object.__setattr__(self, "default", tuple(self.default))


@dataclass(frozen=True)
class Clamped:
    """Parameter metadata: what a person hears when a ``clamp=True`` skill's value was clamped.

    Use as ``times: Annotated[int, Field(ge=1, le=5), Clamped(above="I can wave at most {limit}
    times in a row.")]``. ``{limit}`` is the bound the value was moved to and ``{value}`` the
    value asked for, both without a sign (a negative yaw is the other way, which the sentence
    names) and as few digits as they need. Without a sentence for a side the person hears one
    made from the parameter's description (:func:`agent.skills.args.said_clamp`). Not shown to
    the model: its schema keeps ``minimum``/``maximum``.

    Attributes:
        below: Said when the value was under the minimum ("" for the generic sentence).
        above: Said when the value was over the maximum ("" for the generic sentence).

    """

    below: str = ""
    above: str = ""


@dataclass(frozen=True)
class _Marker:
    name: str | None
    background: bool
    clamp: bool
    keywords: tuple[str, ...] = ()
    follow_up: bool = True
    preamble: str = ""
    needs: tuple[str, ...] = ()
    timeout_s: float | None = None
    side_effects: bool = True
    moves: bool | None = None
    ability: str | None = None
    as_written: bool = False
    from_words: Mapping[str, Callable[[str], Any]] | None = None


def skill(
    fn: Callable | None = None,
    *,
    name: str | None = None,
    background: bool = False,
    clamp: bool = False,
    keywords: tuple[str, ...] | list[str] = (),
    follow_up: bool = True,
    preamble: str = "",
    needs: tuple[str, ...] | list[str] = (),
    timeout_s: float | None = None,
    side_effects: bool = True,
    moves: bool | None = None,
    ability: str | None = None,
    as_written: bool = False,
    from_words: Mapping[str, Callable[[str], Any]] | None = None,
) -> Any:
    """Mark a function as a skill (usable bare, ``@skill``, or with options, ``@skill(clamp=True)``).

    Args:
        fn: The function being decorated.
        name: Tool name; defaults to the function's name.
        background: The skill runs asynchronously (returns at once; result arrives later).
        clamp: Numbers outside a parameter's ``ge``/``le`` range are clamped instead of rejected.
        keywords: Words a user says when they want this skill ("freeze" for stop); they bias
            ASR and the small-model profile's tool choice.
        follow_up: The result must be spoken ("get_time"). False for actions whose result only
            confirms them (wave, nod): the small-model profile then ends the turn after the
            call's round unless the user asked for more (a capable model always gets the round
            after its calls, and decides). Default True: a result is never silently dropped.
        preamble: Words the robot says the moment the model chooses this skill, before its
            result is read back ("Let me look." for a camera look): for a skill with follow-up
            that takes a while, so the user hears an answer at once. Empty: none. Grammar mode
            only: a native-format model writes its own words before a call.
        needs: Joints the body must have (``("right_arm",)`` for a wave, a Reachy Mini's
            antennas for its dances) and devices of :data:`DEVICES` (``("camera",)`` for a
            look): on a robot that lacks one the skill is left out of the tool list and of what
            the robot says it can do, so the model never sees what the body cannot do (``skills
            list`` and ``doctor`` say what was left out and why).
        timeout_s: Longest this skill may run, s, when it needs longer than ``[skills]
            timeout_s`` (a vision-language model's look); None = the registry's.
        side_effects: The skill changes something (moves the body, sets a timer). False for a
            skill that only reads (the clock, the camera's scene): a turn whose reply is prepared
            before the user's silence confirmed it (``[turn] confirm_ms``) runs it at once, so
            the answer that reads its result back is ready on release; a skill with side effects
            waits for the release and never runs when the user goes on. Default True: nothing is
            done before the user has finished.
        moves: The skill moves the body, so it fails while the emergency stop is latched, and
            the robot says why at once. None (default): it moves when it ``needs`` joints (a
            device alone moves nothing); ``play_animation`` needs none (an animation names its
            own joints) and says ``moves=True``.
        ability: What the robot says it can do with this skill, after "I can" ("tell the
            time"), when asked "what can you do?" (the ``abilities`` skill). None (default):
            the words of its name ("greet guest"); "": not said (``abilities`` itself).
        as_written: Its result is the whole answer, written for people, however long: it is
            said as written, with no model round to read it back (pipecat's ``run_llm=False``), in
            every profile: the ``abilities`` list, ``stop``, a timer's "Time is up: ...". Default
            False: the model reads the result and speaks.
        from_words: Arguments read from the user's words instead of written by a small model:
            parameter name → a function of what the user said returning its value
            (``get_time``'s ``{"place": place_in}``: "Tokyo" for "what time is it in Tokyo?",
            "" for "what time is it?"). With the small-model profile in grammar mode these
            parameters are left out of the reply grammar and the tools prompt, and the values
            are read from the words: small models copy free text badly. A capable model sees
            and writes every parameter. None (default): none.

    Returns:
        The same function, with a marker attribute the loader looks for.

    """

    def mark(f: Callable) -> Callable:
        setattr(
            f,
            _MARK,
            _Marker(
                name,
                background,
                clamp,
                tuple(w.lower() for w in keywords),
                follow_up,
                preamble,
                tuple(needs),
                timeout_s,
                side_effects,
                any(n not in DEVICES for n in needs) if moves is None else moves,
                ability.strip() if ability is not None else None,
                as_written,
                dict(from_words or {}),
            ),
        )
        return f

    return mark(fn) if fn is not None else mark


def is_skill(obj: object) -> bool:
    """Tell whether ``obj`` is a function marked with :func:`skill`."""
    return callable(obj) and hasattr(obj, _MARK)


class SkillError(Exception):
    """A skill could not be loaded (bad signature) or registered (duplicate name)."""


@dataclass(frozen=True)
class ToolOutcome:
    """Result of one tool call: ``ok`` with the skill's return value, or a message for the model.

    Attributes:
        ok: The skill ran and returned.
        result: Its return value, or the failure as the model reads it
            (``"describe_scene failed: RuntimeError: I have no camera, so I cannot see"``).
        raised: The message of the exception the skill itself raised ("" otherwise): skills
            write it for people ("I have no camera, so I cannot see"), so a reply that asked
            for data says it when the model does not.
        told: Words a person hears besides the result of a call that worked, where it did not
            do quite what was asked: a value clamped into range ("I can wave at most 5 times
            in a row."); said like a data result, once ("" for none).
    """

    ok: bool
    result: Any
    raised: str = ""
    told: str = ""


@dataclass
class Skill:
    """A loaded skill.

    Attributes:
        name: Tool name shown to the model.
        description: First paragraph of the docstring.
        fn: The function.
        args_model: pydantic model validating the arguments.
        parameters: JSON schema (``type: object``) of the arguments.
        source: ``path:line`` the skill was defined at.
        background: Runs asynchronously.
        clamp: Out-of-range numbers are clamped rather than rejected.
        wants_context: The function's first parameter takes a :class:`SkillContext`.
        keywords: Words users say for this skill (lower case).
        follow_up: Its result needs a spoken follow-up round (see :func:`skill`).
        preamble: Said as soon as the model chooses it, before the result (see :func:`skill`).
        choices: Keys of the :class:`Choices` lists its schema was built from.
        needs: Joints and devices the body must have for it to be offered (see :func:`skill`).
        timeout_s: Its own time limit, s (None: the registry's; see :func:`skill`).
        side_effects: It changes something; False: it only reads and may run before a prepared
            turn is confirmed (see :func:`skill`).
        moves: It moves the body: it fails while the emergency stop is latched (see :func:`skill`).
        clamped: Per parameter, the sentences said when its value was clamped (:class:`Clamped`).
        ability: What the robot can do with it, said after "I can" ("": not said; see :func:`skill`).
        as_written: Its result is said as written, without a model round (see :func:`skill`).
        from_words: Reads its free-text arguments from the user's words, for small models (see
            :func:`skill`).

    """

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    parameters: dict[str, Any]
    source: str
    background: bool = False
    clamp: bool = False
    wants_context: bool = False
    keywords: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    follow_up: bool = True
    preamble: str = ""
    needs: tuple[str, ...] = ()
    timeout_s: float | None = None
    side_effects: bool = True
    moves: bool = False
    clamped: dict[str, Clamped] = field(default_factory=dict)
    ability: str = ""
    as_written: bool = False
    from_words: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)

    @property
    def grammar_parameters(self) -> dict[str, Any]:
        """The JSON schema a small model writes in grammar mode.

        :attr:`parameters` without those read from the user's words (:attr:`from_words`).
        """
        if not self.from_words:
            return self.parameters
        props = {k: v for k, v in self.parameters.get("properties", {}).items() if k not in self.from_words}
        out = {**self.parameters, "properties": props}
        required = [k for k in self.parameters.get("required", []) if k not in self.from_words]
        if required:
            out["required"] = required
        else:
            out.pop("required", None)
        return out

    def tool_schema(self) -> dict[str, Any]:
        """OpenAI-style tool definition ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def doc_params(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section (name → text)."""
    out: dict[str, str] = {}
    m = re.search(r"^\s*Args:\s*\n(.*?)(?:\n\s*\n|\Z)", doc, re.S | re.M)
    if not m:
        return out
    for line in m.group(1).splitlines():
        pm = re.match(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.+)", line)
        if pm:
            out[pm.group(1)] = pm.group(2).strip()
    return out


def strip_titles(schema: Any) -> Any:
    """Return a JSON schema without pydantic's ``title`` keys (tokens the model does not need)."""
    if isinstance(schema, dict):
        return {k: strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def _resolve_choices(ann: Any, choices: Mapping[str, Iterable[str]], where: str) -> tuple[Any, str | None]:
    """Turn ``Annotated[str, Choices(key), ...]`` into ``Literal[names]`` (other metadata kept)."""
    if typing.get_origin(ann) is not Annotated:
        return ann, None
    marks = [m for m in ann.__metadata__ if isinstance(m, Choices)]
    if not marks:
        return ann, None
    if len(marks) > 1 or ann.__origin__ is not str:
        raise SkillError(f"{where}: Choices needs one marker on a str: Annotated[str, Choices(key)]")
    mark = marks[0]
    names = tuple(sorted(set(choices.get(mark.key, mark.default)))) or ("none",)
    lit = Literal[names]  # type: ignore[valid-type]  # built from the names the registry holds
    rest = tuple(m for m in ann.__metadata__ if not isinstance(m, Choices))
    return (Annotated[(lit, *rest)] if rest else lit), mark.key


def _take_clamped(ann: Any) -> tuple[Any, Clamped | None]:
    """Take a :class:`Clamped` out of ``Annotated[...]`` metadata (pydantic never sees it)."""
    if typing.get_origin(ann) is not Annotated:
        return ann, None
    said = next((m for m in ann.__metadata__ if isinstance(m, Clamped)), None)
    if said is None:
        return ann, None
    rest = tuple(m for m in ann.__metadata__ if not isinstance(m, Clamped))
    return (Annotated[(ann.__origin__, *rest)] if rest else ann.__origin__), said


def build_skill(fn: Callable, source: str = "", choices: Mapping[str, Iterable[str]] | None = None) -> Skill:
    """Turn a marked function into a :class:`Skill` (schema from its signature).

    Args:
        fn: The function (marked with :func:`skill` or not; unmarked uses the defaults).
        source: ``path:line`` reported in errors and ``bolt-agent skills list``.
        choices: Name lists for parameters annotated with :class:`Choices`, by key.

    Returns:
        The skill, with its arguments model and JSON schema.

    Raises:
        SkillError: a parameter lacks a type annotation, uses ``*args``/``**kwargs``, or
            puts :class:`Choices` on something other than ``str``.

    """
    marker: _Marker = getattr(fn, _MARK, _Marker(None, False, False))
    hints = typing.get_type_hints(fn, include_extras=True)
    doc = inspect.getdoc(fn) or ""
    description = doc.split("\n\n")[0].replace("\n", " ").strip() or fn.__name__.replace("_", " ")
    param_docs = doc_params(doc)
    fields: dict[str, Any] = {}
    used: dict[str, str] = {}  # parameter -> Choices key
    clamped: dict[str, Clamped] = {}
    wants_context = False
    for i, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise SkillError(f"{source}: skill {fn.__name__}: *args/**kwargs are not allowed")
        ann = hints.get(pname)
        if i == 0 and ann is SkillContext:
            wants_context = True
            continue
        if ann is None:
            raise SkillError(f"{source}: skill {fn.__name__}: parameter {pname!r} needs a type annotation")
        ann, key = _resolve_choices(ann, choices or {}, f"{source}: skill {fn.__name__}: parameter {pname!r}")
        if key is not None:
            used[pname] = key
        ann, said = _take_clamped(ann)
        if said is not None:
            clamped[pname] = said
        default = ... if param.default is inspect.Parameter.empty else param.default
        finfo = FieldInfo.from_annotated_attribute(ann, default)
        if finfo.description is None and pname in param_docs:
            finfo.description = param_docs[pname]
        fields[pname] = (finfo.annotation, finfo)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    params = strip_titles(model.model_json_schema())
    params.pop("additionalProperties", None)
    params.setdefault("properties", {})
    for pname in used:  # one name gives pydantic's {"const": x}; keep it an enum like the others
        prop = params["properties"][pname]
        if "const" in prop:
            prop["enum"] = [prop.pop("const")]
    return Skill(
        name=marker.name or fn.__name__,
        description=description,
        fn=fn,
        args_model=model,
        parameters=params,
        source=source,
        background=marker.background,
        clamp=marker.clamp,
        wants_context=wants_context,
        keywords=marker.keywords,
        follow_up=marker.follow_up,
        preamble=marker.preamble,
        choices=tuple(dict.fromkeys(used.values())),
        needs=marker.needs,
        timeout_s=marker.timeout_s,
        side_effects=marker.side_effects,
        moves=bool(marker.moves),
        clamped=clamped,
        ability=(marker.name or fn.__name__).replace("_", " ") if marker.ability is None else marker.ability,
        as_written=marker.as_written,
        from_words=marker.from_words or {},
    )
