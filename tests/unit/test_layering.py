"""The package's layering: the table in ``harness/__init__.py``'s docstring holds for every import.

Modules are parsed with :mod:`ast`, never imported (no side effects, and a module
that fails to import is still checked). Every import counts: at module level, inside
functions, under ``TYPE_CHECKING``, absolute or relative.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
ROOT_UNIT = "harness"  # harness/__init__.py, the package itself
ANY_LOWER = "*"
_ROW = re.compile(r"^\s+(\d+)\s+([A-Za-z_][A-Za-z0-9_]*)\s+(\S.*?)\s*$")


@dataclass(frozen=True)
class Row:
    layer: int
    allowed: frozenset[str]  # as written: unit names, maybe ANY_LOWER


@dataclass(frozen=True)
class Import:
    """One import statement's target, as a dotted module name."""

    source: Path  # relative to the package's parent (harness/...)
    line: int
    target: str


# -- reading the table and the modules -----------------------------------------------------------
def parse_table(doc: str) -> dict[str, Row]:
    """The rows under the ``layer  unit  may import`` header, up to the next blank line."""
    lines = doc.splitlines()
    header = next((i for i, ln in enumerate(lines) if ln.split() == ["layer", "unit", "may", "import"]),
                  None)
    assert header is not None, "harness/__init__.py's docstring has no 'layer  unit  may import' table"
    table: dict[str, Row] = {}
    for ln in lines[header + 1:]:
        if not ln.strip():
            break
        m = _ROW.match(ln)
        assert m, f"malformed layering row: {ln!r}"
        layer, unit, deps = int(m[1]), m[2], m[3]
        assert unit not in table, f"unit {unit} has two rows"
        names = frozenset() if deps == "-" else frozenset(d.strip() for d in deps.split(","))
        table[unit] = Row(layer, names)
    assert table, "the layering table is empty"
    return table


