"""The Kafka segment reader and the truncation-line parser, on synthetic inputs."""

from __future__ import annotations

import struct
import zlib

from harness.collect import parse_truncations, parse_unclean_elections
from harness.history import make_value
from harness.run.halts import failed_partitions
from harness.systems.kafka_segments import log_end_offset, read_partition_dir, read_segment


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _batch(base: int, epoch: int, values: list[bytes], attrs: int = 0) -> bytes:
    records = b""
    for i, v in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        records += _varint(len(body)) + body
    tail = struct.pack(">hiqqqhii", attrs, len(values) - 1, 0, 0, -1, -1, -1, len(values)) + records
    crc = zlib.crc32(tail)
    head = struct.pack(">qiiBI", base, 4 + 1 + 4 + len(tail), epoch, 2, crc)
    return head + tail


def test_reads_offsets_epochs_and_message_ids() -> None:
    data = _batch(0, 0, [make_value("p0-1", 50), make_value("p0-2", 50)]) + \
        _batch(2, 3, [make_value("p0-3", 10)])
    recs = list(read_segment(data))
    assert [(r.offset, r.epoch, r.mid) for r in recs] == [(0, 0, "p0-1"), (1, 0, "p0-2"), (2, 3, "p0-3")]
    assert log_end_offset(recs) == 3


def test_a_torn_tail_ends_the_segment_quietly() -> None:
    data = _batch(0, 0, [make_value("a-1")]) + _batch(1, 0, [make_value("a-2")])
    recs = list(read_segment(data[:-5]))
    assert [r.mid for r in recs] == ["a-1"]


def test_control_batches_are_flagged() -> None:
    recs = list(read_segment(_batch(0, 1, [b"\x00\x00\x00\x00"], attrs=0x20)))
    assert recs[0].control and recs[0].mid is None


def test_partition_dirs_group_records_by_topic_and_partition() -> None:
    files = [("t-1/00000000000000000000.log", _batch(0, 0, [make_value("x-1")])),
             ("t-1/00000000000000000000.index", b"junk"),
             ("my-topic-0/00000000000000000000.log", _batch(0, 0, [make_value("y-1")]))]
    out = read_partition_dir(files)
    assert set(out) == {("t", 1), ("my-topic", 0)}


LOG = """\
[2026-11-22 02:12:21,695] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Truncating partition chaos-x-0 with TruncationState(offset=100, completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=100) (kafka.server.ReplicaFetcherThread)
[2026-11-22 02:12:21,701] INFO [UnifiedLog partition=chaos-x-0, dir=/data/kafka] Truncating to offset 100 (kafka.log.UnifiedLog)
[2026-11-22 02:12:09,435] INFO [UnifiedLog partition=chaos-x-0, dir=/data/kafka] Truncating to 0 has no effect as the largest offset in the log is -1 (kafka.log.UnifiedLog)
[2026-11-22 02:12:22,000] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Truncating chaos-x-0 to offset 90 below high watermark 95 (kafka.server.ReplicaFetcherThread)
[2026-11-22 02:12:23,000] INFO [Log partition=other-0, dir=/data] Truncating to offset 7 (kafka.log.Log)
[2026-11-22 02:12:24,000] INFO Truncating log chaos-x-0 to offset 3. (kafka.log.Log)
[2026-11-22 02:12:25,000] INFO something unrelated
"""


def test_truncation_lines_of_every_known_format() -> None:
    found = parse_truncations("kafka-1", LOG, topic="chaos-x")
    assert [(t["source"], t["offset"], t["effective"]) for t in found] == [
        ("fetcher", 100, True), ("log", 100, True), ("log", 0, False), ("below-hw", 90, True),
        ("legacy", 3, True)]
    assert found[0]["reason"].startswith("leader epoch and offset EpochEndOffset")
    assert found[3]["hw"] == 95 and found[0]["partition"] == 0
    assert len(parse_truncations("kafka-1", LOG)) == 6  # no topic filter: other-0 too


ELECTIONS = """\
[2026-12-07 06:49:19,077] INFO Setting new leader for topicId xymyJK_7RCWRP3ANipEKxw, partition 0 to 1 using an unclean election. (org.apache.kafka.controller.PartitionChangeBuilder)
[2026-12-07 06:49:19,153] INFO [QuorumController id=1] UNCLEAN partition change for chaos-x-0 with topic ID xymyJK_7RCWRP3ANipEKxw: isr: [] -> [1], leader: -1 -> 1, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 2 -> 3, lastKnownElr: [1] -> [], partitionEpoch: 7 -> 8 (org.apache.kafka.controller.ReplicationControlManager)
[2026-12-07 06:49:19,155] INFO [QuorumController id=1] UNCLEAN partition change for __consumer_offsets-12 with topic ID GEnJvDw8QJq4CtSYL2cPBA: isr: [2] -> [3], leader: -1 -> 3, leaderEpoch: 3 -> 4, partitionEpoch: 6 -> 7 (org.apache.kafka.controller.ReplicationControlManager)
"""


