"""Dependencies point down: checked on the source with ``ast`` (no imports executed).

- ``hardware/`` imports nothing from ``agent/`` (its config models live in ``hardware/config.py``);
- the agent core never imports the built-in ``skills/`` package (the loader finds it by path);
- the modules of ``agent.skills`` form no cycle: skill → args → registry → loader / authoring.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKILLS_ORDER = ["skill", "args", "registry", "loader", "authoring"]  # each may import only earlier ones


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module a source imports, in any form, anywhere in the file (also lazy and TYPE_CHECKING).

    ``from a.b import c`` yields ``a.b`` and ``a.b.c`` (``c`` may be a submodule); relative imports
    are resolved against ``module``; ``importlib.import_module("x")`` and ``__import__("x")`` with a
    literal name count too.
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def imports_of(path: Path) -> set[str]:
    return imported_names(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def hits(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def test_import_detector_sees_every_form():
    src = (
        "import agent\nimport agent.config as c\nfrom agent import config\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent.skills import Skill\n"
        "def f():\n    import importlib\n    importlib.import_module('agent.cli.main')\n"
        "    __import__('skills.motion')\n"
        "from . import sibling\nfrom ..agent import x\n"
    )
    names = imported_names(src, "hardware.sub.mod")
    assert hits(names, "agent") == {
        "agent",
        "agent.config",
        "agent.skills",
        "agent.skills.Skill",
        "agent.cli.main",
    }
    assert hits(names, "skills") == {"skills.motion"}
    assert "hardware.sub.sibling" in names and "hardware.agent.x" in names
    relative = imported_names("from .skill import Skill\n", "agent.skills", is_package=True)
    assert "agent.skills.skill" in relative
    assert "skills" not in hits(imported_names("from agent import skills\n", "agent.cli.main"), "skills")


def test_hardware_imports_nothing_from_agent():
    files = sorted((ROOT / "hardware").rglob("*.py"))
    assert ROOT / "hardware" / "config.py" in files and len(files) >= 15
    offenders = {str(p.relative_to(ROOT)): sorted(hits(imports_of(p), "agent")) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_agent_core_does_not_import_the_builtin_skills_package():
    files = sorted((ROOT / "agent").rglob("*.py"))
    assert ROOT / "agent" / "skills" / "loader.py" in files and len(files) >= 30
    offenders = {str(p.relative_to(ROOT)): sorted(hits(imports_of(p), "skills")) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_agent_skills_modules_form_no_cycle():
    pkg = ROOT / "agent" / "skills"
    mods = {p.stem: imports_of(p) for p in sorted(pkg.glob("*.py")) if p.name != "__init__.py"}
    assert set(mods) == set(SKILLS_ORDER)
    # A submodule importing the package itself would import every sibling through __init__.py.
    assert {m for m, names in mods.items() if "agent.skills" in names} == set()
    graph = {m: {d for d in mods if f"agent.skills.{d}" in names} for m, names in mods.items()}
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert sorted(order) == sorted(SKILLS_ORDER)
    upward = {
        (m, d) for m, deps in graph.items() for d in deps if SKILLS_ORDER.index(d) >= SKILLS_ORDER.index(m)
    }
    assert upward == set()
    assert graph["skill"] == set() and graph["registry"] >= {"skill", "args"}
    assert "registry" in graph["loader"]
