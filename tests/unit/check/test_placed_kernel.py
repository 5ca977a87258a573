"""The checker's position kernel (harness.check.anomalies.positions, its rows read by
harness.check.placed) on hand-built rows, without Spark:
each position and sequence anomaly where it is put and nowhere else, nulls as
groups of their own, and the same answer whatever the order of the rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.check.anomalies.arrays import (
    IN_COLUMNS,
    OUT_COLUMNS,
    TAG_ACK,
    TAG_POLL,
    TAG_REPLICA,
    TAG_RESET,
    TAG_RPOLL,
)
from harness.check.anomalies.positions import anomalies
from harness.check.placed import id_hash, kernel

RUN, REC, ACKS = 0, 1, 2
T = 77  # a topic hash


def row(tag: int, off: int | None, mh: int | None, *, client: int | None = 1, seq: int | None = None,
        part: int | None = 0, topic: int | None = T, grp: int | None = None,
        unit: int | None = None) -> dict[str, Any]:
    if grp is None:
        grp = {TAG_RPOLL: REC, TAG_POLL: RUN, TAG_ACK: ACKS}.get(tag)
    return {"client_h": None if tag == TAG_REPLICA else client, "grp": grp, "topic_h": topic, "part": part,
            "pl": None if off is None else -1, "pe": off, "pb": None if off is None else -1, "mh": mh,
            "seq": seq, "tag": tag, "unit": unit}


def run(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The kernel's anomaly rows, as sorted tuples of OUT_COLUMNS (kind 0, pe 6, seq 8,
    seq2 9, qe 11, n 13)."""
    values = {c: np.array([0 if r[c] is None else r[c] for r in rows], dtype=np.int64) for c in IN_COLUMNS}
    valid = {c: np.array([r[c] is not None for r in rows], dtype=bool) for c in IN_COLUMNS}
    out = anomalies(values, valid)
    found = [tuple(out["kind"][i] if c == "kind" else (int(out[c][i]) if out["valid:" + c][i] else None)
                   for c in OUT_COLUMNS) for i in range(out["kind"].size)]
    return sorted(found, key=repr)