def module_name(path: Path) -> tuple[str, bool]:
    """(dotted name, is a package ``__init__``) of a file under the package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def imports_of(path: Path, source: str | None = None) -> Iterator[Import]:
    """Every import in one module, relative ones resolved (``from . import x`` as ``pkg.x``)."""
    name, is_package = module_name(path)
    package = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source, str(path))
    rel = path.relative_to(PACKAGE.parent)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(rel, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                assert node.level <= len(package), f"{rel}:{node.lineno}: relative import beyond the package"
                base = ".".join(package[:len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # ``from pkg import name``: name may be a submodule, which is then the target
            for alias in node.names:
                yield Import(rel, node.lineno, f"{module}.{alias.name}")


def unit_of_module(dotted: str) -> str | None:
    """The unit a ``harness...`` module (or a name in it) belongs to; None outside harness."""
    parts = dotted.split(".")
    if parts[0] != ROOT_UNIT:
        return None
    if len(parts) == 1:
        return ROOT_UNIT
    head = parts[1]
    if (PACKAGE / f"{head}.py").is_file() or (PACKAGE / head / "__init__.py").is_file():
        return head
    return ROOT_UNIT  # a name defined in harness/__init__.py (``from harness import __version__``)


def unit_of_file(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    if rel.parts == ("__init__.py",):
        return ROOT_UNIT
    return rel.parts[0].removesuffix(".py")


def package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def unit_graph() -> dict[str, dict[str, list[Import]]]:
    """unit -> the units it imports -> the imports that do it."""
    graph: dict[str, dict[str, list[Import]]] = {}
    for path in package_files():
        unit = unit_of_file(path)
        edges = graph.setdefault(unit, {})
        for imp in imports_of(path):
            target = unit_of_module(imp.target)
            if target is not None and target != unit:
                edges.setdefault(target, []).append(imp)
    return graph


def find_cycle(graph: Mapping[str, Set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as ``[a, b, ..., a]``, or None when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def allowed_targets(table: Mapping[str, Row], unit: str) -> set[str]:
    """The units ``unit`` may import: its named ones, and every lower unit for ``*``."""
    row = table[unit]
    names = set(row.allowed - {ANY_LOWER})
    if ANY_LOWER in row.allowed:
        names |= {u for u, r in table.items() if r.layer < row.layer}
    return names


def _where(imports: list[Import]) -> str:
    """``file:line`` of the first few import statements."""
    places = list(dict.fromkeys(f"{i.source}:{i.line}" for i in imports))
    return ", ".join(places[:4]) + (" ..." if len(places) > 4 else "")


@pytest.fixture(scope="module")
def table() -> dict[str, Row]:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))
    assert doc, "harness/__init__.py has no docstring"
    return parse_table(doc)


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, list[Import]]]:
    return unit_graph()


# -- the detector itself ------------------------------------------------------------------------
def test_cycle_detector_finds_a_cycle_and_names_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"} and len(cycle) == 4
    assert all(b in graph[a] for a, b in zip(cycle, cycle[1:], strict=False))
    assert find_cycle({"x": {"x"}}) == ["x", "x"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_are_resolved_to_units() -> None:
    source = ("import harness.check.plan\n"
              "from ..case import InjectArgs\n"
              "from . import rules\n"
              "from harness import points, __version__\n"
              "def f() -> None:\n"
              "    from ..systems.kafka_segments import log_end_offset\n"
              "if TYPE_CHECKING:\n"
              "    import docker.errors\n")
    found = list(imports_of(PACKAGE / "inject" / "__init__.py", source))
    assert [unit_of_module(i.target) for i in found] == [
        "check", "case", "inject", "points", ROOT_UNIT, "systems", None]
    assert found[-1].target == "docker.errors" and found[-1].line == 8
    nested = list(imports_of(PACKAGE / "systems" / "kafka.py", "from ..errors import AdminError\n"))
    assert [i.target for i in nested] == ["harness.errors.AdminError"]


def test_table_parser_rejects_a_malformed_row() -> None:
    assert parse_table("x\n\n    layer  unit  may import\n    0  a  -\n    1  b  a, *\n\nmore") == {
        "a": Row(0, frozenset()), "b": Row(1, frozenset({"a", "*"}))}
    with pytest.raises(AssertionError, match="malformed"):
        parse_table("    layer  unit  may import\n    zero  a  -\n")


# -- the table ----------------------------------------------------------------------------------
def test_table_points_down(table: dict[str, Row]) -> None:
    for unit, row in table.items():
        for dep in row.allowed - {ANY_LOWER}:
            assert dep in table, f"{unit}'s row names {dep}, which has no row"
            assert table[dep].layer <= row.layer, (
                f"{unit} (layer {row.layer}) may not import {dep} (layer {table[dep].layer}): "
                "lower layers never import higher ones")
    allowed = {u: allowed_targets(table, u) for u in table}
    cycle = find_cycle(allowed)
    assert cycle is None, f"the table itself allows the cycle {' -> '.join(cycle or [])}"


def test_every_unit_has_a_row(table: dict[str, Row], graph: dict[str, dict[str, list[Import]]]) -> None:
    missing = sorted(set(graph) - set(table))
    assert not missing, (f"units without a row in harness/__init__.py's layering table: "
                         f"{', '.join(missing)}; add one")


# -- the code -----------------------------------------------------------------------------------
def test_no_import_cycle_between_units(graph: dict[str, dict[str, list[Import]]]) -> None:
    cycle = find_cycle({u: set(edges) for u, edges in graph.items()})
    if cycle:
        steps = [f"{a} -> {b} ({_where(graph[a][b])})" for a, b in zip(cycle, cycle[1:], strict=False)]
        pytest.fail("import cycle between units: " + "; ".join(steps))


def test_every_import_follows_the_layering(table: dict[str, Row],
                                           graph: dict[str, dict[str, list[Import]]]) -> None:
    wrong = []
    for unit, edges in sorted(graph.items()):
        if unit not in table:
            continue  # test_every_unit_has_a_row says so
        may = allowed_targets(table, unit)
        for target, imports in sorted(edges.items()):
            if target not in may:
                layers = f"layer {table[unit].layer} -> {table[target].layer if target in table else '?'}"
                wrong.append(f"{unit} imports {target} ({layers}) at {_where(imports)}")
    assert not wrong, "imports that break the layering of harness/__init__.py:\n" + "\n".join(wrong)


def _importers_of(top: str) -> dict[Path, list[int]]:
    """Files under harness/ importing the top-level package ``top``, with the lines."""
    found: dict[Path, list[int]] = {}
    for path in package_files():
        for imp in imports_of(path):
            if imp.target.split(".")[0] == top:
                found.setdefault(path.relative_to(PACKAGE), []).append(imp.line)
    return found


def test_only_the_backend_imports_docker() -> None:
    outside = {str(p): lines for p, lines in _importers_of("docker").items() if p.parts[0] != "backend"}
    assert not outside, f"only harness/backend may import the docker SDK: {outside}"


def test_only_the_checker_imports_pyspark() -> None:
    outside = {str(p): lines for p, lines in _importers_of("pyspark").items() if p.parts[0] != "check"}
    assert not outside, f"only harness/check may import pyspark: {outside}"


def test_the_product_never_imports_testing(graph: dict[str, dict[str, list[Import]]]) -> None:
    users = {u: _where(edges["testing"]) for u, edges in graph.items() if "testing" in edges}
    assert not users, f"harness.testing is for tests and bench only; imported by {users}"


# -- inside check/: two wings and a plan ---------------------------------------------------------
CHECK = PACKAGE / "check"


def check_wing(path: Path) -> str:
    """The wing of a file of ``harness/check``: ``engine``, ``anomalies``, ``result`` (the
    result's shape, which the families build) or ``plan`` (the rest: the steps and their
    kernels)."""
    rel = path.relative_to(CHECK)
    if rel.parts[0] in ("engine", "anomalies"):
        return rel.parts[0]
    return "result" if rel.parts == ("result.py",) else "plan"


#: what each wing of check/ may import of check/ (harness/check/__init__.py's docstring)
CHECK_WINGS = {"engine": {"engine"}, "anomalies": {"anomalies", "result"}, "result": set(),
               "plan": {"plan", "engine", "anomalies", "result"}}


def check_file_of(dotted: str) -> Path | None:
    """The file of ``harness/check`` that a ``harness.check...`` import names (a name in a
    module: that module's file), else None."""
    parts = dotted.split(".")
    if parts[:2] != [ROOT_UNIT, "check"]:
        return None
    for end in range(len(parts), 1, -1):
        base = PACKAGE.parent.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
    return None


def check_graph(sources: Mapping[Path, str] | None = None) -> dict[Path, dict[Path, list[Import]]]:
    """file of check/ -> the files of check/ it imports -> the imports that do it. A package's
    ``__init__`` that an import passes through is not an edge: ``from harness.check.engine
    import server`` imports ``engine/server.py``."""
    files = sorted(p for p in CHECK.rglob("*.py") if "__pycache__" not in p.parts)
    graph: dict[Path, dict[Path, list[Import]]] = {}
    for path in files:
        edges = graph.setdefault(path, {})
        source = None if sources is None else sources.get(path)
        for imp in imports_of(path, source):
            target = check_file_of(imp.target)
            if target is not None and target != path:
                edges.setdefault(target, []).append(imp)
    if sources is not None:
        for path, source in sources.items():
            if path not in graph:  # a file made up by a test
                graph[path] = {}
                for imp in imports_of(path, source):
                    target = check_file_of(imp.target)
                    if target is not None and target != path:
                        graph[path].setdefault(target, []).append(imp)
    return graph


def check_wing_breaches(graph: Mapping[Path, Mapping[Path, list[Import]]]) -> list[str]:
    """Imports of one wing of check/ into a wing it may not import."""
    wrong = []
    for path, edges in sorted(graph.items()):
        wing = check_wing(path)
        for target, imports in sorted(edges.items()):
            if check_wing(target) not in CHECK_WINGS[wing]:
                wrong.append(f"{path.relative_to(PACKAGE)} ({wing}) imports {target.relative_to(PACKAGE)} "
                             f"({check_wing(target)}) at {_where(imports)}")
    return wrong


def check_cycle(graph: Mapping[Path, Mapping[Path, list[Import]]]) -> list[str] | None:
    """An import circle between files of check/, as their paths; None when there is none.
    ``__init__`` files are left out: a package's face imports its modules, and a module
    naming its package (``from harness.check.anomalies import ids``) passes through it."""
    named = {str(p.relative_to(PACKAGE)): {str(t.relative_to(PACKAGE)) for t in edges
                                           if t.name != "__init__.py"}
             for p, edges in graph.items() if p.name != "__init__.py"}
    return find_cycle(named)


def test_check_wings_import_only_what_they_may() -> None:
    wrong = check_wing_breaches(check_graph())
    assert not wrong, "imports that break harness/check's wings:\n" + "\n".join(wrong)


def test_no_import_circle_between_files_of_check() -> None:
    cycle = check_cycle(check_graph())
    assert cycle is None, f"import circle between files of harness/check: {' -> '.join(cycle or [])}"


def test_the_check_rule_fails_on_an_engine_import_of_the_anomalies() -> None:
    bad = {CHECK / "engine" / "session.py": (CHECK / "engine" / "session.py").read_text()
           + "\nfrom harness.check.anomalies import ids\n"}
    wrong = check_wing_breaches(check_graph(bad))
    breach = "check/engine/session.py (engine) imports check/anomalies/ids.py (anomalies)"
    assert any(w.startswith(breach) for w in wrong), wrong


def test_the_check_rule_fails_on_an_anomaly_import_of_the_engine_or_the_plan() -> None:
    bad = {CHECK / "anomalies" / "ids.py": (CHECK / "anomalies" / "ids.py").read_text()
           + "\nfrom harness.check.engine.memory import memory_budget\nfrom harness.check import mids\n"}
    wrong = "\n".join(check_wing_breaches(check_graph(bad)))
    assert "anomalies/ids.py (anomalies) imports check/engine/memory.py (engine)" in wrong
    assert "anomalies/ids.py (anomalies) imports check/mids.py (plan)" in wrong


def test_the_check_rule_fails_on_an_import_circle_inside_check() -> None:
    # memory.py imports nothing of check/; made to import frames.py, which imports tasks.py:
    # no circle yet; tasks.py made to import memory.py closes one (inside one wing)
    bad = {CHECK / "engine" / "memory.py": "from harness.check.engine.frames import Frames\n",
           CHECK / "engine" / "tasks.py": "from harness.check.engine.memory import give_back\n"}
    cycle = check_cycle(check_graph(bad))
    assert cycle is not None and set(cycle) == {"check/engine/memory.py", "check/engine/frames.py",
                                                 "check/engine/tasks.py"}, cycle
