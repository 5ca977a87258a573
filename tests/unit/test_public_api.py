"""The package's public face: ``harness.__all__`` resolves, and the run package stays in
modules of one role each (none over 300 lines), with no system branch outside the systems."""

from __future__ import annotations

import re
from pathlib import Path

import harness

HARNESS = Path(harness.__file__).resolve().parent


def test_every_name_in_all_resolves_to_what_its_module_defines() -> None:
    import importlib

    assert sorted(harness.__all__) == sorted(harness._EXPORTS)
    for name in harness.__all__:
        module = importlib.import_module(harness._EXPORTS[name])
        assert getattr(harness, name) is getattr(module, name), name
        assert name in getattr(module, "__all__", ()), f"{name} is not public in its module"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        harness.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("harness.no_such_thing resolved")


def test_no_run_module_is_over_300_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (HARNESS / "run").glob("*.py")}
    assert sizes and all(n <= 300 for n in sizes.values()), sizes


def test_no_system_branch_outside_the_systems_and_the_case_schema() -> None:
    branch = re.compile(r"system\s*[!=]=\s*|\.spec\.system\s*[!=]=")
    found = [f"{p.relative_to(HARNESS)}:{i}: {line.strip()}"
             for p in HARNESS.rglob("*.py")
             if p.relative_to(HARNESS).parts[0] not in ("systems", "case")
             for i, line in enumerate(p.read_text().splitlines(), 1) if branch.search(line)]
    assert not found, found