def kinds(rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in run(rows):
        out[r[0]] = out.get(r[0], 0) + 1
    return out


def recovered(n: int, *, client: int = 9, seq0: int = 1000) -> list[dict[str, Any]]:
    """A recovery reader that reads offsets 0..n-1 (ids 100+offset)."""
    return [row(TAG_RPOLL, o, 100 + o, client=client, seq=seq0 + o) for o in range(n)]


def test_a_clean_partition_has_no_anomaly() -> None:
    rows = recovered(5) + [row(TAG_POLL, o, 100 + o, seq=o) for o in range(5)]
    rows += [row(TAG_ACK, o, 100 + o, client=2, seq=50 + o) for o in range(5)]
    assert run(rows) == []
    assert run([]) == []


def test_two_ids_at_one_offset_and_replicas_that_disagree() -> None:
    rows = recovered(3) + [row(TAG_POLL, 1, 555, seq=1)]
    rows += [row(TAG_REPLICA, 2, 102), row(TAG_REPLICA, 2, 666)]
    found = run(rows)
    assert [(r[0], r[6]) for r in found] == [("inconsistent-offsets", 1), ("inconsistent-offsets", 2),
                                              ("replica-divergence", 2)]


def test_a_truncated_record_read_and_never_replaced_is_a_truncation_skip() -> None:
    """KIP-320's silent skip: a consumer read 555 and 556 at offsets 2 and 3, the log now
    holds 102 and 103 there, and the consumer (or another) went on at offset 4 without
    reading them. Read again after a reset (truncation detected), they are no skip; nor
    where nobody read a later record of the log, or the recovery read holds two ids."""
    log = recovered(6)
    skipped = [row(TAG_POLL, 0, 100, seq=1), row(TAG_POLL, 1, 101, seq=2), row(TAG_POLL, 2, 555, seq=3),
               row(TAG_POLL, 3, 556, seq=4), row(TAG_POLL, 4, 104, client=2, seq=5)]
    found = run(log + skipped)
    assert [(r[0], r[6]) for r in found if r[0] == "truncation-skip"] == [("truncation-skip", 2),
                                                                          ("truncation-skip", 3)]
    assert kinds(log + skipped) == {"truncation-skip": 2, "inconsistent-offsets": 2}
    reread = skipped + [row(TAG_RESET, None, None, seq=5, grp=RUN), row(TAG_POLL, 2, 102, seq=6),
                        row(TAG_POLL, 3, 103, seq=7)]
    assert kinds(log + reread) == {"inconsistent-offsets": 2}
    assert kinds(log + skipped[:4]) == {"inconsistent-offsets": 2}  # nobody read past them
    two = log + [row(TAG_RPOLL, 2, 777, client=8, seq=2000)] + skipped
    assert kinds(two) == {"truncation-skip": 1, "inconsistent-offsets": 2}


def test_a_record_read_again_without_a_reset_is_a_silent_reread() -> None:
    """A consumer position moved back by the client library without telling the
    application (an out-of-range reset to the beginning): the records it had read come
    again. After a reset, or by another client, or at Pulsar positions (redeliveries), no."""
    log = recovered(4)
    first = [row(TAG_POLL, o, 100 + o, seq=o) for o in range(3)]
    again = [row(TAG_POLL, o, 100 + o, seq=10 + o) for o in range(3)]
    assert kinds(log + first + again) == {"silent-reread": 3, "nonmonotonic-poll": 1}
    rereads = [r for r in run(log + first + again) if r[0] == "silent-reread"]
    assert [(r[6], r[8], r[9]) for r in rereads] == [(0, 10, 0), (1, 11, 1), (2, 12, 2)]
    # reads past the reread (above every offset read twice) and below it: none of them a reread
    past = [row(TAG_POLL, o, 100 + o, seq=20 + o) for o in range(3, 6)]
    assert kinds(recovered(6) + first + again + past) == {"silent-reread": 3, "nonmonotonic-poll": 1}
    reset = [row(TAG_RESET, None, None, seq=5, grp=RUN)]
    assert kinds(log + first + reset + again) == {}
    other = [row(TAG_POLL, o, 100 + o, client=2, seq=10 + o) for o in range(3)]
    assert kinds(log + first + other) == {}
    pulsar = [{**r, "pl": 7} for r in log + first + again]
    assert kinds(pulsar) == {"nonmonotonic-poll": 1}
    # another id read at that offset between the two reads of one: still a reread of it
    between = [row(TAG_POLL, 0, 100, seq=1), row(TAG_POLL, 0, 555, seq=2), row(TAG_POLL, 0, 100, seq=3)]
    assert kinds(recovered(1) + between)["silent-reread"] == 1
    # offsets too large to pack with the sequence: the same answer
    huge = [{**r, "pe": r["pe"] + (1 << 50)} if r["pe"] is not None else r for r in log + first + again]
    assert kinds(huge) == {"silent-reread": 3, "nonmonotonic-poll": 1}


def test_sequence_anomalies_are_judged_against_the_row_before() -> None:
    rows = recovered(6)
    # consumer 1 (run): 0, 1, then 4 (skips 2 and 3, both recovered), then 3 (goes back)
    rows += [row(TAG_POLL, o, 100 + o, seq=s) for s, o in enumerate([0, 1, 4, 3])]
    # producer 2: sent 0 then 1, acked at 5 then 2
    rows += [row(TAG_ACK, 5, 105, client=2, seq=10), row(TAG_ACK, 2, 102, client=2, seq=11)]
    found = run(rows)
    skip = [r for r in found if r[0] == "poll-skip"]
    assert len(skip) == 1 and skip[0][6] == 4 and skip[0][11] == 1 and skip[0][-1] == 2  # 2 skipped
    back = [r for r in found if r[0] == "nonmonotonic-poll"]
    assert len(back) == 1 and (back[0][6], back[0][11]) == (3, 4)
    send = [r for r in found if r[0] == "nonmonotonic-send"]
    assert len(send) == 1 and (send[0][6], send[0][11], send[0][8], send[0][9]) == (2, 5, 11, 10)
    assert kinds(rows) == {"poll-skip": 1, "nonmonotonic-poll": 1, "nonmonotonic-send": 1}


def test_the_int_kinds_are_sequence_anomalies_within_one_unit() -> None:
    """Two rows of one unit (a poll call's line, a transaction) give the int- kind as well;
    rows of different units, or without one, only the plain kind."""
    rows = recovered(6)
    # one poll call reads 0, 1, 4 (a skip inside it); the next call reads 3 (back: not int)
    rows += [row(TAG_POLL, o, 100 + o, seq=s, unit=u) for s, o, u in [(0, 0, 50), (1, 1, 50), (2, 4, 50),
                                                                    (3, 3, 53)]]
    # a transaction's two sends acked at 5 then 2 (int); then one outside it at 1 (not int)
    rows += [row(TAG_ACK, 5, 105, client=2, seq=10, unit=7), row(TAG_ACK, 2, 102, client=2, seq=11, unit=7),
             row(TAG_ACK, 1, 101, client=2, seq=12)]
    assert kinds(rows) == {"poll-skip": 1, "int-poll-skip": 1, "nonmonotonic-poll": 1,
                           "nonmonotonic-send": 2, "int-nonmonotonic-send": 1}
    # the int- row is its plain row under another name
    found = run(rows)
    for kind in ("poll-skip", "nonmonotonic-send"):
        plain = {r[1:] for r in found if r[0] == kind}
        assert {r[1:] for r in found if r[0] == f"int-{kind}"} <= plain
    # the same read back in one call: int-nonmonotonic-poll
    rows[-4] = row(TAG_POLL, 3, 103, seq=3, unit=50)
    assert kinds(rows)["int-nonmonotonic-poll"] == 1


def test_a_skip_over_offsets_nobody_recovered_is_no_skip() -> None:
    rows = recovered(2) + [row(TAG_POLL, o, 100 + o, seq=s) for s, o in enumerate([0, 1, 7])]
    assert run(rows) == []


def test_a_reset_between_two_polls_ends_the_comparison() -> None:
    rows = recovered(6) + [row(TAG_POLL, 4, 104, seq=1), row(TAG_RESET, None, None, seq=2, grp=RUN),
                           row(TAG_POLL, 0, 100, seq=3)]
    assert run(rows) == []
    # a reset of the recovery phase does not cover the run phase
    rows[-2] = row(TAG_RESET, None, None, seq=2, grp=REC)
    assert kinds(rows) == {"nonmonotonic-poll": 1}


def test_sequences_are_per_client_phase_and_partition_nulls_included() -> None:
    rows = recovered(3)
    # two consumers interleaved in file order, each in order by itself
    rows += [row(TAG_POLL, 2, 102, client=1, seq=1), row(TAG_POLL, 0, 100, client=3, seq=2)]
    # a partition of its own, and a consumer without a name (client null)
    rows += [row(TAG_POLL, 0, 200, part=1, seq=3), row(TAG_POLL, 1, 101, client=None, seq=4),
             row(TAG_POLL, 0, 100, client=None, seq=5)]
    assert kinds(rows) == {"nonmonotonic-poll": 1}
    # a position without a topic binds nothing: two ids there are no inconsistent-offsets
    rows = [row(TAG_ACK, 0, 1, topic=None, seq=1, client=2), row(TAG_ACK, 0, 2, topic=None, seq=2, client=3)]
    assert run(rows) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([TAG_RPOLL, TAG_POLL, TAG_ACK, TAG_REPLICA, TAG_RESET]),
                          st.integers(0, 5), st.integers(0, 3), st.integers(1, 3), st.integers(0, 1),
                          st.booleans()), max_size=40),
       st.randoms(use_true_random=False))
