"""Help texts for people: the command docstrings' reST markup out, a plain word for each option's value.

The commands' docstrings are written for the code's readers (``--accuracy``, :func:`x`); shown by
``--help`` as they are, a user read "With ``--accuracy``: ..." and, from Typer's Rich layout, a
``<bool>`` beside every flag, ``<int range>`` beside numbers, and a ``[vision]`` section name
swallowed as Rich markup. :func:`tidy` rewrites the built command tree once, at the entry point:
plain Click layout (no Rich markup), markup removed from every help text, and each option that
takes a value shown with a word for it (``--config PATH``, ``--frames N``); flags show none.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|ref|doc|py:\w+):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_INTERPRETED = re.compile(r"`([^`]+)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*\*?([^*\s][^*]*?)\*\*?(?![\w*])")


def plain(text: str | None) -> str | None:
    """``text`` without reST markup: roles (:func:`x`), literals (````x````), `x`, *x* and **x**.

    A role's target keeps its last dotted part (``:class:`~agent.skills.Skill``` → ``Skill``).

    Args:
        text: A help text, or None.

    Returns:
        The same words without the markup (None for None).
    """
    if text is None:
        return None
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1].removesuffix("()"), text)
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


def value_word(param: Any) -> str:
    """The word shown for an option's value: PATH, FILE, DIR, N, NUMBER, TEXT, or the choices.

    Args:
        param: A Typer option or argument that takes a value (its ``type_descriptor`` says the
            annotation; a plain Click parameter's ``type`` is read otherwise).
    """
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        if desc.is_choice:
            return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
        if desc.is_path:
            return {"file": "FILE", "dir": "DIR"}.get(desc.path_type, "PATH")
        ann = desc.annotation
    else:
        ann = {"integer": int, "float": float}.get(getattr(getattr(param, "type", None), "name", ""), str)
    if isinstance(ann, type) and issubclass(ann, Path):
        return "PATH"
    if ann is int:
        return "N"
    if ann is float:
        return "NUMBER"
    return "TEXT"


def tidy(command: Any) -> Any:
    """Make every help text of ``command`` and its subcommands plain, in place; returns it.

    Args:
        command: The Click command Typer built (``typer.main.get_command(app)``).
    """
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None  # Click's own layout: no Rich markup, no type column
    for attr in ("help", "short_help", "epilog"):
        if getattr(command, attr, None):
            setattr(command, attr, plain(getattr(command, attr)))
    for param in getattr(command, "params", []):
        if getattr(param, "help", None):
            param.help = plain(param.help)
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        word = value_word(param)
        if getattr(param, "param_type_name", "") == "argument":
            _plain_argument(param, word)
        else:
            param.metavar = word
    if hasattr(command, "list_commands"):
        for name in command.list_commands(None):
            tidy(command.get_command(None, name))
    return command


def _plain_argument(param: Any, word: str) -> None:
    """Show an argument by its name alone: ``see SOURCE``, ``listen FILES...``.

    Typer wrote ``{SOURCE}`` in the usage line and ``SOURCE <str>`` in the list.
    """
    param.metavar = param.name.upper() if not word.startswith("[") else word
    many = "..." if getattr(param, "nargs", 1) != 1 else ""
    usage = param.metavar + many if param.required else f"[{param.metavar}{many}]"
    param.display_type_rich = lambda ctx: None  # the type column: the name says it
    param._usage_display_name = lambda: usage
    param.make_metavar = lambda ctx=None: usage
