"""Reads Kafka log segment files (record batch format v2, uncompressed records).

Used to dump each replica's log after a run (offset, leader epoch, CRC and the
message id at the start of the value) and to read a killed broker's log end
offset straight from its files, while it is down. Compressed batches are
reported per batch (their records are not decoded); control batches
(transaction markers) are flagged.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import BackendError
from ..history import parse_mid

if TYPE_CHECKING:
    from ..backend.cluster import Node

__all__ = ["tail_log_end", "SegmentRecord", "read_segment", "read_partition_dir", "log_end_offset", "LOG_DIR",
           "PARTITION_DIR", "Cut", "batch_spans", "read_checkpoint", "unflushed_cuts",
           "CLEAN_SHUTDOWN_MARKER", "RECOVERY_CHECKPOINT", "HW_CHECKPOINT", "CHECKPOINTS",
           "node_checkpoint"]

#: ``log.dirs`` inside the broker containers (compose/images/kafka/entrypoint.sh).
LOG_DIR = "/data/kafka"
#: In each log dir: the offsets below which every partition's data was flushed to disk.
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
#: In each log dir: each partition's high watermark, as the replica manager last wrote it.
HW_CHECKPOINT = "replication-offset-checkpoint"
#: The checkpoint files a case may await, by the name it gives them.
CHECKPOINTS = {"recovery-point": RECOVERY_CHECKPOINT, "high-watermark": HW_CHECKPOINT}
#: Written at a clean shutdown; without it the next start recovers the logs.
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

_HEADER = struct.Struct(">qiiBIhiqqqhii")  # 61 bytes of a v2 batch header
PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(frozen=True)
class SegmentRecord:
    offset: int
    epoch: int
    crc: int  # of the batch holding the record
    mid: str | None
    control: bool = False


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zig-zag
        shift += 7


_LEGACY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes of a v0/v1 message
_MAGIC_AT = 16  # a v2 batch's magic and a v0/v1 message's are both 16 bytes in


def read_segment(data: bytes) -> Iterator[SegmentRecord]:
    """Records of one ``.log`` segment; stops at a torn tail (a crash mid-append).

    Message format v2 (Kafka 0.11+) batches and v0/v1 messages (0.10 and older brokers,
    or a newer one writing an old format; their records carry no leader epoch: -1)."""
    pos = 0
    while pos + _MAGIC_AT + 1 <= len(data):
        if data[pos + _MAGIC_AT] in (0, 1):
            record, end = _legacy_message(data, pos)
            if record is None:
                return
            yield record
            pos = end
            continue
        if pos + _HEADER.size > len(data):
            return
        (base, length, epoch, magic, crc, attrs, last_delta, _ts0, _ts1, _pid, _pepoch,
         _seq, count) = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != 2 or length <= 0 or end > len(data):
            return
        control = bool(attrs & 0x20)
        if attrs & 0x07 or control:  # compressed or transaction marker: one entry per batch
            yield SegmentRecord(base + last_delta, epoch, crc, None, control=control)
        else:
            p = pos + _HEADER.size
            for _ in range(count):
                rec_len, p = _varint(data, p)
                rec_end = p + rec_len
                q = p + 1  # attributes
                _, q = _varint(data, q)  # timestamp delta
                off_delta, q = _varint(data, q)
                klen, q = _varint(data, q)
                q += max(klen, 0)
                vlen, q = _varint(data, q)
                value = data[q:q + vlen] if vlen > 0 else None
                yield SegmentRecord(base + off_delta, epoch, crc, parse_mid(value))
                p = rec_end
        pos = end


def _legacy_message(data: bytes, pos: int) -> tuple[SegmentRecord | None, int]:
    """The v0/v1 message at ``pos`` and where the next begins; (None, pos) when torn."""
    if pos + _LEGACY.size > len(data):
        return None, pos
    offset, size, crc, magic, attrs = _LEGACY.unpack_from(data, pos)
    end = pos + 12 + size
    if size < 14 or end > len(data):
        return None, pos
    if attrs & 0x07:  # a compressed wrapper: its offset is its last inner record's
        return SegmentRecord(offset, -1, crc, None), end
    q = pos + _LEGACY.size + (8 if magic == 1 else 0)
    klen = struct.unpack_from(">i", data, q)[0]
    q += 4 + max(klen, 0)
    vlen = struct.unpack_from(">i", data, q)[0]
    value = data[q + 4:q + 4 + vlen] if vlen > 0 else None
    return SegmentRecord(offset, -1, crc, parse_mid(value)), end


def read_partition_dir(files: Iterable[tuple[str, bytes]]) -> dict[tuple[str, int], list[SegmentRecord]]:
    """(topic, partition) -> records, from (path, content) pairs of a broker's log dir."""
    out: dict[tuple[str, int], list[SegmentRecord]] = {}
    for path, content in sorted(files):
        parts = path.split("/")
        if len(parts) < 2 or not parts[-1].endswith(".log"):
            continue
        m = PARTITION_DIR.match(parts[-2])
        if not m:
            continue
        key = (m.group("topic"), int(m.group("partition")))
        out.setdefault(key, []).extend(read_segment(content))
    return out


