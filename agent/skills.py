"""Skills: typed Python functions the model can call as tools.

A skill is a plain function in a ``skills/*.py`` file marked with :func:`skill`. Its name,
description (the docstring's first paragraph) and JSON schema come from the signature:
``Literal[...]`` becomes an ``enum``, ``Annotated[float, Field(ge=.., le=..)]`` becomes
``minimum``/``maximum``, and ``Field(description=...)`` or the docstring's ``Args:`` section
gives each parameter's description (put units there: degrees, seconds). A first parameter
annotated :class:`SkillContext` receives the robot and clock and is left out of the schema.

Marking does not register anything: :class:`SkillRegistry` loads the files the config names
and collects the marked functions. Arguments are validated with pydantic before the call; a
validation error, an unknown tool, a timeout or an exception in the skill becomes a failed
:class:`ToolOutcome` whose message the model sees — the conversation goes on.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import inspect
import logging
import sys
import threading
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from agent.skill_args import clamp_args, doc_params, strip_titles, validation_message

if TYPE_CHECKING:
    from hardware.robot import Robot
    from hardware.vision import Vision

log = logging.getLogger(__name__)

BUILTIN_SKILLS = Path(__file__).resolve().parent.parent / "skills"
_MARK = "__bolt_skill__"


@dataclass
class SkillContext:
    """What a skill may touch: the robot body and the wall clock.

    Attributes:
        robot: The robot facade (joints, animations, stop).
        now: Returns the current local time (injected so tests control it).
        shutdown: Set when the agent stops; long-running (background) skills wait on it
            instead of sleeping so they end promptly.
        scene: The vision service (latest scene, describe now), or None without a camera.
    """

    robot: Robot
    now: Callable[[], datetime] = datetime.now
    shutdown: threading.Event = field(default_factory=threading.Event)
    scene: Vision | None = None


@dataclass(frozen=True)
class _Marker:
    name: str | None
    background: bool
    clamp: bool
    keywords: tuple[str, ...] = ()


def skill(fn: Callable | None = None, *, name: str | None = None, background: bool = False,
          clamp: bool = False, keywords: tuple[str, ...] | list[str] = ()) -> Any:
    """Mark a function as a skill (usable bare, ``@skill``, or with options, ``@skill(clamp=True)``).

    Args:
        fn: The function being decorated.
        name: Tool name; defaults to the function's name.
        background: The skill runs asynchronously (returns at once; result arrives later).
        clamp: Numbers outside a parameter's ``ge``/``le`` range are clamped instead of rejected.
        keywords: Words a user says when they want this skill ("freeze" for stop); they bias
            ASR and the tool choice of small models.

    Returns:
        The same function, with a marker attribute the registry looks for.
    """

    def mark(f: Callable) -> Callable:
        setattr(f, _MARK, _Marker(name, background, clamp, tuple(w.lower() for w in keywords)))
        return f

    return mark(fn) if fn is not None else mark


class SkillError(Exception):
    """A skill could not be loaded (bad signature) or registered (duplicate name)."""


@dataclass(frozen=True)
class ToolOutcome:
    """Result of one tool call: ``ok`` with the skill's return value, or a message for the model."""

    ok: bool
    result: Any


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

    def tool_schema(self) -> dict[str, Any]:
        """OpenAI-style tool definition ``{"type": "function", "function": {...}}``."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def build_skill(fn: Callable, source: str = "") -> Skill:
    """Turn a marked function into a :class:`Skill` (schema from its signature).

    Raises:
        SkillError: a parameter lacks a type annotation or uses ``*args``/``**kwargs``.
    """
    marker: _Marker = getattr(fn, _MARK, _Marker(None, False, False))
    hints = typing.get_type_hints(fn, include_extras=True)
    doc = inspect.getdoc(fn) or ""
    description = doc.split("\n\n")[0].replace("\n", " ").strip() or fn.__name__.replace("_", " ")
    param_docs = doc_params(doc)
    fields: dict[str, Any] = {}
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
        default = ... if param.default is inspect.Parameter.empty else param.default
        finfo = FieldInfo.from_annotated_attribute(ann, default)
        if finfo.description is None and pname in param_docs:
            finfo.description = param_docs[pname]
        fields[pname] = (finfo.annotation, finfo)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    params = strip_titles(model.model_json_schema())
    params.pop("additionalProperties", None)
    params.setdefault("properties", {})
    return Skill(name=marker.name or fn.__name__, description=description, fn=fn, args_model=model,
                 parameters=params, source=source, background=marker.background, clamp=marker.clamp,
                 wants_context=wants_context, keywords=marker.keywords)


@dataclass
class SkillRegistry:
    """The skills offered to the model, by name.

    Attributes:
        timeout_s: Longest a foreground skill may run before its call fails, s.
        load_errors: One message per skill file or function that failed to load.
    """

    timeout_s: float = 10.0
    skills: dict[str, Skill] = field(default_factory=dict)
    load_errors: list[str] = field(default_factory=list)
    _pool: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="skill"), repr=False)

    def register(self, fn: Callable, source: str = "") -> Skill:
        """Register one function (marked or not) and return its :class:`Skill`.

        Raises:
            SkillError: bad signature, or a skill of that name exists already.
        """
        sk = build_skill(fn, source or _where(fn))
        if sk.name in self.skills:
            raise SkillError(f"{sk.source}: skill {sk.name!r} already defined at {self.skills[sk.name].source}")
        self.skills[sk.name] = sk
        return sk

    def load_file(self, path: Path) -> list[Skill]:
        """Import one skill script and register its marked functions.

        A file that fails to import, or a function that fails to register, is recorded in
        :attr:`load_errors` (with path and line) and skipped; nothing is raised.
        """
        mod_name = f"bolt_skills_{abs(hash(str(path.resolve())))}_{path.stem}"
        try:
            spec = importlib.util.spec_from_file_location(mod_name, path)
            if spec is None or spec.loader is None:
                raise ImportError("not a Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        except Exception as e:  # a user's script may raise anything at import
            sys.modules.pop(mod_name, None)
            line = _error_line(e, path)
            msg = f"{path}:{line}: skill file skipped: {type(e).__name__}: {e}"
            log.error(msg)
            self.load_errors.append(msg)
            return []
        loaded = []
        for obj in vars(module).values():
            if callable(obj) and hasattr(obj, _MARK) and getattr(obj, "__module__", None) == mod_name:
                try:
                    loaded.append(self.register(obj, f"{path}:{obj.__code__.co_firstlineno}"))
                except SkillError as e:  # message already names path:line
                    msg = f"{e}; skipped"
                    log.error(msg)
                    self.load_errors.append(msg)
                except (TypeError, ValueError) as e:  # e.g. an annotation pydantic cannot handle
                    msg = f"{path}:{obj.__code__.co_firstlineno}: skill {obj.__name__} skipped: {e}"
                    log.error(msg)
                    self.load_errors.append(msg)
        return loaded

    def load_folder(self, folder: Path) -> list[Skill]:
        """Load every ``*.py`` (not starting with ``_``) in a folder, sorted by name."""
        if not folder.is_dir():
            msg = f"{folder}: skills folder not found; skipped"
            log.warning(msg)
            self.load_errors.append(msg)
            return []
        out = []
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith("_"):
                out.extend(self.load_file(path))
        return out

    def restrict(self, names: list[str]) -> None:
        """Keep only the named skills (config ``skills.enabled``); unknown names are reported."""
        if not names:
            return
        for n in names:
            if n not in self.skills:
                self.load_errors.append(f"skills.enabled names {n!r}, which no skill file defines")
        self.skills = {n: s for n, s in self.skills.items() if n in names}

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self.skills)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """All tools as OpenAI-style definitions, for the chat template."""
        return [s.tool_schema() for s in self.skills.values()]

    def call(self, name: str, arguments: Any, ctx: SkillContext,
             on_background_done: Callable[[ToolOutcome], None] | None = None) -> ToolOutcome:
        """Validate the arguments and run a skill; never raises.

        Args:
            name: Tool name from the model.
            arguments: Parsed arguments (expected: a dict).
            ctx: Context handed to skills that take one.

        Returns:
            ``ToolOutcome(ok=True, result)`` with the skill's return value (clamping notes
            added when a value was clamped), or ``ok=False`` with a message for the model:
            unknown tool (lists the valid ones), invalid arguments (names the unit), timeout,
            or the skill's exception. A background skill returns at once with
            ``{"status": "started"}``; its real outcome goes to ``on_background_done`` from a
            worker thread when it finishes (never a timeout: background work may be long).
        """
        sk = self.skills.get(name)
        if sk is None:
            return ToolOutcome(False, f"unknown tool {name!r}; valid tools: {', '.join(self.skills) or 'none'}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return ToolOutcome(False, f"arguments for {name} must be an object, got {type(arguments).__name__}")
        notes: list[str] = []
        if sk.clamp:
            arguments, notes = clamp_args(sk, arguments)
        try:
            parsed = sk.args_model.model_validate(arguments)
        except ValidationError as e:
            return ToolOutcome(False, validation_message(sk, e))
        kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        call = (lambda: sk.fn(ctx, **kwargs)) if sk.wants_context else (lambda: sk.fn(**kwargs))
        if sk.background:
            return self._start_background(sk, call, on_background_done)
        fut = self._pool.submit(call)
        try:
            result = fut.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            return ToolOutcome(False, f"{name} did not finish within {self.timeout_s:g} s")
        except Exception as e:  # the skill's own failure goes back to the model
            log.warning("skill %s raised %s: %s", name, type(e).__name__, e)
            return ToolOutcome(False, f"{name} failed: {type(e).__name__}: {e}")
        if dataclasses.is_dataclass(result) and not isinstance(result, type):
            result = dataclasses.asdict(result)
        if notes:
            result = {"result": result, "note": "; ".join(notes)}
        return ToolOutcome(True, result)

    def _start_background(self, sk: Skill, call: Callable[[], Any],
                          done: Callable[[ToolOutcome], None] | None) -> ToolOutcome:
        def run() -> None:
            try:
                outcome = ToolOutcome(True, call())
            except Exception as e:  # reported to the model like any failed call
                log.warning("background skill %s raised %s: %s", sk.name, type(e).__name__, e)
                outcome = ToolOutcome(False, f"{sk.name} failed: {type(e).__name__}: {e}")
            if done is not None:
                done(outcome)

        threading.Thread(target=run, name=f"bg-{sk.name}", daemon=True).start()
        return ToolOutcome(True, {"status": "started",
                                  "note": "Okay, it is running. I will tell you when it is done."})


def _where(fn: Callable) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{fn.__code__.co_firstlineno}"
    except (TypeError, AttributeError):
        return repr(fn)


def _error_line(e: BaseException, path: Path) -> int:
    if isinstance(e, SyntaxError) and e.lineno:
        return e.lineno
    line = 0
    for fr in traceback.extract_tb(e.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            line = fr.lineno or 0
    return line


def load_registry(folders: list[Path], include_builtin: bool = True, enabled: list[str] | None = None,
                  timeout_s: float = 10.0, entry_points: bool = True) -> SkillRegistry:
    """Build the registry the config asks for: packaged ``skills/``, then ``folders``, then
    installed packages' ``bolt_agent.skills`` entry points."""
    from agent.skill_authoring import load_entry_points

    reg = SkillRegistry(timeout_s=timeout_s)
    if include_builtin:
        reg.load_folder(BUILTIN_SKILLS)
    for f in folders:
        reg.load_folder(Path(f))
    if entry_points:
        load_entry_points(reg)
    reg.restrict(enabled or [])
    return reg
