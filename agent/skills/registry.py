"""The registry: the skills offered to the model, by name, and how a call runs.

:class:`SkillRegistry` holds the built skills, gives the chat template their tool schemas,
and runs a call: unknown tool → an error listing the valid ones; arguments validated with
pydantic (clamped first for ``clamp=True`` skills); a foreground skill runs on a daemon
thread of its own with a timeout (``[skills] timeout_s``: past it the call fails and the
thread is left to finish; while :data:`STUCK_MAX` calls of one skill are stuck, new ones are
refused at once); a background skill runs on its own thread and reports through a callback.
Results are made JSON data and cut to :data:`MAX_RESULT_CHARS` (:func:`plain_result`). A
validation error, an unknown tool, a timeout or an exception in the skill (even
``sys.exit``) becomes a failed :class:`ToolOutcome` whose message the model sees —
:meth:`SkillRegistry.call` never raises.

The registry also holds the name lists that :class:`~agent.skills.skill.Choices`
parameters draw their enums from (the robot's animations, a Reachy Mini's dances and
emotions); handing it a new list rebuilds the skills that use it. It knows the body's joints:
a skill that ``needs`` a joint the body lacks, or whose choices are an empty list (no
emotions downloaded), or a device the robot is not configured with (no camera), is left out
of the tool list (:attr:`SkillRegistry.left_out` says why). Where skills come from is the
loader's concern (``loader.py``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import inspect
import json
import logging
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent.skills.args import clamp_args, spoken_validation, validation_message
from agent.skills.skill import DEVICES, Skill, SkillContext, SkillError, ToolOutcome, build_skill

log = logging.getLogger(__name__)


STUCK_MAX = 2
"""Calls of one skill still running past their timeout; while this many are stuck, new calls
of that skill are refused at once (a skill that hangs on every call cannot pile up threads)."""
MAX_RESULT_CHARS = 2000
"""Longest tool result handed to the model, characters of its JSON text (~500 tokens: a
quarter of SmolLM2's 2048-token context); a longer one is cut with a note."""


@dataclass
class SkillRegistry:
    """The skills offered to the model, by name.

    Attributes:
        timeout_s: Longest a foreground skill may run before its call fails, s.
        skills: The skills by tool name, in registration order.
        load_errors: One message per skill file or function that failed to load.
        choices: Name lists for :class:`~agent.skills.skill.Choices` parameters, by key
            (``"animations"``); set them with :meth:`set_choices` or ``load_registry``.
        joints: The body's joints; None offers every skill whatever it ``needs``.
        left_out: Skills not offered on this body, with the reason and where the skill is
            defined (name → "reason (path:line)": two files may define a skill of one name).

    """

    timeout_s: float = 10.0
    skills: dict[str, Skill] = field(default_factory=dict)
    load_errors: list[str] = field(default_factory=list)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    joints: frozenset[str] | None = None
    devices: frozenset[str] | None = None
    """The devices of :data:`~agent.skills.skill.DEVICES` this robot is configured with (its
    camera); None offers every skill whatever devices it ``needs``."""
    left_out: dict[str, str] = field(default_factory=dict)
    absent: dict[str, tuple[Skill, str]] = field(default_factory=dict)
    """Skills left out for a device the robot is not configured with, by name, with what the robot
    says instead ("I have no camera, so I cannot see.": :data:`~agent.skills.skill.DEVICES`)."""
    stuck: dict[str, int] = field(default_factory=dict)
    """Calls still running past their timeout, by skill name."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def register(self, fn: Callable, source: str = "") -> Skill | None:
        """Register one function (marked or not) and return its :class:`Skill`.

        Args:
            fn: The skill function.
            source: ``path:line`` it was defined at; found from the function when empty.

        Returns:
            The built skill (its enums drawn from :attr:`choices`), or None when it does not
            apply to this body (recorded in :attr:`left_out`).

        Raises:
            SkillError: bad signature, or a skill of that name exists already.

        """
        sk = build_skill(fn, source or _where(fn), self.choices)
        why = self._not_offered(sk)
        if why:
            self.left_out[sk.name] = f"{why} ({sk.source})"
            if self.devices is not None and (
                gone := [d for d in sk.needs if d in DEVICES and d not in self.devices]
            ):
                self.absent[sk.name] = (sk, DEVICES[gone[0]])
            log.info("skill %s left out: %s", sk.name, self.left_out[sk.name])
            return None
        if sk.name in self.skills:
            raise SkillError(
                f"{sk.source}: skill {sk.name!r} already defined at {self.skills[sk.name].source}"
            )
        self.skills[sk.name] = sk
        return sk

    def _not_offered(self, sk: Skill) -> str:
        """Why a skill is not offered on this body ('' when it is)."""
        if self.joints is not None:
            missing = [j for j in sk.needs if j not in DEVICES and j not in self.joints]
            if missing:
                return f"this body has no {', '.join(missing)}"
        if self.devices is not None:
            absent = [d for d in sk.needs if d in DEVICES and d not in self.devices]
            if absent:
                return f"no {' or '.join(d.replace('_', ' ') for d in absent)} is configured"
        empty = [k for k in sk.choices if k in self.choices and not self.choices[k]]
        if empty:
            return f"no {', '.join(empty)} installed"
        return ""

    def set_choices(self, key: str, names: Iterable[str]) -> None:
        """Hand the registry a list of names and rebuild the skills whose enums use it.

        Args:
            key: The :class:`~agent.skills.skill.Choices` key (``"animations"``).
            names: The names (``robot.animations``); the enum is sorted, duplicates dropped.

        """
        self.choices[key] = tuple(names)
        for name, sk in self.skills.items():
            if key in sk.choices:
                self.skills[name] = build_skill(sk.fn, sk.source, self.choices)

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

    def abilities(self) -> list[str]:
        """What the robot can do: each skill's :attr:`Skill.ability`, once, in registration order."""
        return list(dict.fromkeys(s.ability for s in self.skills.values() if s.ability))

    def tool_schemas(self) -> list[dict[str, Any]]:
        """All tools as OpenAI-style definitions, for the chat template."""
        return [s.tool_schema() for s in self.skills.values()]

    def fits(self, name: str, arguments: Any) -> bool:
        """Whether a call names a skill and its arguments validate as written (nothing clamped).

        Args:
            name: Tool name from the model.
            arguments: Parsed arguments (a dict; None counts as none given).

        Returns:
            True when the skill exists and its argument model accepts ``arguments`` unchanged by
            clamping; never raises.
        """
        sk = self.skills.get(name)
        if sk is None or not isinstance(arguments, dict | None):
            return False
        arguments = arguments or {}
        if sk.clamp and clamp_args(sk, arguments, None)[1]:
            return False  # a value out of range: the call is not what the skill asks for
        try:
            sk.args_model.model_validate(arguments)
        except ValidationError:
            return False
        return True

    def call(
        self,
        name: str,
        arguments: Any,
        ctx: SkillContext,
        on_background_done: Callable[[ToolOutcome], None] | None = None,
        asked: Collection[str] | None = None,
    ) -> ToolOutcome:
        """Validate the arguments and run a skill; never raises.

        Args:
            name: Tool name from the model.
            arguments: Parsed arguments (expected: a dict).
            ctx: Context handed to skills that take one.
            on_background_done: Receives a background skill's real outcome, from a worker thread.
            asked: The arguments whose values the person said (the conversation's argument
                prior knows); only their clamps are told to the person. None: all of them.

        Returns:
            ``ToolOutcome(ok=True, result)`` with the skill's return value (clamping notes
            added when a value was clamped, and the sentences a person hears about it in
            ``told``), or ``ok=False`` with a message for the model:
            unknown tool (lists the valid ones), invalid arguments (names the unit), timeout,
            or the skill's exception. A background skill returns at once with
            ``{"status": "started"}``; its real outcome goes to ``on_background_done`` from a
            worker thread when it finishes (never a timeout: background work may be long). A
            background skill written as a generator returns what it yields first instead of
            "started" (:meth:`_start_in_two_steps`). A call refused before it starts
            (``ok=False``) never calls ``on_background_done``.

        """
        sk = self.skills.get(name)
        if sk is None:
            valid = ", ".join(self.skills) or "none"
            return ToolOutcome(False, f"unknown tool {name!r}; valid tools: {valid}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            got = type(arguments).__name__
            return ToolOutcome(False, f"arguments for {name} must be an object, got {got}")
        notes: list[str] = []
        said: list[str] = []
        if sk.clamp:
            arguments, notes, said = clamp_args(sk, arguments, asked)
        try:
            parsed = sk.args_model.model_validate(arguments)
        except ValidationError as e:
            return ToolOutcome(False, validation_message(sk, e), raised=spoken_validation(sk, e))
        kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        call = (lambda: sk.fn(ctx, **kwargs)) if sk.wants_context else (lambda: sk.fn(**kwargs))
        limit = max(sk.timeout_s or 0.0, self.timeout_s)
        if sk.background and inspect.isgeneratorfunction(sk.fn):
            return self._start_in_two_steps(sk, call, on_background_done, " ".join(said), limit)
        if sk.background:
            return self._start_background(sk, call, on_background_done, " ".join(said))
        with self._lock:
            stuck = self.stuck.get(name, 0)
        if stuck >= STUCK_MAX:
            log.warning("skill %s not started: %d earlier calls are still stuck", name, stuck)
            return ToolOutcome(
                False, f"{name} is still stuck in {stuck} earlier calls (over {limit:g} s); not started again"
            )
        fut = _start(call, f"skill-{name}")
        try:
            result = fut.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            self._stuck(name, fut, limit)
            return ToolOutcome(False, f"{name} did not finish within {limit:g} s")
        except BaseException as e:  # noqa: BLE001 - the skill's own failure (even sys.exit) goes to the model
            log.warning("skill %s raised %s: %s", name, type(e).__name__, e)
            return ToolOutcome(False, f"{name} failed: {type(e).__name__}: {e}", raised=str(e))
        if dataclasses.is_dataclass(result) and not isinstance(result, type):
            result = dataclasses.asdict(result)
        result = plain_result(name, result)
        if notes:
            result = {"result": result, "note": "; ".join(notes)}
        return ToolOutcome(True, result, told=" ".join(said))

    def _stuck(self, name: str, fut: concurrent.futures.Future, limit: float) -> None:
        """Count a call that outlived its timeout until its thread ends (a daemon: exit never waits)."""
        with self._lock:
            self.stuck[name] = self.stuck.get(name, 0) + 1
        log.warning("skill %s did not finish within %g s; its thread is left running", name, limit)

        def unstuck(_: concurrent.futures.Future) -> None:
            with self._lock:
                self.stuck[name] -= 1
            log.info("skill %s finished after its timeout; its result was dropped", name)

        fut.add_done_callback(unstuck)

    def _start_background(
        self, sk: Skill, call: Callable[[], Any], done: Callable[[ToolOutcome], None] | None, told: str
    ) -> ToolOutcome:
        def run() -> None:
            try:
                outcome = ToolOutcome(True, plain_result(sk.name, call()))
            except BaseException as e:  # noqa: BLE001 - reported to the model like any failed call
                log.warning("background skill %s raised %s: %s", sk.name, type(e).__name__, e)
                outcome = ToolOutcome(False, f"{sk.name} failed: {type(e).__name__}: {e}", raised=str(e))
            if done is not None:
                done(outcome)

        threading.Thread(target=run, name=f"bg-{sk.name}", daemon=True).start()
        return ToolOutcome(
            True,
            {"status": "started", "note": "Okay, it is running. I will tell you when it is done."},
            told=told,
        )

    def _start_in_two_steps(
        self,
        sk: Skill,
        call: Callable[[], Any],
        done: Callable[[ToolOutcome], None] | None,
        told: str,
        limit: float,
    ) -> ToolOutcome:
        """Run a background skill written as a generator: what it yields first is the call's result.

        The generator runs on its own thread. Its first ``yield`` hands the caller the immediate
        result (``set_timer``'s "Ten-minute tea timer."), written once the work has really
        started; its return value is the real outcome, handed to ``done`` later. An exception
        before the first ``yield`` fails the call (``done`` is never called, as for a call
        refused before it starts); one after it is the background outcome. A generator that
        returns without yielding has finished at once: its value is the result and ``done``
        gets None (nothing more to say).
        """
        first: concurrent.futures.Future = concurrent.futures.Future()
        abandoned = threading.Event()  # the caller stopped waiting: the call failed, report nothing

        def report(outcome: ToolOutcome) -> None:
            if done is not None and not abandoned.is_set():
                done(outcome)

        def run() -> None:
            first.set_running_or_notify_cancel()
            try:
                gen = call()
                started = next(gen)
            except StopIteration as stop:  # finished without a word to say later
                first.set_result(stop.value)
                report(ToolOutcome(True, None))
                return
            except BaseException as e:  # noqa: BLE001 - refused before it started: the caller says why
                first.set_exception(e)
                return
            first.set_result(started)
            try:
                while True:
                    next(gen)  # a later yield says nothing: the generator goes on
            except StopIteration as stop:
                outcome = ToolOutcome(True, plain_result(sk.name, stop.value))
            except BaseException as e:  # noqa: BLE001 - reported to the model like any failed call
                log.warning("background skill %s raised %s: %s", sk.name, type(e).__name__, e)
                outcome = ToolOutcome(False, f"{sk.name} failed: {type(e).__name__}: {e}", raised=str(e))
            report(outcome)

        threading.Thread(target=run, name=f"bg-{sk.name}", daemon=True).start()
        try:
            value = first.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            abandoned.set()
            return ToolOutcome(False, f"{sk.name} did not start within {limit:g} s")
        except BaseException as e:  # noqa: BLE001 - the skill's own refusal, written for people
            log.info("skill %s refused: %s: %s", sk.name, type(e).__name__, e)
            return ToolOutcome(False, f"{sk.name} failed: {type(e).__name__}: {e}", raised=str(e))
        return ToolOutcome(True, plain_result(sk.name, value), told=told)


def _start(call: Callable[[], Any], name: str) -> concurrent.futures.Future:
    """Run ``call`` on a new daemon thread; its outcome comes back through the future.

    A skill that never returns holds only its own thread (a shared pool would be used up by a
    few hung calls, and its threads are joined forever at exit).
    """
    fut: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(call())
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            fut.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut


def plain_result(name: str, result: Any) -> Any:
    """A skill's return value as JSON data the model can read, cut to :data:`MAX_RESULT_CHARS`.

    Values JSON cannot hold become their ``str()`` (a set, a path, an object); a result that
    cannot be rendered at all becomes a short description. A result whose JSON text is longer
    than the limit is cut: ``{"result": first characters, "note": "cut from N characters"}``,
    with one log line.

    Args:
        name: The skill, for the log line.
        result: What the skill returned.
    """
    try:
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        value = result if isinstance(result, str) else json.loads(text)
    except Exception as e:  # noqa: BLE001 - any failure to render it, even a __str__ that raises
        log.warning("skill %s returned a %s that is not JSON data (%s)", name, type(result).__name__, e)
        text = value = f"<{type(result).__name__} that cannot be shown: {e}>"
    if len(text) <= MAX_RESULT_CHARS:
        return value
    log.warning("skill %s returned %d characters; cut to %d", name, len(text), MAX_RESULT_CHARS)
    return {
        "result": text[:MAX_RESULT_CHARS],
        "note": f"cut: the result had {len(text)} characters, only the first {MAX_RESULT_CHARS} are shown",
    }


def _where(fn: Callable) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{fn.__code__.co_firstlineno}"
    except (TypeError, AttributeError):
        return repr(fn)
