"""``versions:``: one case file, an expectation per version (issue 14)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.case import load_case, load_case_text
from harness.errors import CaseError
from harness.result import Expectation
from harness.run.judge import as_expected

ROOT = Path(__file__).resolve().parents[3]
KIP101 = ROOT / "cases" / "kafka" / "regressions" / "kip-101-loss.yaml"
HEAD = """system: kafka
cluster: kafka-zk
broker_config: {num.io.threads: "4", log.flush.interval.messages: "1"}
steps:
  - produce: {count: 10}
"""
TWO = HEAD + """versions:
  - label: old-protocol
    version: "3.9.2"
    broker_config: {inter.broker.protocol.version: 0.11.0-IV1, num.io.threads: "8"}
    source: a public source
    expect: {reproduces: [lost-write], min_acked: 5}
  - version: "3.9.2"
    expect: {min_acked: 10}
"""


@pytest.fixture(autouse=True, scope="module")
def _fixed_points() -> Iterator[None]:
    """The real points table (the package's conftest pretends a fixed one): the shipped
    case arms points of the regression library."""
    yield


def _error(text: str, version: str | None = None) -> CaseError:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "case.yaml", version=version)
    return info.value


def test_the_first_entry_runs_when_no_version_is_named() -> None:
    case = load_case_text(TWO, "case.yaml")
    assert case.variant == "old-protocol" and case.variants == ("old-protocol", "3.9.2")
    assert case.version == "3.9.2" and case.source == "a public source"
    # the entry's settings are laid over the case's
    assert dict(case.broker_config) == {"num.io.threads": "8", "log.flush.interval.messages": "1",
                                        "inter.broker.protocol.version": "0.11.0-IV1"}
    assert case.expect.verdict == "fail" and case.expect.reproduces == {"lost-write"}
    assert case.expect.min_acked == 5


def test_an_entry_is_named_by_its_label_or_by_a_version_only_it_has() -> None:
    fixed = load_case_text(TWO, "case.yaml", version="3.9.2")
    assert fixed.variant == "3.9.2" and fixed.expect.verdict == "pass"
    assert dict(fixed.broker_config) == {"num.io.threads": "4", "log.flush.interval.messages": "1"}
    assert load_case_text(TWO, "case.yaml", version="old-protocol").variant == "old-protocol"


def test_an_unknown_version_names_the_labels() -> None:
    err = _error(TWO, version="0.10.2.2")
    assert err.line == 7 and "no entry for '0.10.2.2' (labels: old-protocol, 3.9.2)" in str(err)


def test_two_entries_of_one_version_need_labels_to_be_told_apart() -> None:
    text = HEAD + 'versions:\n  - {version: "3.9.2", label: a, expect: {}}\n' \
        '  - {version: "3.9.2", label: b, expect: {}}\n'
    assert "2 entries run version 3.9.2: name one by its label (a, b)" in str(_error(text, "3.9.2"))
    same = HEAD + 'versions:\n  - {version: "3.9.2", expect: {}}\n  - {version: "3.9.2", expect: {}}\n'
    err = _error(same)
    assert err.line == 8 and err.field == "versions[1].label" and "also entry 0's" in str(err)


@pytest.mark.parametrize("entries, line, field, message", [
    ("versions: []\n", 6, "versions", "non-empty list"),
    ('versions:\n  - {label: x, expect: {}}\n', 7, "versions[0].version", "missing required key"),
    ('versions:\n  - {version: "0.8.0", expect: {}}\n', 7, "versions[0].version",
     "not available for cluster kafka-zk"),
    ('versions:\n  - {version: "3.9.2", expekt: {}}\n', 7, "versions[0]", "unknown key 'expekt'"),
    ('versions:\n  - {version: "3.9.2"}\n', 7, "expect", "each entry of versions needs an expect"),
    ('versions:\n  - {version: "3.9.2", expect: {reproduces: [lost-write], verdict: pass}}\n', 7,
     "versions[0].expect.verdict", "expects verdict fail"),
    ('versions:\n  - {version: "3.9.2", expect: {reproduces: [unseen]}}\n', 7,
     "versions[0].expect.reproduces", "unseen is reproduced only when the consumers read the rest"),
])
def test_bad_entries_are_one_error_naming_line_and_field(entries: str, line: int, field: str,
                                                         message: str) -> None:
    err = _error(HEAD + entries)
    assert (err.line, err.field) == (line, field) and message in str(err)


def _rows(lost: int, acked_ok: bool = True, hit_ok: bool = True) -> list[Expectation]:
    return [Expectation("lost-write", "<= 0", lost, lost <= 0),
            Expectation("duplicate", "<= 0", 0, True),
            Expectation("acknowledged writes", ">= 5", 5, acked_ok),
            Expectation("injection hit", True, hit_ok, hit_ok)]


def test_a_reproducing_case_is_as_expected_only_when_the_named_anomaly_alone_fails() -> None:
    case = load_case_text(TWO, "case.yaml")
    assert as_expected(case, _rows(1), "fail")
    assert not as_expected(case, _rows(0), "pass")  # the bug did not show
    # a failure of anything else is not the bug reproduced
    assert not as_expected(case, _rows(1, acked_ok=False), "fail")
    assert not as_expected(case, _rows(1, hit_ok=False), "fail")
    fixed = load_case_text(TWO, "case.yaml", version="3.9.2")
    assert as_expected(fixed, _rows(0), "pass") and not as_expected(fixed, _rows(1), "fail")


def test_the_shipped_kip_101_case_states_the_bug_and_the_fix() -> None:
    buggy = load_case(KIP101)
    assert buggy.variants == ("3.9.2-ibp-0.11.0-IV1", "3.9.2", "0.10.2.2", "0.11.0.3", "2.0.1")
    assert buggy.outside_ci == {"3.9.2-ibp-0.11.0-IV1", "3.9.2", "2.0.1"}  # CI: 0.10.2.2, 0.11.0.3
    assert load_case(KIP101, version="2.0.1").expect.verdict == "pass"
    old = load_case(KIP101, version="0.10.2.2")
    assert old.version == "0.10.2.2" and old.expect.reproduces == {"lost-write"}
    assert load_case(KIP101, version="0.11.0.3").expect.verdict == "pass"
    assert buggy.broker_config["inter.broker.protocol.version"] == "0.11.0-IV1"
    assert buggy.expect.reproduces == {"lost-write"} and buggy.expect.injection_hit is True
    fixed = load_case(KIP101, version="3.9.2")
    assert fixed.expect.verdict == "pass" and fixed.expect.anomalies["lost-write"] == 0
    assert "inter.broker.protocol.version" not in fixed.broker_config


def test_entries_marked_ci_false_are_listed_for_the_full_matrix() -> None:
    text = HEAD + 'versions:\n  - {version: "3.9.2", label: a, expect: {}}\n' \
        '  - {version: "3.9.2", label: b, ci: false, expect: {}}\n'
    assert load_case_text(text, "case.yaml").outside_ci == {"b"}
    err = _error(HEAD + 'versions:\n  - {version: "3.9.2", ci: "no", expect: {}}\n')
    assert err.field == "versions[0].ci"


TRUNCATE = """system: kafka
cluster: kafka-zk
steps:
  - inject: {point: TRUNCATE-AFTER}
  - kill9: leader
versions:
  - {version: "0.10.2.2", expect: {injection_hit: true}}
  - {version: "3.9.2", expect: {injection_hit: true}}
"""


def test_a_later_entry_whose_version_lacks_a_point_fails_validation_whichever_entry_is_loaded() -> None:
    for version in (None, "0.10.2.2"):
        err = _error(TRUNCATE, version)
        assert (err.line, err.field) == (4, "steps[0].inject.point")
        assert "point 'TRUNCATE-AFTER' not available for kafka 3.9.2" in str(err)
        assert str(err).endswith("(in the versions entry '3.9.2')")


def test_a_cluster_override_validates_the_entry_it_runs_only() -> None:
    # `harness run --cluster` runs one entry elsewhere; the others name the file's cluster
    text = HEAD + 'versions:\n  - {version: "3.9.2", expect: {}}\n  - {version: "0.10.2.2", expect: {}}\n'
    assert load_case_text(text, "case.yaml", cluster="kafka-kraft").cluster == "kafka-kraft"
    assert load_case_text(text, "case.yaml").variants == ("3.9.2", "0.10.2.2")


def test_an_empty_version_override_is_an_error_not_the_default() -> None:
    err = _error(HEAD, version="")
    assert err.field == "version (override)" and "an empty version was given" in str(err)
    assert load_case_text(HEAD, "case.yaml").version == "3.9.2"


def test_a_top_level_version_beside_versions_is_an_error() -> None:
    text = HEAD.replace("steps:", 'version: "2.0.1"\nsteps:')
    err = _error(text + 'versions:\n  - {version: "3.9.2", expect: {}}\n')
    assert (err.line, err.field) == (4, "version") and "runs the version of each entry" in str(err)