def test_the_order_of_the_rows_does_not_matter(spec: list[tuple[int, ...]], rnd: Any) -> None:
    rows = [row(tag, None if tag == TAG_RESET else off, None if tag == TAG_RESET else mid, client=client,
                part=part, seq=i, grp=(REC if rec else RUN) if tag == TAG_RESET else None)
            for i, (tag, off, mid, client, part, rec) in enumerate(spec)]
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert run(shuffled) == run(rows)
    # and so do rows already in position order
    def place(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(x for c in ("topic_h", "part", "pl", "pe", "pb")
                     for x in (r[c] is not None, r[c] or 0)) + (r["tag"],)
    assert run(sorted(shuffled, key=place)) == run(rows)


def test_the_arrow_entry_point_reads_nulls_and_writes_the_schema() -> None:
    rows = recovered(3) + [row(TAG_POLL, 1, 555, seq=1), row(TAG_RESET, None, None, seq=2, grp=RUN)]
    batch = pa.RecordBatch.from_pydict({c: pa.array([r[c] for r in rows], pa.int64()) for c in IN_COLUMNS})
    out = list(kernel(iter([batch.slice(0, 2), batch.slice(2)])))
    assert len(out) == 1 and out[0].schema.names == list(OUT_COLUMNS)
    got = out[0].to_pylist()
    assert [(r["kind"], r["pe"], r["seq2"]) for r in got] == [("inconsistent-offsets", 1, None)]
    assert list(kernel(iter([]))) == []


def test_the_id_hash_is_the_string_s_and_tells_ids_apart() -> None:
    """Any string (lengths 0 to 40, NUL bytes, non-ASCII): the same hash in any array
    (sliced, chunked, large strings), null for null; no two of 300k distinct ids alike."""
    odd = ["", "a", "a\x00", "\x00", "é", "x" * 7, "x" * 8, "x" * 9, "x" * 39 + "y", "x" * 40, None]
    ids = odd + [f"p{i % 7}-{i}" for i in range(200_000)] + [f"{i:x}" * (i % 5) for i in range(1, 100_000)]
    whole = id_hash(pa.array(ids)).to_pylist()
    assert whole[odd.index(None)] is None
    assert len(set(whole)) == len(set(ids))  # one per distinct string (None's hash: None)
    single = {s: id_hash(pa.array([s], pa.string())).to_pylist()[0] for s in odd}
    assert [single[s] for s in odd] == whole[:len(odd)]
    assert id_hash(pa.array(ids).slice(3, 1000)).to_pylist() == whole[3:1003]
    assert id_hash(pa.chunked_array([ids[:5], ids[5:50]])).to_pylist() == whole[:50]
    assert id_hash(pa.array(ids, pa.large_string())).to_pylist() == whole
    assert id_hash(pa.array([], pa.string())).to_pylist() == []


def test_kernel_tasks_take_turns_when_together_they_would_not_fit() -> None:
    from harness.check.engine.memory import task_slots
    from harness.check.placed import PEAK_BYTES_PER_ROW as PEAK

    rows = [4_000_000, 1_000_000, 3_000_000]
    both = (4_000_000 + 3_000_000) * PEAK
    assert task_slots(rows, both, 2, PEAK) == 2
    assert task_slots(rows, both - 1, 2, PEAK) == 1  # the two largest would not fit together
    assert task_slots(rows, 1 << 62, 8, PEAK) == 3  # never more than there are tasks
    assert task_slots([], 0, 2, PEAK) == 1
    assert task_slots(rows, 0, 1, PEAK) == 1


def test_a_partition_gives_memory_back_only_when_memory_is_short(monkeypatch: Any) -> None:
    """The collector returns freed memory to the system (malloc_trim) while it joins a
    partition's columns only when that partition, beside another as big, would not fit in
    the memory budget: at 10M records (a few million rows, gigabytes free) it keeps it."""
    from harness.check import placed
    from harness.check.engine import memory

    gives: list[int] = []
    monkeypatch.setattr(placed, "give_back", lambda: gives.append(1))
    monkeypatch.setattr(memory, "GIVE_BACK_ROWS", 4)
    rows = [row(TAG_POLL, i, 10 + i, seq=i) for i in range(5)]
    table = pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.int64()) for c in IN_COLUMNS]))
    peak = 2 * 5 * placed.PEAK_BYTES_PER_ROW

    def joined(budget: int) -> tuple[Any, Any]:
        monkeypatch.setattr(memory, "memory_budget", lambda: budget)
        collected = placed._Collector()
        collected.add(table)
        return collected.done()

    kept = joined(peak)  # fits, just
    assert gives == []
    given = joined(peak - 1)
    assert len(gives) == 1 + len(IN_COLUMNS)  # before the joins, then after each column
    assert all(np.array_equal(kept[0][c], given[0][c]) for c in IN_COLUMNS)
    gives.clear()
    monkeypatch.setattr(memory, "GIVE_BACK_ROWS", 6)  # a small partition never gives back
    joined(0)
    assert gives == []


