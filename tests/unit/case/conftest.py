"""Fixtures for the case tests: a fixed set of injection points, whatever harness.points offers."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from harness.case import _steps

PointsFn = Callable[[str, str], frozenset[str]]

_REAL_AVAILABLE_POINTS: PointsFn = _steps.available_points


def fake_points(system: str, version: str) -> frozenset[str]:
    """What the tests pretend harness.points.available_points returns: C4 needs Kafka 4."""
    if system == "pulsar":
        return frozenset({"P1", "P2"})
    return frozenset({"C1", "C2", "C3"} | ({"C4"} if version.startswith("4.") else set()))


@pytest.fixture(autouse=True, scope="module")
def _fixed_points() -> Iterator[None]:
    # Module-scoped so that hypothesis tests (which reject function-scoped fixtures) get it too,
    # and undone after each module: case files run later in the same session see the real points.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_steps, "available_points", fake_points)
        yield


@pytest.fixture
def real_available_points() -> PointsFn:
    """The loader's own ``available_points`` (harness.points'), not the fake."""
    return _REAL_AVAILABLE_POINTS
