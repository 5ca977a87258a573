"""``bin/setup --all-images`` builds every image a CI item needs: each case entry that CI
runs (not ``ci: false``) names a system and version whose image the setup builds, so a CI
run from a fresh clone builds them before any case starts, and none is left to be built
on first use in the middle of the suite."""

from __future__ import annotations

import re
from pathlib import Path

from harness.case import load_case
from harness.clusters import KAFKA_VERSIONS, PULSAR_VERSIONS

ROOT = Path(__file__).resolve().parents[2]


def _built() -> set[tuple[str, str | None]]:
    """(system, version) of each ``harness images build`` in bin/setup (a ``for v in``
    loop's versions included; no version: the system's default)."""
    text = (ROOT / "bin" / "setup").read_text()
    loops = {m[1]: m[2].split() for m in re.finditer(r"for (\w+) in ([^;]+);", text)}
    built: set[tuple[str, str | None]] = set()
    for m in re.finditer(r"images build --system (\w+)(?: --version (\S+))?", text):
        version = m[2].strip('"') if m[2] else None
        if version and version.startswith("$"):
            built |= {(m[1], v) for v in loops[version.lstrip("$").strip("{}")]}
        else:
            built.add((m[1], version))
    return built


def test_setup_builds_the_image_of_every_case_entry_ci_runs() -> None:
    needed: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "cases").rglob("*.yaml")):
        first = load_case(path)
        if not first.in_ci:
            continue
        for label in first.variants or (None,):
            if label is not None and label in first.outside_ci:
                continue
            case = first if label is None else load_case(path, version=label)
            needed.add((case.cluster_def.system, case.version))
    built = _built()
    defaults = {"kafka": KAFKA_VERSIONS[0], "pulsar": PULSAR_VERSIONS[0]}  # as `images build`
    built |= {(s, defaults[s]) for s, v in built if v is None}
    missing = sorted((s, v) for s, v in needed if (s, v) not in built)
    assert not missing, f"bin/setup --all-images does not build: {missing}"
    assert ("kafka", "0.10.2.2") in needed, "the regression library's oldest CI entry is gone"
    assert {("pulsar", "3.3.2"), ("pulsar", "4.0.7")} <= needed, \
        "CI's Pulsar regression pair (BookKeeper#4462, buggy and fixed) is gone"
