"""Injected anomalies are found in exactly the injected numbers, with examples naming them;
clean histories give none. Each detector has a test here that fails without it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from harness.check import ANOMALIES, CheckResult, check_run
from harness.check.synthetic import Expected, Profile, generate

from check_helpers import example_mids, profiles

SPARK = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_matches(result: CheckResult, expected: Expected) -> None:
    assert result.anomalies == expected.anomalies
    assert result.counts == expected.counts
    for kind, examples in result.examples.items():
        assert len(examples) == min(5, expected.anomalies[kind])
        for ex in examples:
            assert example_mids(ex) <= expected.mids.get(kind, frozenset()), (kind, ex)


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_every_anomaly_is_found(tmp_path, system: str) -> None:
    """Two of each anomaly in one history: a missing or miscounting detector fails this."""
    profile = Profile(records=3000, system=system, partitions=3, consumers=2, replicas=3, txn=True,
                      seed=7, inject=dict.fromkeys(ANOMALIES, 2))
    expected = generate(tmp_path, profile)
    assert all(expected.anomalies[kind] >= 2 for kind in ANOMALIES)
    _assert_matches(check_run(tmp_path), expected)


@SPARK
@given(profiles(inject=False))
def test_clean_histories_have_no_anomalies(tmp_path_factory, profile: Profile) -> None:
    run = tmp_path_factory.mktemp("clean")
    expected = generate(run, profile)
    result = check_run(run)
    assert result.valid
    assert set(result.anomalies.values()) == {0}
    _assert_matches(result, expected)


@SPARK
@given(profiles(inject=True))
def test_injected_anomalies_are_counted_exactly(tmp_path_factory, profile: Profile) -> None:
    run = tmp_path_factory.mktemp("injected")
    expected = generate(run, profile)
    _assert_matches(check_run(run), expected)


def test_examples_are_the_first_five(tmp_path) -> None:
    expected = generate(tmp_path, Profile(records=2000, inject={"lost-write": 8}))
    result = check_run(tmp_path)
    assert result.anomalies["lost-write"] == 8
    mids = [ex["mid"] for ex in result.examples["lost-write"]]
    assert mids == sorted(expected.mids["lost-write"])[:5]