def test_a_kraft_controllers_unclean_elections_with_the_leader_and_its_epoch() -> None:
    found = parse_unclean_elections("kafka-2", ELECTIONS, topic="chaos-x")
    assert [(e["node"], e["topic"], e["partition"], e["leader"], e["epoch"], e["isr"]) for e in found] == [
        ("kafka-2", "chaos-x", 0, 1, 3, "[]")]
    assert found[0]["time"] is not None and "UNCLEAN" in found[0]["line"]
    every = parse_unclean_elections("kafka-2", ELECTIONS)
    assert [(e["topic"], e["partition"], e["leader"], e["epoch"], e["isr"]) for e in every][1:] == [
        ("__consumer_offsets", 12, 3, 4, "[2]")]
    assert parse_unclean_elections("kafka-2", LOG) == []


def test_a_power_loss_cuts_each_segment_back_to_its_partitions_recovery_point() -> None:
    from harness.systems.kafka_segments import batch_spans, read_checkpoint, unflushed_cuts

    first = _batch(0, 0, [b"a", b"b"]) + _batch(2, 0, [b"c"]) + _batch(3, 1, [b"d", b"e"])
    assert [(b, last) for b, last, _, _ in batch_spans(first)] == [(0, 1), (2, 2), (3, 4)]
    checkpoint = read_checkpoint("0\n2\nt 0 3\nflushed 0 99\n")
    assert checkpoint == {("t", 0): 3, ("flushed", 0): 99}
    files = [("kafka/t-0/00000000000000000000.log", first),
             ("kafka/t-0/00000000000000000000.index", b"\0" * 8),
             ("kafka/flushed-0/00000000000000000000.log", first),
             ("kafka/new-0/00000000000000000000.log", first),  # created after the checkpoint
             ("kafka/__cluster_metadata-0/00000000000000000000.log", first)]
    cuts = {c.topic: (c, kept) for c, kept in unflushed_cuts(files, checkpoint)}
    assert set(cuts) == {"t", "new"}  # flushed: nothing past 99; the metadata log flushes itself
    cut, kept = cuts["t"]
    assert (cut.recovery_point, cut.records_lost) == (3, 2)
    assert [r.offset for r in read_segment(kept)] == [0, 1, 2]
    assert cut.size_after == len(kept) < cut.size_before == len(first)
    new, kept_new = cuts["new"]
    assert (new.recovery_point, new.records_lost, kept_new) == (0, 5, b"")
    # a run cuts its own topic only: a reused cluster keeps earlier runs' topics
    assert [c.topic for c, _ in unflushed_cuts(files, checkpoint, topics=("new",))] == ["new"]


def _legacy(offset: int, value: bytes, magic: int = 1) -> bytes:
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 0) if magic == 1 else b"") + \
        struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def test_reads_the_message_format_of_kafka_0_10() -> None:
    from harness.systems.kafka_segments import batch_spans

    data = _legacy(0, make_value("p0-1", 20), magic=0) + _legacy(1, make_value("p0-2", 20)) + \
        _legacy(2, make_value("p0-3", 20))[:-3]  # torn
    recs = list(read_segment(data))
    assert [(r.offset, r.epoch, r.mid) for r in recs] == [(0, -1, "p0-1"), (1, -1, "p0-2")]
    assert [(b, last) for b, last, _, _ in batch_spans(data)] == [(0, 0), (1, 1)]
    # a broker that switched format keeps old messages before new batches
    mixed = _legacy(0, make_value("p0-1", 20)) + _batch(1, 4, [make_value("p0-2", 20)])
    assert [(r.offset, r.epoch) for r in read_segment(mixed)] == [(0, -1), (1, 4)]


#: Kafka 3.9.2 with inter.broker.protocol.version 0.11.0-IV1 (an exploration run): kafka-3,
#: the old leader, truncated to its high watermark 11 while its new leader's log had diverged
#: at offset 10; the fetcher could not append and gave the partition up
FAILED = """\
[2026-12-07 09:19:36,256] INFO [Broker id=3] Follower {tp} starts at leader epoch 2 from offset 312 with partition epoch 2 and high watermark 11. Current leader is 2.
[2026-12-07 09:19:38,551] INFO [UnifiedLog partition={tp}, dir=/data/kafka] Truncating to offset 11 (kafka.log.UnifiedLog)
[2026-12-07 09:19:38,626] ERROR [ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Unexpected error occurred while processing data for partition {tp} at offset 11 (kafka.server.ReplicaFetcherThread)
kafka.common.UnexpectedAppendOffsetException: Unexpected offset in append to {tp}. First offset 10 is less than the next offset 11.
\tat kafka.log.UnifiedLog.append(UnifiedLog.scala:860)
[2026-12-07 09:19:38,627] WARN [ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Partition {tp} marked as failed (kafka.server.ReplicaFetcherThread)
"""


def test_a_partition_a_fetcher_gave_up_is_found_until_a_new_leader_epoch() -> None:
    text = FAILED.format(tp="t-1")
    assert failed_partitions(text, "t", 3) == {1: "kafka.common.UnexpectedAppendOffsetException: Unexpected "
                                                  "offset in append to t-1. First offset 10 is less than "
                                                  "the next offset 11."}
    assert failed_partitions(text, "u", 3) == {} and failed_partitions(text, "t", 1) == {}
    later = text + "[t] INFO [Broker id=3] Follower t-1 starts at leader epoch 3 from offset 11\n"
    assert failed_partitions(later, "t", 3) == {}