def test_constant_columns_are_held_as_one_value_and_give_the_same_anomalies() -> None:
    from harness.check.placed import _Collector

    rows = [row(TAG_POLL, 0, 10, seq=1), row(TAG_POLL, 0, 11, seq=2), row(TAG_POLL, 2, 12, seq=3),
            row(TAG_RPOLL, 0, 10, seq=4, client=2), row(TAG_RPOLL, 1, 13, seq=5, client=2)]
    table = pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.int64()) for c in IN_COLUMNS]))
    collected = _Collector()
    collected.add(table.slice(0, 2))
    collected.add(table.slice(2))
    values, valid = collected.done()
    assert values["topic_h"].strides == (0,) and values["part"].strides == (0,)  # one value each
    assert values["tag"].dtype == np.int8 and values["seq"].strides != (0,)
    found = anomalies(values, valid)
    plain = anomalies({c: np.array([r[c] or 0 for r in rows], np.int64) for c in IN_COLUMNS},
                      {c: np.array([r[c] is not None for r in rows]) for c in IN_COLUMNS})
    assert sorted(found["kind"].tolist()) == sorted(plain["kind"].tolist()) == [
        "inconsistent-offsets", "nonmonotonic-poll", "poll-skip"]
    for name in OUT_COLUMNS[1:]:
        assert sorted(found[name].tolist()) == sorted(plain[name].tolist()), name