def log_end_offset(records: list[SegmentRecord]) -> int:
    """The next offset to be written (0 for an empty log)."""
    return max((r.offset for r in records), default=-1) + 1


def tail_log_end(files: Iterable[tuple[str, bytes]]) -> int:
    """The log end offset of a partition from its newest segment alone (``files``: that
    segment, as its member name and bytes): the next offset after its last record, or its
    base offset (its file name) when it holds none yet."""
    end = 0
    for name, data in files:
        if name.endswith(".log"):
            base = int(name.rsplit("/", 1)[-1].removesuffix(".log"))
            end = max(end, base, log_end_offset(list(read_segment(data))))
    return end


def batch_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, start byte, end byte) of each whole v2 batch (or v0/v1
    message) of a segment."""
    spans = []
    pos = 0
    while pos + _MAGIC_AT + 1 <= len(data):
        if data[pos + _MAGIC_AT] in (0, 1):
            record, end = _legacy_message(data, pos)
            if record is None:
                break
            spans.append((record.offset, record.offset, pos, end))
            pos = end
            continue
        if pos + _HEADER.size > len(data):
            break
        fields = _HEADER.unpack_from(data, pos)
        base, length, magic, last_delta = fields[0], fields[1], fields[3], fields[6]
        end = pos + 12 + length
        if magic != 2 or length <= 0 or end > len(data):
            break
        spans.append((base, base + last_delta, pos, end))
        pos = end
    return spans


def read_checkpoint(text: str) -> dict[tuple[str, int], int]:
    """An offset checkpoint file of a log dir (``recovery-point-offset-checkpoint``):
    version line, count line, then ``topic partition offset`` lines."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    out: dict[tuple[str, int], int] = {}
    for parts in lines[2:]:
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def node_checkpoint(node: Node, name: str) -> dict[tuple[str, int], int]:
    """The offsets of the checkpoint file ``name`` in ``node``'s log dir, read from its
    files (works while it is down); empty when the file is not there yet."""
    try:
        files = list(node.container.get_files(f"{LOG_DIR}/{name}"))
    except BackendError:
        return {}
    return read_checkpoint(files[0][1].decode("utf-8", "replace")) if files else {}


@dataclass(frozen=True)
class Cut:
    """What a power loss takes from one segment: the bytes past the flushed position."""

    path: str  # the segment file, as read from the container
    topic: str
    partition: int
    recovery_point: int
    size_before: int
    size_after: int
    records_lost: int


#: Partitions the log manager does not checkpoint (the KRaft metadata log flushes itself).
_NOT_CHECKPOINTED = ("__cluster_metadata",)


def unflushed_cuts(files: Iterable[tuple[str, bytes]], checkpoint: dict[tuple[str, int], int],
                   topics: Collection[str] | None = None) -> list[tuple[Cut, bytes]]:
    """For each ``.log`` segment holding records at or past its partition's recovery point,
    the cut and the segment's bytes up to the first batch that reaches that point (a
    partition missing from the checkpoint was never flushed: its recovery point is 0).
    ``topics``: only the partitions of these topics (None: every topic)."""
    out = []
    for path, content in sorted(files):
        parts = path.split("/")
        if len(parts) < 2 or not parts[-1].endswith(".log"):
            continue
        m = PARTITION_DIR.match(parts[-2])
        if not m or m.group("topic") in _NOT_CHECKPOINTED:
            continue
        if topics is not None and m.group("topic") not in topics:
            continue
        key = (m.group("topic"), int(m.group("partition")))
        point = checkpoint.get(key, 0)
        spans = batch_spans(content)
        keep = next((start for _b, last, start, _e in spans if last >= point), None)
        if keep is None:
            continue  # every batch is below the recovery point
        lost = sum(1 for r in read_segment(content[keep:]))
        out.append((Cut(path, key[0], key[1], point, len(content), keep, lost), content[:keep]))
    return out
