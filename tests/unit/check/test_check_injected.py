"""Injected anomalies are found in exactly the injected numbers, with examples naming them;
clean histories give none. Each detector has a test here that fails without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from check_helpers import example_mids, profiles
from hypothesis import HealthCheck, given, settings

from harness.check import CheckResult, check_run, plan
from harness.history import BATCH_EVENTS, expand_batch, position_key, read_events
from harness.testing.synthetic import INJECTABLE, Expected, Profile, generate

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
    """Two of each anomaly in one history: a missing or miscounting detector fails this.
    (key-order exists only in Pulsar Key_Shared subscriptions.)"""
    kinds = [k for k in INJECTABLE if k != ("silent-reread" if system == "pulsar" else "key-order")]
    profile = Profile(records=3000, system=system, partitions=3, consumers=2, replicas=3, txn=True,
                      seed=7, inject=dict.fromkeys(kinds, 2), key_shared=system == "pulsar")
    expected = generate(tmp_path, profile)
    assert all(expected.anomalies[kind] >= 2 for kind in kinds)
    _assert_matches(check_run(tmp_path), expected)


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_a_big_check_reads_only_the_ids_that_can_be_anomalous(tmp_path, monkeypatch, system: str) -> None:
    """A big check (forced here: one Spark task per task row) evaluates its id anomalies
    over the ids whose flags can make one (harness.check.anomalies.ids.loud_flags, from the
    anomalies' own conditions), and every check its outcome counts over step 3's flag counts: the
    result is the small check's, from a fraction of the per-id table."""
    kinds = [k for k in INJECTABLE if k != ("silent-reread" if system == "pulsar" else "key-order")]
    profile = Profile(records=3000, system=system, partitions=3, consumers=2, replicas=3, txn=True,
                      seed=7, inject=dict.fromkeys(kinds, 2), key_shared=system == "pulsar")
    expected = generate(tmp_path, profile)
    small = check_run(tmp_path)
    init, anomalies = plan._Job.__init__, plan._Job._anomalies
    rows: dict[str, int] = {}

    def big(self: plan._Job, *args: Any) -> None:
        init(self, *args)
        self.frames.spread = True

    def counted(self: plan._Job, events: Any, mids: Any, *args: Any) -> Any:
        assert self.loud is not None
        rows["all"], rows["loud"] = mids.count(), self.loud.count()
        return anomalies(self, events, mids, *args)

    monkeypatch.setattr(plan._Job, "__init__", big)
    monkeypatch.setattr(plan._Job, "_anomalies", counted)
    result = check_run(tmp_path)
    _assert_matches(result, expected)
    assert result.anomalies == small.anomalies and result.examples == small.examples
    assert (result.counts, result.latency, result.transactions) == (small.counts, small.latency,
                                                                    small.transactions)
    print(rows)
    assert 0 < rows["loud"] < rows["all"] / 4, rows


def _lines(run: Path, kind: str) -> list[dict]:
    return [e for f in sorted(run.glob("history/*.jsonl")) for e in read_events(f, expand=False)
            if e["type"] == kind]


def test_clean_key_shared_redeliveries_are_no_key_order(tmp_path) -> None:
    """Redeliveries (a reset, then records read again) of a Key_Shared subscription are not
    first deliveries: no key-order. The history has them; run polls come in both line forms."""
    profile = Profile(records=3000, system="pulsar", key_shared=True, partitions=4, consumers=3,
                      rewinds=True, torn=False, seed=11, batch=20, plain=0.3)
    expected = generate(tmp_path, profile)
    polls, single = _lines(tmp_path, "polls"), _lines(tmp_path, "poll")
    # Redeliveries below an earlier delivery of their key: judged, they would be key-order.
    below, top = 0, {}
    for f in sorted(tmp_path.glob("history/consumer-*.jsonl")):
        for e in read_events(f):
            if e["type"] == "poll" and e["phase"] == "run":
                group, pos = (e["client"], e["partition"], e["key"]), position_key(e)
                below += e["redelivery"] == 1 and pos < top.get(group, pos)
                top[group] = max(top.get(group, pos), pos)
    assert below >= 3
    run = [e for e in polls + single if e["phase"] == "run"]
    assert {e["type"] for e in run} == {"poll", "polls"}
    assert {e.get("subscription_type") for e in run} == {"Key_Shared"}
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies and set(result.anomalies.values()) == {0}
    _assert_matches(result, expected)


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_batch_lines_read_as_their_events(tmp_path, system: str) -> None:
    """A history with polls and oks batches and the same history with every batch written
    out as its poll and ok events (harness.history.expand_batch) give the same result,
    examples included."""
    batched, expanded = tmp_path / "batched", tmp_path / "expanded"
    kinds = [k for k in INJECTABLE if k != ("silent-reread" if system == "pulsar" else "key-order")]
    expected = generate(batched, Profile(records=2500, system=system, partitions=3, consumers=2, replicas=2,
                                         txn=True, seed=5, inject=dict.fromkeys(kinds, 1),
                                         key_shared=system == "pulsar", plain=0.0))
    batches = {kind: 0 for kind in BATCH_EVENTS}
    for f in sorted(batched.glob("*/*.jsonl")):
        out = []
        for line in f.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                event = json.loads(line)
            except ValueError:
                out.append(line)  # torn and corrupt lines stay as they are
                continue
            if event.get("type") in BATCH_EVENTS:
                batches[event["type"]] += 1
                out += [json.dumps(e, separators=(",", ":")) + "\n" for e in expand_batch(event)]
            else:
                out.append(line)
        target = expanded / f.relative_to(batched)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(out), encoding="utf-8")
    assert min(batches.values()) > 10, batches
    assert not _lines(expanded, "polls") and not _lines(expanded, "oks")
    result, flat = check_run(batched), check_run(expanded)
    # the same but for the int- poll kinds: written out, one poll call's records are several
    # calls (lines), so nothing happens within one call any more
    calls = ("int-nonmonotonic-poll", "int-poll-skip")
    assert ({k: n for k, n in result.anomalies.items() if k not in calls},
            {k: x for k, x in result.examples.items() if k not in calls}) == \
        ({k: n for k, n in flat.anomalies.items() if k not in calls},
         {k: x for k, x in flat.examples.items() if k not in calls})
    assert [flat.anomalies[k] for k in calls] == [0, 0]
    # the same counts but those of lines: a batch is one line, its events are several, and
    # expand_batch drops the malformed batches that are skipped lines
    lines = ("lines", "skipped")
    assert {k: n for k, n in result.counts.items() if k not in lines} == \
        {k: n for k, n in flat.counts.items() if k not in lines}
    assert result.counts["skipped"] > flat.counts["skipped"] > 0
    assert result.anomalies == expected.anomalies
    # one of each; inconsistent-offsets also by replica-divergence and truncation-skip;
    # lost-write also by the phantom reads (inconsistent-offsets, truncation-skip) and the
    # torn transaction's missing send; unseen also by truncation-skip's record never read;
    # each plain sequence kind by its int-; with Kafka, nonmonotonic-poll also by
    # silent-reread, and each of those three double reads is a silent-reread
    twice = {"inconsistent-offsets": 3, "lost-write": 4, "unseen": 2, "nonmonotonic-send": 2,
             "nonmonotonic-poll": 2 if system == "pulsar" else 3, "silent-reread": 3, "poll-skip": 2}
    assert all(result.anomalies[k] == twice.get(k, 1) for k in kinds)


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
