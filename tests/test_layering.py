"""Dependencies point down: checked on the source with ``ast`` (no imports executed).

- ``hardware/`` imports nothing from ``agent/`` (its config models live in ``hardware/config.py``);
- every module of ``hardware/`` belongs to one concern (:data:`HARDWARE_LAYERS`: the body's base,
  the robot, servos, cameras, the Reachy Mini, perception, the registry and factory on top) and
  imports only lower ones: a servo driver never imports a camera or the Reachy Mini, the body's
  base no vendor, and only the registry names a vendor module by kind;
- the agent core never imports the built-in ``skills/`` package (the loader finds it by path);
- the modules of ``agent.skills`` form no cycle: skill → args → registry → loader / authoring;
- no module loads one of ours by name (``importlib``): every dependency is in the graph;
- the module graph has no circle, and the packages of ``agent/`` import only lower layers
  (:data:`LAYERS`: config at the bottom, the engines below the conversation, the CLI on top);
- the product never imports the development tools (``tools/``: benchmarks, the soak), which may
  import the product; product and tools together form no circle;
- at most 12 modules are left flat in ``agent/``;
- only ``agent/engines/embedded/vendor.py`` touches llama-cpp-python's private objects.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("agent", "hardware", "skills", "launch")
LAYERS: list[set[str]] = [
    {"agent.state"},  # the state store: stdlib only; skills take its timers through their context
    {"agent.config", "agent.control", "agent.models", "agent.systemd", "agent.toolparse", "agent.skills"},
    {"agent.blas"},  # process-wide thread settings of bundled libraries: numpy and threadpoolctl only
    {"agent.speech", "agent.engines", "agent.models_pull"},
    {"agent.events", "agent.listening", "agent.vision", "agent.models_doctor"},
    {"agent.audio_io", "agent.conversation", "agent.stopper"},
    {"agent.memplan", "agent.pipeline"},
    {"agent.doctor", "agent.console"},
    {"agent.cli"},
    {"agent.__main__"},
]
"""The packages and flat modules of ``agent/``, bottom first: each imports only lower layers."""
HARDWARE_LAYERS: list[set[str]] = [
    {
        "hardware.config",
        "hardware.joints",
        "hardware.check",
        "hardware.animation",
        "hardware.doa",
    },
    {"hardware.driver", "hardware.layers", "hardware.jetson"},  # driver protocol; loop layers; JetPack check
    {"hardware.gestures"},  # the layers' API the robot offers (gestures in order, sleep, gaze)
    {"hardware.robot"},  # the one safety layer and motion loop
    {"hardware.safety", "hardware.speech_motion", "hardware.idle"},
    {"hardware.servos", "hardware.camera"},  # servo drivers; camera sources and capture
    {"hardware.reachy_mini", "hardware.perception"},  # a robot (its camera is a camera source); vision
    {"hardware.registry"},  # every driver kind, named camera and animation format, by name
    {"hardware.factory"},
]
"""The concerns of ``hardware/`` (a subpackage or a flat module), bottom first."""
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
            base = import_base(node, module, is_package)
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def import_base(node: ast.ImportFrom, module: str, is_package: bool = False) -> str:
    """The module a ``from ... import`` in ``module`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


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


def product_files() -> list[Path]:
    return [p for d in PRODUCT for p in sorted((ROOT / d).rglob("*.py"))]


def tool_files() -> list[Path]:
    return sorted((ROOT / "tools").rglob("*.py"))


def test_no_module_is_loaded_by_name():
    """``importlib.import_module`` hides an import from the graph (a circle nobody sees)."""
    offenders = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                loader = path == ROOT / "agent" / "skills" / "loader.py"  # user skill files, by path
                if name in ("import_module", "__import__") or (
                    name == "spec_from_file_location" and not loader
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == []


def module_graph(files: list[Path] | None = None) -> dict[str, set[str]]:
    """Module → the modules of ours it imports (also lazily and under ``TYPE_CHECKING``).

    ``from pkg import sub`` where ``pkg.sub`` is a module depends on that module, not on
    ``pkg``'s ``__init__``; a package's ``__init__`` importing its own submodules is left out.
    ``files``: the modules to graph (default: the product's).
    """
    files = product_files() if files is None else files
    names = {module_name(p) for p in files}

    def resolve(name: str) -> str:
        while name and name not in names:  # ``from a.b import C``: the module is a.b
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for path in files:
        mod, is_pkg = module_name(path), path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1
                    parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    deps.add(sub if sub in names else resolve(base))
        graph[mod] = {d for d in deps if d and d != mod and not d.startswith(mod + ".")}
    return graph


def test_the_module_graph_has_no_circle():
    graph = module_graph()
    assert len(graph) > 120
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a circle
    # A submodule importing its own package runs the package's __init__, which imports siblings.
    packages = {m for m in graph if (ROOT / Path(*m.split(".")) / "__init__.py").is_file()}
    into_own = {(m, d) for m, deps in graph.items() for d in deps if d in packages and m.startswith(d + ".")}
    assert into_own == set()


def unit(module: str) -> str:
    """The package or flat module of ``agent/`` holding ``module`` (``agent.engines.base``: engines)."""
    return ".".join(module.split(".")[:2])


def test_packages_import_only_lower_layers():
    graph = module_graph()
    layer = {u: i for i, units in enumerate(LAYERS) for u in units}
    units = {unit(m) for m in graph if m.startswith("agent.")} - {"agent"}
    assert units == set(layer), units ^ set(layer)  # every unit has a layer
    upward = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m.startswith("agent.") and m != "agent"
        for d in deps
        if d.startswith("agent.") and unit(d) != unit(m) and layer[unit(d)] >= layer[unit(m)]
    )
    assert upward == []
    below_conversation = {m: d for m, deps in graph.items() if unit(m) == "agent.engines" for d in deps}
    assert not any(unit(d) in ("agent.conversation", "agent.pipeline") for d in below_conversation.values())
    config = {d for m, deps in graph.items() if unit(m) == "agent.config" for d in deps}
    assert {unit(d) for d in config if d.startswith("agent.")} <= {"agent.config"}  # config at the bottom


def test_the_product_never_imports_the_tools():
    """``tools/`` is not installed: a product module importing it would fail on the robot."""
    tools = tool_files()
    assert ROOT / "tools" / "bench" / "latency.py" in tools and len(tools) >= 10
    offenders = {str(p.relative_to(ROOT)): sorted(hits(imports_of(p), "tools")) for p in product_files()}
    assert {k: v for k, v in offenders.items() if v} == {}
    # The tools build on the product, and the two together have no circle.
    graph = module_graph(product_files() + tools)
    assert any(d.startswith("agent.") for m, deps in graph.items() if m.startswith("tools.") for d in deps)
    graphlib.TopologicalSorter(graph).prepare()


def test_the_tools_never_import_the_tests():
    """``tests/`` is no package of the tools: what both use (the PulseAudio rig) lives in ``tools/``."""
    offenders = {str(p.relative_to(ROOT)): sorted(hits(imports_of(p), "tests")) for p in tool_files()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_module_of_ours_that_is_imported_exists():
    """A lazy import of a module that moved fails only when its command runs (``soak`` once did)."""
    files = product_files() + tool_files()
    known = {module_name(p) for p in files}
    assert "tools.pulse" in known and "agent.pipeline.core" in known
    missing = set()
    for path in files:
        module = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):  # ``from a.b import c`` needs ``a.b``
                targets = [import_base(node, module, path.name == "__init__.py")]
            else:
                continue
            for name in targets:
                if name.split(".")[0] in (*PRODUCT, "tools") and name not in known:
                    missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert sorted(missing) == []


def test_at_most_twelve_modules_are_flat_in_agent():
    flat = sorted(p.name for p in (ROOT / "agent").glob("*.py"))
    assert len(flat) <= 12, flat


def test_only_the_vendor_module_touches_llama_cpp_private_objects():
    """``llm._ctx``, ``self.llm._model.vocab``, ``grammar._grammar``: only in the vendor module
    (an attribute of ``self`` with the same name is our own, such as the VAD's ``self._ctx``)."""
    from agent.engines.embedded.vendor import PRIVATE_NAMES

    vendor = ROOT / "agent" / "engines" / "embedded" / "vendor.py"

    def touches(path: Path) -> list[str]:
        out = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES:
                own = isinstance(node.value, ast.Name) and node.value.id == "self"
                if not own or node.attr == "llama_model_default_params":
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
        return out

    assert [hit for path in product_files() if path != vendor for hit in touches(path)] == []
    # and the vendor module does touch them: the set is not stale
    assert {h.rsplit(" ", 1)[1] for h in touches(vendor)} >= {
        "_ctx",
        "_batch",
        "_model",
        "llama_model_default_params",
    }


def hardware_unit(module: str) -> str:
    """The concern of a ``hardware`` module: its subpackage or flat module (``hardware.servos``)."""
    return ".".join(module.split(".")[:2])


def test_hardware_modules_import_only_lower_concerns():
    graph = module_graph()
    layer = {u: i for i, units in enumerate(HARDWARE_LAYERS) for u in units}
    units = {hardware_unit(m) for m in graph if m.startswith("hardware.")}
    assert units == set(layer), units ^ set(layer)  # every module belongs to a concern
    upward = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m.startswith("hardware.")
        for d in deps
        if d.startswith("hardware.")
        and hardware_unit(d) != hardware_unit(m)
        and layer[hardware_unit(d)] >= layer[hardware_unit(m)]
    )
    assert upward == []
    # Within hardware/, vendors are named only by the registry: the factory builds from specs.
    vendors = {"hardware.servos", "hardware.reachy_mini"}
    naming = {
        m
        for m, deps in graph.items()
        if m.startswith("hardware.") and any(hardware_unit(d) in vendors for d in deps)
    }
    assert {m for m in naming if hardware_unit(m) not in vendors} <= {
        "hardware.registry",
        "hardware.factory",  # the serial ports' default folder (BY_ID_DIR) only
    }
    factory = {d for d in graph["hardware.factory"] if hardware_unit(d) in vendors}
    assert factory == {"hardware.servos.serial_link"}
    assert len(HARDWARE_LAYERS) == len({frozenset(u) for u in HARDWARE_LAYERS})


def test_no_flat_module_of_hardware_is_a_vendors():
    """Vendor code lives in its package: no ``reachy``/``pollen``/``feetech``... file at the top."""
    flat = sorted(p.stem for p in (ROOT / "hardware").glob("*.py"))
    assert not [n for n in flat if any(v in n for v in ("reachy", "pollen", "feetech", "maestro", "serial"))]
    assert {"servos", "reachy_mini", "camera", "perception"} <= {
        p.name for p in (ROOT / "hardware").iterdir() if (p / "__init__.py").is_file()
    }
