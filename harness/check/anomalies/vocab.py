"""The checker's shared vocabulary, each word defined once: event codes and row flags (the
ingest's), per-id flags (the per-id step's), transaction states, the slack of a
read_committed poll against its commit, the uniform anomaly row, and what an example is
built from (names behind hashes, the events and acknowledgements looked up again).

No Spark and no NumPy here: the ingest, the per-id step, the families and the reference
read it alike, and it goes to the Python workers by value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from harness.history import TXN_ACTIONS, TXN_STATUSES

__all__ = ["FLAG_VALUES", "PRECOMMIT_SLACK_S", "TS_NAMES", "Ack", "Details", "Event", "Names", "Place",
           "place_of", "pos_of", "txa"]

# Event type codes (the ingest's ``code`` column).
INVOKE, OK, FAIL, INFO, POLL, RESET, META, REPLICA, TXN = range(9)
# Row flags (the ingest's ``flags`` column): read by the recovery read, written by an
# aborted transaction (``"txn": "aborted"``), read by a read_committed client.
ROW_REC, ROW_ABORTED, ROW_RC = 1, 2, 4
#: a ``txn`` event's ``txa``: action index * 4 + status index (harness.history TXN_ACTIONS, TXN_STATUSES)
TXN_ACTION = {name: i for i, name in enumerate(TXN_ACTIONS)}
TXN_STATUS = {name: i for i, name in enumerate(TXN_STATUSES)}


def txa(action: str, status: str) -> int:
    """The ``txa`` code of a ``txn`` event's action and status."""
    return TXN_ACTION[action] * 4 + TXN_STATUS[status]


# Per-id flags (the per-id step's ``f`` column): invoked, acknowledged, failed, outcome
# unknown, polled in the run, in the recovery read, written by an aborted transaction,
# read by a read_committed client, at more than one position, read by a
# read_uncommitted client, in a read_committed recovery read.
F_INV, F_OK, F_FAIL, F_INFO, F_RUN, F_REC, F_ABORTED, F_RC_READ, F_DUP, F_RU_READ, F_REC_RC = (
    1 << i for i in range(11))
#: every per-id flag value is below this
FLAG_VALUES = 1 << 11

# A transaction's state (per id: its transaction's); docs/checker.md "Transactions".
TS_NONE, TS_COMMITTED, TS_SEEN, TS_ABORTED, TS_UNKNOWN = range(5)
TS_NAMES = {TS_COMMITTED: "committed", TS_SEEN: "seen-committed", TS_ABORTED: "aborted",
            TS_UNKNOWN: "unknown"}
#: a poll this much earlier than the commit call is before it (stamps may be reused for 0.5 ms)
PRECOMMIT_SLACK_S = 0.001

LONG, STRING = "long", "string"
#: the uniform anomaly row's sort key: its fields and types (an anomaly's first examples
#: are the least keys)
SK_FIELDS = (("s", STRING), ("a", LONG), ("k", STRING), ("b", LONG), ("c", LONG), ("d", LONG), ("e", LONG))
#: the uniform anomaly row's generic example: what a family's example builder reads
EX_FIELDS = (("mid", STRING), ("seq", LONG), ("seq2", LONG), ("client", LONG), ("topic", LONG),
             ("part", LONG), ("rec", "boolean"), ("pl", LONG), ("pe", LONG), ("pb", LONG), ("ql", LONG),
             ("qe", LONG), ("qb", LONG), ("n", LONG), ("sub", STRING), ("key", STRING), ("client2", LONG),
             ("mid2", STRING), ("tx", STRING), ("n2", LONG), ("t1", "double"), ("t2", "double"))

#: a position in a (topic, partition): topic hash, partition, (pl, pe, pb)
Place = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Names:
    """Client and topic names behind their hashes, the read_committed clients, and the
    (topic hash, partition) pairs that polls read."""

    clients: dict[int, str]
    topics: dict[int, str]
    rc_clients: frozenset[int]
    partitions: tuple[tuple[int, int], ...]

    def rank(self, names: Mapping[int, str]) -> dict[int, int]:
        return {h: i for i, (h, _) in enumerate(sorted(names.items(), key=lambda kv: kv[1]))}

    def client(self, h: int | None) -> str | None:
        return self.clients.get(h) if h is not None else None

    def topic(self, h: int | None) -> str | None:
        return self.topics.get(h) if h is not None else None


class Ack(NamedTuple):
    """An id's acknowledged position, from the per-id table."""

    mid: str
    ack_topic: int | None
    ack_part: int | None
    ack_pl: int | None
    ack_pe: int | None
    ack_pb: int | None


@dataclass(frozen=True)
class Event:
    """An event the details read: a row of the events or of an id bucket (which hold no
    names: those come from their hashes). ``mid`` and ``seq`` are typed ``Any``: the
    examples sort them where they are set (polls have both)."""

    code: int
    client: str | None
    client_h: int | None
    mid: Any
    topic: str | None
    topic_h: int | None
    part: int | None
    pl: int | None
    pe: int | None
    pb: int | None
    flags: int
    seq: Any
    node: str | None
    t: float | None

    @classmethod
    def of(cls, d: Mapping[str, Any], names: Names) -> Event:
        client = d["client"] if d["client"] is not None else names.clients.get(d["client_h"])
        topic = d["topic"] if d["topic"] is not None else names.topics.get(d["topic_h"])
        return cls(code=d["code"], client=client, client_h=d["client_h"], mid=d["mid"], topic=topic,
                   topic_h=d["topic_h"], part=d["part"], pl=d["pl"], pe=d["pe"], pb=d["pb"],
                   flags=d["flags"], seq=d["seq"], node=d["node"], t=d["t"])

    @property
    def phase(self) -> str:
        """A poll's phase: the recovery read's, or the run's."""
        return "recovery" if self.flags & ROW_REC else "run"


@dataclass(frozen=True)
class Details:
    """What the examples of a check looked up again: the events of their ids, sends and
    positions, and the acknowledgements of their ids and positions."""

    events: list[Event]
    acks: list[Ack]


def place_of(ex: Any) -> Place:
    """The position of an anomaly row's example (topic hash, partition, position)."""
    return (ex.topic, ex.part, ex.pl, ex.pe, ex.pb)


def pos_of(row: Any, prefix: str = "p") -> tuple[int, int, int] | None:
    """A row's position ``(l, e, b)`` from its ``<prefix>l``, ``<prefix>e``, ``<prefix>b``
    fields; None when it has none."""
    first = getattr(row, prefix + "l")
    return None if first is None else (first, getattr(row, prefix + "e"), getattr(row, prefix + "b"))
