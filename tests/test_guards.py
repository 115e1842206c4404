"""One source for each small truth, and nothing that points outside the repository.

Checked on the source with ``ast`` and plain text (no imports executed):

- a module-level constant is defined once: no name with the same value in two modules, the
  audio sample rate (16 kHz) once, the apology sentence once, the word-splitting pattern only
  in ``agent/speech/words.py``;
- every message class of ``agent/events.py`` is constructed somewhere in the product (a message
  nobody sends is a stale promise to its readers);
- no product file, config or doc cites a file outside the tree (``../shared``, ``NOTES.md``):
  a user of the repository has no such file; the facts the code relies on are in
  ``docs/facts.md``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ("agent", "hardware", "skills", "launch")
SHIPPED = (*CODE, "jetson", "docs", "tools", ".ci")


def code_files() -> list[Path]:
    return [p for d in CODE for p in sorted((ROOT / d).rglob("*.py"))]


def constant(node: ast.AST) -> object:
    """The value of a literal or of arithmetic on literals (``1024**2``); None for anything else."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, str))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow, ast.Div)):
        left, right = constant(node.left), constant(node.right)
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            return eval(compile(ast.Expression(node), "<constant>", "eval"))  # literals only: checked above
    return None


def module_constants(path: Path) -> dict[str, object]:
    """Module-level ``NAME = literal`` (numbers, strings, arithmetic on numbers), by name."""
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = constant(node.value) if getattr(node, "value", None) is not None else None
        for t in targets:
            if isinstance(t, ast.Name) and value is not None:
                out[t.id] = value
    return out


def test_a_constant_is_defined_in_one_module():
    seen: defaultdict[tuple[str, object], list[str]] = defaultdict(list)
    for path in code_files():
        for name, value in module_constants(path).items():
            if name not in ("log", "__all__"):
                seen[(name, value)].append(str(path.relative_to(ROOT)))
    twice = {f"{name} = {value!r}": where for (name, value), where in seen.items() if len(where) > 1}
    assert twice == {}


def test_the_sample_rate_is_defined_once():
    rates = [
        f"{path.relative_to(ROOT)}:{name}"
        for path in code_files()
        for name, value in module_constants(path).items()
        if value == 16000
    ]
    assert rates == ["agent/speech/audio.py:SAMPLE_RATE"]


def test_the_apology_and_the_word_pattern_are_written_once():
    sorry = "Sorry, I had a problem thinking about that."
    files = {p: p.read_text(encoding="utf-8") for p in code_files()}
    assert [str(p.relative_to(ROOT)) for p, text in files.items() if sorry in text] == [
        "agent/conversation/turn.py"
    ]
    patterns = ("[a-z0-9']", "[^a-z0-9'", "[a-z']+", "[^a-z' ]")
    where = sorted(str(p.relative_to(ROOT)) for p, text in files.items() if any(x in text for x in patterns))
    assert where == ["agent/speech/words.py"]


def test_nothing_cites_a_file_outside_the_tree():
    files = [p for d in SHIPPED for p in sorted((ROOT / d).rglob("*")) if p.is_file() and p.suffix != ".pyc"]
    files += [ROOT / "pyproject.toml", ROOT / "Makefile", ROOT / "tests" / "data" / "README.md"]
    files += [ROOT / "tests" / "conftest.py"]  # where the tests find their data
    assert ROOT / "docs" / "facts.md" in files
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (images, firmware builds)
        for needle in ("../shared", "NOTES.md", "shared/fixtures"):
            if needle in text:
                hits.append(f"{path.relative_to(ROOT)}: {needle}")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if "NOTES.md" in readme:
        hits.append("README.md: NOTES.md")
    assert hits == []


def test_every_message_class_is_sent_by_someone():
    """``AudioEnd`` was declared and never built: the sink's end of turn is a method call (``end``)."""
    tree = ast.parse((ROOT / "agent" / "events.py").read_text(encoding="utf-8"))
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert {"Event", "AudioOut", "TurnPlayed"} <= classes
    built: set[str] = set()
    for path in code_files():
        if path == ROOT / "agent" / "events.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                built.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    abstract = {"Event"}  # the base: only its subclasses are sent
    assert sorted(classes - abstract - built) == []
