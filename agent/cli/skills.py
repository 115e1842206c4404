"""``bolt-agent skills list`` and ``bolt-agent skills new NAME``: inspect and create skills."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent.cli.common import ConfigOpt, JsonOpt, load_or_exit

if TYPE_CHECKING:
    from agent.skills import SkillRegistry

skills_app = typer.Typer(no_args_is_help=True, help="Inspect and create skills.")


def _registry(config: Path | None) -> tuple[SkillRegistry, list[str]]:
    """The skills of ``config``'s robot (packaged, its folders, entry points) and the libraries' notes."""
    from agent.doctor import skills_of

    return skills_of(load_or_exit(config))


@skills_app.command("list")
def skills_list(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """List the skills the model can call, with their schema and source."""
    reg, notes = _registry(config)
    for msg in [*reg.load_errors, *notes]:
        typer.echo(f"warning: {msg}", err=True)
    for name, why in reg.left_out.items():
        typer.echo(f"left out: {name}: {why}", err=True)
    for s in reg.skills.values():
        if json_out:
            typer.echo(
                json.dumps(
                    {
                        "name": s.name,
                        "description": s.description,
                        "parameters": s.parameters,
                        "source": s.source,
                        "background": s.background,
                        "follow_up": s.follow_up,
                    }
                )
            )
        else:
            params = ", ".join(s.parameters.get("properties", {}))
            kind = (" [background]" if s.background else "") + ("" if s.follow_up else " [no follow-up]")
            typer.echo(
                f"{s.name}({params}){kind}  {s.description}\n    schema: {json.dumps(s.parameters)}\n"
                f"    source: {s.source}"
            )


@skills_app.command("new")
def skills_new(
    name: Annotated[str, typer.Argument(help="skill name, e.g. greet_guest")],
    folder: Annotated[Path, typer.Option("--dir", help="folder to write NAME.py into")] = Path("skills"),
    config: ConfigOpt = None,
) -> None:
    """Write a commented template skill to start from (refused when NAME is a skill already)."""
    from agent.skills import SkillError, new_skill_file

    reg, _ = _registry(config)
    taken = {n: f"left out on this body: {why}" for n, why in reg.left_out.items()}
    taken.update({n: sk.source for n, sk in reg.skills.items()})
    if name in taken:  # a second skill of one name is not loaded: the template would never run
        typer.echo(f"error: {name!r} is a skill already ({taken[name]}); choose another name", err=True)
        raise typer.Exit(2)
    try:
        path = new_skill_file(name, folder)
    except SkillError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    from agent.skills import BUILTIN_SKILLS

    if path.parent.resolve() == BUILTIN_SKILLS:  # `skills new` run in the repository: loaded already
        typer.echo(
            f"wrote {path}; the packaged skills/ folder is always loaded: "
            "check it with: bolt-agent skills list"
        )
    else:
        typer.echo(
            f"wrote {path}; add its folder to [skills] folders in your config (the packaged skills/ "
            f"folder is always loaded), then check it with: bolt-agent skills list"
        )
