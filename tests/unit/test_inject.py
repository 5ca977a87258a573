"""The rule library: points per version, placeholder rendering."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.inject import render_rule
from harness.points import POINTS, available_points, rule_blocks, rule_file


@pytest.mark.parametrize("version", ["3.9.2", "4.1.2"])
def test_every_point_has_a_rule_for_supported_versions(version: str) -> None:
    assert available_points("kafka", version) == frozenset(POINTS)
    blocks = rule_blocks(rule_file("kafka", version).read_text())
    assert "RELEASE" in blocks  # loaded only at disarm
    for point, text in blocks.items():
        rendered = render_rule(text, {"TOPIC": "t", "PARTITION": 0, "N": 5, "N1": 6, "KEY": "k",
                                      "EVENTS": "/chaos/e", "HOLD_MS": 1000})
        assert "@" not in rendered.replace("@@", "")
        if point in POINTS:
            assert f'"HIT {point} ' in rendered and 'waitFor("k", 1000)' in rendered


def test_versions_without_rules_have_no_points() -> None:
    assert available_points("kafka", "3.8.0") == frozenset()
    assert available_points("pulsar", "4.0.7") == frozenset()


def test_unknown_placeholder_is_a_clear_error() -> None:
    with pytest.raises(HarnessError, match="@WHAT@ is unknown"):
        render_rule("IF $1 == @WHAT@", {"N": 1})
