"""The registry of anomalies (harness.anomalies) against the families that define them
(harness.check.anomalies), the reference checker and docs/checker.md: each anomaly belongs
to exactly one family, is defined in its family's docstring, and has its row in the docs'
table with the same unit of count."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from harness.anomalies import ANOMALIES, FAMILIES, INFORMATIONAL, REGISTRY, anomaly

ROOT = Path(__file__).resolve().parents[3]
FAMILY_DIR = ROOT / "harness" / "check" / "anomalies"
_ROW = re.compile(r"^\| `([a-z0-9-]+)`[^|]*\|(.*)\|([^|]*)\|([^|]*)\|\s*$")


def _family_modules() -> dict[str, Path]:
    """Every module of harness/check/anomalies that declares ``KINDS``, by name."""
    found = {}
    for path in sorted(FAMILY_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KINDS" for t in node.targets)
               for node in tree.body):
            found[path.stem] = path
    return found


def _kinds(path: Path) -> tuple[str, ...]:
    """A family module's ``KINDS``, read from its source (no import)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KINDS" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise AssertionError(f"{path}: no KINDS")


def test_each_anomaly_belongs_to_exactly_one_family() -> None:
    modules = _family_modules()
    assert set(FAMILIES) == set(modules), "a registry family without its module, or a module without a row"
    owners: dict[str, list[str]] = {}
    for family, path in modules.items():
        for kind in _kinds(path):
            owners.setdefault(kind, []).append(family)
    assert sorted(owners) == sorted(ANOMALIES), "a family finds an anomaly the registry lacks, or none does"
    for name, families in owners.items():
        assert families == [anomaly(name).family], f"{name}: found by {families}, registered to " \
                                                    f"{anomaly(name).family}"


def test_each_anomaly_is_defined_in_its_familys_docstring() -> None:
    for row in REGISTRY:
        doc = ast.get_docstring(ast.parse((FAMILY_DIR / f"{row.family}.py").read_text())) or ""
        assert re.search(rf"^- ``{re.escape(row.name)}``: \S", doc, re.M), (
            f"{row.name}: no definition ('- ``{row.name}``: ...') in harness/check/anomalies/{row.family}.py")
    informational = [a.name for a in REGISTRY if not a.invalidates]
    for name in informational:
        doc = ast.get_docstring(ast.parse((FAMILY_DIR / f"{anomaly(name).family}.py").read_text())) or ""
        assert "Informational" in doc.split(f"``{name}``", 1)[1].split("\n- ", 1)[0]
    assert INFORMATIONAL == frozenset(informational)


def test_the_docs_table_has_a_row_per_anomaly_counted_as_the_registry_says() -> None:
    text = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8")
    table = text.split("## Anomalies", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    rows = [_ROW.match(line) for line in table.splitlines()[2:]]
    assert all(rows), "a malformed row in docs/checker.md's anomaly table"
    names = [m[1] for m in rows if m]
    assert names == list(ANOMALIES), "docs/checker.md's anomaly table is not the registry's, in its order"
    for m in rows:
        assert m is not None
        per = m[3].strip()
        assert per.startswith(anomaly(m[1]).per), f"{m[1]}: counted per {per!r} in the docs, " \
                                                  f"{anomaly(m[1]).per!r} in the registry"


def test_the_plan_builds_every_familys_examples_and_the_shared_constants_are_defined_once() -> None:
    plan = importlib.import_module("harness.check.plan")
    assert set(plan.FAMILY) == set(FAMILIES)
    sources = "\n".join(p.read_text() for p in (ROOT / "harness").rglob("*.py"))
    for constant in ("PRECOMMIT_SLACK_S", "FLAG_VALUES", "TS_NAMES", "ROW_REC", "F_REC_RC"):
        defined = re.findall(rf"^(?:{constant}\b.*=|[A-Z_, ]*\b{constant}\b[A-Z_, ]*=)", sources, re.M)
        assert len(defined) == 1, f"{constant} is defined {len(defined)} times"
