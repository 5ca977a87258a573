"""One descriptor per fault and one profile per system, read by the case schema, the runner
and the chaos step (no table of its own in each)."""

from __future__ import annotations

import pytest

from harness import faults
from harness.case import load_case_text
from harness.case.model import (
    ACTIONS,
    CHAOS_FAULTS,
    FAULTS,
    NODE_FAULTS,
    PROFILES,
    SYSTEMS,
    roles_for,
    systems_with_role,
)
from harness.errors import CaseError
from harness.history import RESTORED_BY


def test_every_described_fault_is_a_nemesis_primitive_and_every_primitive_is_described() -> None:
    assert set(FAULTS) == set(faults.FAULTS)


def test_the_step_and_chaos_vocabularies_come_from_the_descriptors() -> None:
    assert NODE_FAULTS == ("kill9", "powerloss", "stop", "remove", "start", "pause", "resume", "diskfull",
                           "readonly", "corrupt", "snapshot", "rollback", "clock", "replace", "join",
                           "decommission")
    assert CHAOS_FAULTS == ("kill9", "powerloss", "stop", "pause", "partition", "degrade", "diskfull",
                            "readonly", "clock")
    assert set(FAULTS) <= set(ACTIONS)


def test_each_chaos_fault_is_healed_by_a_fault_that_heals_and_as_the_history_pairs_them() -> None:
    for name in CHAOS_FAULTS:
        heal = FAULTS[name].healed_by
        assert heal is not None and FAULTS[heal].healed_by is None
        assert RESTORED_BY[name] == heal  # the checker pairs a fault with its heal the same way


def test_a_fault_a_system_lacks_is_an_error_from_its_descriptor() -> None:
    assert FAULTS["powerloss"].missing_on("kafka") is None
    lacks = ("powerloss cuts Kafka log segments, or any node's files on a lazy disk (disk: lazy); "
             "pulsar has none")
    assert FAULTS["powerloss"].missing_on("pulsar") == lacks
    assert FAULTS["powerloss"].missing_on("pulsar", "lazy") is None
    assert FAULTS["corrupt"].missing_on("kafka") is not None
    assert FAULTS["corrupt"].missing_on("kafka", "lazy") is None
    with pytest.raises(CaseError, match=r"steps\[0\].powerloss: powerloss cuts Kafka log segments, "
                                        r".*pulsar has none \(use kill9\)"):
        load_case_text("system: pulsar\ncluster: pulsar\nsteps: [{powerloss: owner}]\n", "c.yaml")


def test_every_system_has_a_profile_and_roles_are_told_by_it() -> None:
    assert set(PROFILES) == set(SYSTEMS)
    assert systems_with_role("owner") == ("pulsar",) and systems_with_role("leader") == ("kafka",)
    assert systems_with_role("any-broker") == tuple(PROFILES) and systems_with_role("leadr") == ()
    for system, profile in PROFILES.items():
        assert set(profile.chaos_targets) <= set(roles_for(system))


def test_a_third_system_gets_its_own_roles_not_another_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.case import model

    third = model.SystemProfile("redpanda", ("leader", "follower"), ("leader",))
    monkeypatch.setattr(model, "PROFILES", {**PROFILES, "redpanda": third})
    assert model.roles_for("redpanda") == ("leader", "follower", *model.COMMON_ROLES)
    assert model.systems_with_role("leader") == ("kafka", "redpanda")
    assert model.systems_with_role("owner") == ("pulsar",)
