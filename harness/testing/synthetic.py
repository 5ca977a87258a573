"""Synthetic run directories for the checker's tests and bench.

``generate(run_dir, Profile(records=1000, inject={"lost-write": 2}))`` writes
``history/*.jsonl`` (producers, run consumers, the recovery reader) and, with
``replicas > 0``, ``replicas/*.jsonl``, and returns an :class:`Expected`: every
anomaly count and outcome count a correct checker reports for it.

The model. Producer ``k`` sends message ``p{k}-{g}`` to a random partition;
most sends are ok, some fail, some are info (timeout), some never complete.
Each partition's log holds the ok sends, about half of the info and unacked
ones, records of aborted transactions (with ``txn``; a failed send whose
records stay in the log) and now and then a record that is not ours (null mid).
Run consumer ``c`` reads the partitions ``p`` with ``p % consumers == c``; even
consumers are read_committed and skip aborted records; now and then one resets
and re-reads a few records (clean; with Pulsar, redeliveries). The recovery
reader (read_committed) reads every committed record; every replica holds every
record of the log.

Producers write as a real client does: their sends mostly as ``invokes`` lines and
their acknowledgements mostly as ``oks`` lines (batches of up to ``Profile.batch``),
some as single ``invoke`` and ``ok`` lines.
Consumers write what they read as a real client does: mostly ``polls`` lines
(batches of up to ``Profile.batch`` records, cut at resets and topic changes),
and now and then (``Profile.plain``) a batch as single ``poll`` lines; each line
takes the next tick of the consumer's clock (``t``). Pulsar batches leave out
``offsets`` or write it null; unkeyed batches write ``keys`` null. With
``Profile.key_shared`` (Pulsar), records have keys and the run consumers form
one Key_Shared subscription (each consumer still reads whole partitions).

Injections (each at its own place, away from the others):

``lost-write``
    an ok record is missing from the recovery read and the replicas.
``unseen``
    ok records appended at the end of the first partition after the run
    consumers stopped: only the recovery read has them.
``duplicate``
    an ok record is in the log twice, in a row (its ack names the first).
``inconsistent-offsets``
    a run consumer first reads a phantom (an info send) at a record's
    position, resets, and reads the real record there.
``replica-divergence``
    the last replica holds a phantom at a record's position (also one
    ``inconsistent-offsets``; needs two replicas or more).
``nonmonotonic-send``
    two consecutive ok sends of one producer to one partition swap positions.
``nonmonotonic-poll``
    a run consumer reads a record twice in a row without a reset.
``poll-skip``
    a run consumer skips a record, reads the next, then resets and reads both.
``silent-reread`` (Kafka)
    a run consumer reads a record twice in a row without a reset (also a
    ``nonmonotonic-poll``; with Kafka every injected ``nonmonotonic-poll`` is a
    ``silent-reread`` too).
``int-nonmonotonic-poll``, ``int-poll-skip``
    the same within one poll call: both records in one ``polls`` line (the plain kinds are
    cut into two lines; each int- kind also counts as its plain kind).
``int-nonmonotonic-send``
    a transaction of two sends to one partition whose positions are swapped (also a
    ``nonmonotonic-send``).
``truncation-skip``
    a run consumer reads a phantom (an info send) at a record's position and goes on to
    the next record without reading the real one (also an ``inconsistent-offsets``, a
    ``lost-write`` (the phantom) and an ``unseen`` (the real record)).
``aborted-read``
    a read_committed consumer reads a record of an aborted transaction.
``key-order`` (Pulsar, ``key_shared``)
    two adjacent records of one key: client ``consumer-early`` (in the
    subscription) polls the later one just before the partition's consumer polls
    the earlier one (which then reads both; the later one is a redelivery).
``torn-transaction``
    a committed transaction (``tx``) of two sends at the end of a partition, the second
    missing from the recovery read and the replicas (so also a ``lost-write``).
``precommitted-read``
    a committed transaction of one send whose commit call comes after every poll of it.
``unexpected``
    a record that was never sent (``zz-...``) is in the log.

Consequences counted with the injections: the phantom of ``inconsistent-offsets`` is an
info send a run consumer read, so it counts as committed (docs/checker.md) and, absent from
the recovery read, as a ``lost-write`` too.

Transactions. ``Profile.txn`` marks some failed sends as written by an aborted
transaction (``"txn": "aborted"`` on their fail, the legacy form) and adds, in the first
chunk, transactions in the ``tx`` form (sends with ``tx``, ``txn`` events for the commit or
abort): two committed, one aborted (its records stay in the log as aborted records), one
whose commit timed out and whose records no reader sees (unknown), and one whose commit
timed out and whose records the readers see (seen-committed). Transaction records go at the
end of their partition's log (sends are invoked last; at the end their acks stay in order).

With ``torn``, a line that is not JSON sits in the middle of the first producer's
file and malformed ``polls`` lines (lists of different lengths, ...) in the middle of
the first consumer's: they are dropped like a corrupt line; and the consumer and
recovery files end in a torn line. Each of them is a skipped line (the ``skipped``
count; ``lines`` counts every history line). With ``torn_replicas``, each replica file
begins with three lines the checker cannot read (not JSON, another type, a string offset:
``replica-skipped``; ``replica-lines`` counts every replica line).

With ``no_mid``, that many ok sends (plain ones, away from the injections) are
acknowledged without their message id (a null in an ``oks`` line's ``mids``, an ``ok``
line without ``mid``): the checker cannot judge them (``unjudged-ok``); read by the run
consumer and the recovery read, they count as unacked and present, their ids not lost.
The first producer's file also gets an ``invoke``, a ``fail``, an ``info`` and an
``invokes`` line of two records without ids: with those acks, the ``unjudged`` sends.

Records are made in chunks of ``Profile.chunk``: chunk ``j`` uses its own
position range (Kafka offsets from ``j * stride``, Pulsar ledgers from ``1 + j
* partitions``), so chunks are independent, stream to disk in bounded memory,
and can be made by several processes. Injections go into the first chunk.
"""

from __future__ import annotations

import multiprocessing
import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness.anomalies import anomaly
from harness.check.result import ANOMALIES, COUNTS
from harness.clusters import SYSTEMS

__all__ = ["INJECTABLE", "Expected", "Profile", "generate"]

#: what a Profile can inject: every anomaly of a history and its replicas; not a copier's
#: (harness.testing.copier_history) nor those of Pulsar's per-bookie dump
#: (harness.testing.bookie_dump)
INJECTABLE = tuple(k for k in ANOMALIES if anomaly(k).family not in ("copies", "bookies"))

_T0 = 1_700_000_000.0
_KEYS = 6  # distinct keys of keyed (key_shared) records
_EARLY = "consumer-early"  # the client of injected key-order violations
#: sentinel reads of a consumer (no record): end the current poll call (line) here; or keep
#: the reads up to _CLOSE in one polls line
_CUT: tuple[int, None, str, int] = (-1, None, "cut", 0)
_OPEN: tuple[int, None, str, int] = (-1, None, "open", 0)
_CLOSE: tuple[int, None, str, int] = (-1, None, "close", 0)
#: the count of a transaction by how it ends
_TXN_COUNT = {"commit": "txn-committed", "abort": "txn-aborted", "timeout": "txn-unknown"}
#: the sends without ids that ``Profile.no_mid`` adds to the first producer's file
_SENDS_WITHOUT_IDS = 5


#: system -> whether its history lines use Pulsar's layout (see harness/history.py)
_PULSAR_LAYOUT = {"kafka": False, "pulsar": True}


@dataclass(frozen=True)
class Profile:
    """What to generate. ``inject`` maps anomaly names to how many to inject."""

    records: int = 1000
    system: str = "kafka"  # kafka | pulsar
    topics: int = 1
    partitions: int = 3  # per topic
    producers: int = 2
    consumers: int = 2
    replicas: int = 0
    txn: bool = False
    rewinds: bool = True
    torn: bool = True
    seed: int = 0
    inject: Mapping[str, int] = field(default_factory=dict)
    chunk: int = 20_000
    key_shared: bool = False  # pulsar: keyed records, run consumers in one Key_Shared subscription
    batch: int = 300  # at most this many records per polls line
    plain: float = 0.1  # share of batches written as single poll lines
    no_mid: int = 0  # ok sends acknowledged without their message id (module docstring)
    torn_replicas: bool = False  # lines in each replica file that the checker cannot read

    def __post_init__(self) -> None:
        unknown = set(self.inject) - set(INJECTABLE)
        if unknown:
            raise ValueError(f"anomalies this generator cannot inject: {sorted(unknown)} (a copier's: "
                             f"harness.testing.copier_history)")
        if self.system not in SYSTEMS:
            raise ValueError(f"system must be one of {', '.join(SYSTEMS)}, not {self.system!r}")
        if min(self.topics, self.partitions, self.producers, self.consumers, self.chunk) < 1:
            raise ValueError("topics, partitions, producers, consumers and chunk must be >= 1")
        if self.inject.get("replica-divergence") and self.replicas < 2:
            raise ValueError("replica-divergence needs replicas >= 2")
        if self.key_shared and not self.pulsar:
            raise ValueError("key_shared needs system pulsar")
        if self.inject.get("key-order") and not self.key_shared:
            raise ValueError("key-order needs key_shared (and system pulsar)")
        if self.batch < 1 or not 0 <= self.plain <= 1:
            raise ValueError("batch must be >= 1 and plain within [0, 1]")
        if self.no_mid < 0:
            raise ValueError("no_mid must be >= 0")

    @property
    def pulsar(self) -> bool:
        """Pulsar positions and fields (ledger/entry/batch, redelivery) instead of Kafka's."""
        return _PULSAR_LAYOUT[self.system]


@dataclass(frozen=True)
class Expected:
    """What a correct checker reports: all anomaly and outcome counts, and for each
    injected anomaly the message ids its examples may name; and how many lines were written."""

    anomalies: dict[str, int]
    counts: dict[str, int]
    mids: dict[str, frozenset[str]]
    lines: int


def generate(run_dir: str | Path, profile: Profile, *, workers: int = 1) -> Expected:
    """Write a synthetic run into ``run_dir`` (whose history/ must not exist yet)."""
    run = Path(run_dir)
    if (run / "history").exists():
        raise FileExistsError(f"{run / 'history'} exists")
    (run / "history").mkdir(parents=True)
    if profile.replicas:
        (run / "replicas").mkdir(exist_ok=True)
    jobs = [(profile, j, lo, min(lo + profile.chunk, profile.records))
            for j, lo in enumerate(range(0, profile.records, profile.chunk))]
    jobs.append((profile, len(jobs), profile.records, profile.records + profile.inject.get("unseen", 0)))
    counts: Counter[str] = Counter()
    lines = 0
    mids: dict[str, set[str]] = {}
    files: dict[str, IO[str]] = {}
    try:
        for out in _outputs(jobs, workers):
            for name, text in out.files.items():
                if name not in files:
                    files[name] = open(run / name, "w", encoding="utf-8")
                files[name].write(text)
            counts.update(out.counts)
            lines += out.lines
            for kind, ids in out.mids.items():
                mids.setdefault(kind, set()).update(ids)
        if profile.torn:
            torn = _tear(files)
            counts.update(lines=torn, skipped=torn)
    finally:
        for fh in files.values():
            fh.close()
    anomalies = {kind: profile.inject.get(kind, 0) for kind in ANOMALIES}
    anomalies["inconsistent-offsets"] += anomalies["replica-divergence"] + anomalies["truncation-skip"]
    anomalies["unseen"] += anomalies["truncation-skip"]
    # consequences (module docstring): the phantom read and the torn transaction's lost send
    anomalies["lost-write"] += anomalies["inconsistent-offsets"] - anomalies["replica-divergence"]
    anomalies["lost-write"] += anomalies["torn-transaction"]
    for kind in ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip"):
        anomalies[kind] += anomalies[f"int-{kind}"]
    # a record read twice in a row: a silent-reread too, judged at Kafka offsets only
    anomalies["nonmonotonic-poll"] += anomalies["silent-reread"]
    anomalies["silent-reread"] = 0 if profile.pulsar else anomalies["nonmonotonic-poll"]
    return Expected(anomalies, {name: counts[name] for name in COUNTS},
                    {kind: frozenset(ids) for kind, ids in mids.items()}, lines)


def _outputs(jobs: list[tuple[Profile, int, int, int]], workers: int) -> Iterator[_Output]:
    """Chunk outputs in order, made here or by ``workers`` processes."""
    if workers <= 1:
        yield from map(_make_chunk, jobs)
        return
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        yield from pool.imap(_make_chunk, jobs)


def _tear(files: Mapping[str, IO[str]]) -> int:
    """Torn last lines (a crash mid-write) in the consumer and recovery files; how many."""
    torn = ('{"type":"poll","client":"recovery","t":1.0,"m":1.0,"mid":"torn-1","phase":"recovery",'
            '"topic":"topic-0","partition":0,"offset":1')
    n = 0
    for name, fh in files.items():
        if name.startswith("history/consumer-") or name == "history/recovery.jsonl":
            fh.write(torn)
            n += 1
    return n


@dataclass
class _Output:
    files: dict[str, str]
    counts: Counter[str]
    mids: dict[str, set[str]]
    lines: int


class _Rec:
    """A send: message id, producer, partition index, outcome, transaction state, its log
    entry, its key."""

    __slots__ = ("mid", "k", "p", "outcome", "txn", "entry", "key", "tx")

    def __init__(self, mid: str, k: int, p: int, outcome: str | None, txn: str | None) -> None:
        self.mid, self.k, self.p, self.outcome, self.txn = mid, k, p, outcome, txn
        self.entry: _Entry | None = None
        self.key: str | None = None
        self.tx: str | None = None  # the transaction (tx form) it was sent in


class _Entry:
    """A record in a partition's log. ``mark``/``arg`` say how readers deviate at it."""

    __slots__ = ("mid", "rec", "aborted", "lost", "reserved", "mark", "arg", "fields", "tm", "col")

    def __init__(self, mid: str | None, rec: _Rec | None, aborted: bool = False) -> None:
        self.mid, self.rec, self.aborted = mid, rec, aborted
        self.lost = self.reserved = False
        self.mark: str | None = None
        self.arg: str | int | None = None
        self.fields = self.tm = ""
        #: the position as the columns of a polls line hold it: partition, offset, ledger, entry, batch
        self.col: tuple[int, int | None, int | None, int | None, int | None] = (0, None, None, None, None)

    @property
    def key(self) -> str | None:
        return self.rec.key if self.rec is not None else None


def _make_chunk(job: tuple[Profile, int, int, int]) -> _Output:
    return _Chunk(*job).output()


class _Chunk:
    """Records ``lo..hi`` (chunk ``j``): the logs, the injections, then every file's lines."""

    def __init__(self, profile: Profile, j: int, lo: int, hi: int) -> None:
        self.pr = profile
        self.j = j
        self.tail = lo >= profile.records  # the unseen tail: only the recovery read has it
        self.rng = random.Random(f"{profile.seed}:{j}")
        self.nparts = profile.topics * profile.partitions
        self.logs: list[list[_Entry]] = [[] for _ in range(self.nparts)]
        self.recs: list[_Rec] = []
        self.extras = 0
        self.mids: dict[str, set[str]] = {}
        #: transactions in the tx form: (name, producer, outcome of its end, commit call time)
        self.txns: list[tuple[str, int, str, float | None]] = []
        self.tx_counts: Counter[str] = Counter()
        #: the ok sends acknowledged without their message id (Profile.no_mid)
        self.no_mid: set[str] = set()
        for g in range(lo, hi):
            self._send(g)
        if j == 0 and not self.tail:
            if profile.txn:
                self._background_transactions()
            self._inject()
            for _ in range(profile.no_mid):
                p, i = self._pick("no_mid", self._plain)
                self.no_mid.add(str(self.logs[p][i].mid))
        if profile.rewinds and not self.tail:
            self._place_rewinds()
        self._assign_positions()

    # -- the logs ---------------------------------------------------------------

    def _send(self, g: int) -> None:
        rng, pr = self.rng, self.pr
        if self.tail:
            rec = _Rec(f"p0-{g}", 0, 0, "ok", "committed" if pr.txn else None)
            self._note("unseen", rec.mid)
        else:
            u = rng.random()
            outcome = "ok" if u < 0.88 else "fail" if u < 0.93 else "info" if u < 0.97 else None
            aborted = pr.txn and outcome == "fail" and rng.random() < 0.5
            txn = ("aborted" if aborted else "committed" if outcome == "ok" else None) if pr.txn else None
            k = rng.randrange(pr.producers)
            rec = _Rec(f"p{k}-{g}", k, rng.randrange(self.nparts), outcome, txn)
            if pr.key_shared:
                rec.key = f"k{rng.randrange(_KEYS)}"
            if rng.random() < 0.01:
                self.logs[rec.p].append(_Entry(None, None))  # a record that is not ours
        self.recs.append(rec)
        in_log = (rec.outcome == "ok" or rec.txn == "aborted"
                  or (rec.outcome != "fail" and self.rng.random() < 0.5))
        if in_log:
            rec.entry = _Entry(rec.mid, rec, aborted=rec.txn == "aborted")
            self.logs[rec.p].append(rec.entry)

    def _extra(self, outcome: str, txn: str | None = None) -> _Rec:
        """A send made for an injection (phantoms, aborted records)."""
        self.extras += 1
        k = self.rng.randrange(self.pr.producers)
        rec = _Rec(f"p{k}-x{self.j}-{self.extras}", k, 0, outcome, txn)
        self.recs.append(rec)
        return rec

    def _consumer(self, p: int) -> int:
        return p % self.pr.consumers

    def _rc(self, consumer: int) -> bool:
        return consumer % 2 == 0

    def _readable(self, p: int, e: _Entry) -> bool:
        """Whether the run consumer of partition ``p`` reads ``e``."""
        return not e.aborted or not self._rc(self._consumer(p)) or e.mark == "rcread"

    def _plain(self, p: int, i: int) -> bool:
        """An ok, committed record, read by everyone, that no injection touched."""
        e = self.logs[p][i]
        return (e.rec is not None and e.rec.outcome == "ok" and not e.aborted and e.mark is None
                and e.rec.entry is e and not e.lost and e.rec.tx is None)

    # -- injections -------------------------------------------------------------

    def _note(self, kind: str, *mids: str | None) -> None:
        self.mids.setdefault(kind, set()).update(m for m in mids if m is not None)

    def _free(self, p: int, lo: int, hi: int) -> bool:
        log = self.logs[p]
        return lo >= 0 and hi < len(log) and not any(e.reserved for e in log[max(0, lo - 2):hi + 3])

    def _reserve(self, p: int, lo: int, hi: int) -> None:
        for e in self.logs[p][max(0, lo - 2):hi + 3]:
            e.reserved = True

    def _pick(self, kind: str, ok_at: Callable[[int, int], bool] | None = None,
              span: tuple[int, int] = (0, 0),
              parts: list[int] | None = None) -> tuple[int, int]:
        """A random (partition, index) where ``ok_at(p, i)`` holds and ``i+span`` is free; reserved."""
        places = [(p, i) for p in (parts if parts is not None else range(self.nparts))
                  for i in range(len(self.logs[p]))]
        self.rng.shuffle(places)
        for p, i in places:
            lo, hi = i + span[0], i + span[1]
            if self._free(p, lo, hi) and (ok_at is None or ok_at(p, i)):
                self._reserve(p, lo, hi)
                return p, i
        raise ValueError(f"too few records to inject {kind}: raise Profile.records")

    def _inject(self) -> None:
        for kind in INJECTABLE:
            if kind == "unseen":
                continue  # the tail chunk makes these
            for _ in range(self.pr.inject.get(kind, 0)):
                getattr(self, "_inject_" + kind.replace("-", "_"))()

    def _inject_lost_write(self) -> None:
        p, i = self._pick("lost-write", self._plain)
        self.logs[p][i].lost = True
        self._note("lost-write", self.logs[p][i].mid)

    def _inject_duplicate(self) -> None:
        p, i = self._pick("duplicate", self._plain)
        e = self.logs[p][i]
        copy = _Entry(e.mid, e.rec)
        copy.reserved = True
        self.logs[p].insert(i + 1, copy)
        self._note("duplicate", e.mid)

    def _inject_inconsistent_offsets(self) -> None:
        p, i = self._pick("inconsistent-offsets", self._plain)
        e = self.logs[p][i]
        e.mark, e.arg = "phantom", self._extra("info").mid
        self._note("inconsistent-offsets", e.mid, str(e.arg))
        self._note("lost-write", str(e.arg))  # an info send that was read: committed, and gone

    def _inject_replica_divergence(self) -> None:
        p, i = self._pick("replica-divergence", self._plain)
        e = self.logs[p][i]
        e.mark, e.arg = "diverge", self._extra("info").mid
        for kind in ("replica-divergence", "inconsistent-offsets"):
            self._note(kind, e.mid, str(e.arg))

    def _inject_truncation_skip(self) -> None:
        p, i = self._pick("truncation-skip", self._plain, span=(0, 1))
        e = self.logs[p][i]
        e.mark, e.arg = "truncated", self._extra("info").mid
        for kind in ("truncation-skip", "inconsistent-offsets"):
            self._note(kind, e.mid, str(e.arg))
        self._note("lost-write", str(e.arg))
        self._note("unseen", e.mid)

    def _inject_nonmonotonic_send(self) -> None:
        acked: dict[tuple[int, int], list[_Entry]] = {}
        for rec in self.recs:
            if rec.outcome == "ok" and rec.entry is not None:
                acked.setdefault((rec.k, rec.p), []).append(rec.entry)
        pairs = [(p, entries, n) for (_, p), entries in acked.items() for n in range(len(entries) - 1)]
        self.rng.shuffle(pairs)
        for p, entries, n in pairs:
            log = self.logs[p]
            at = (log.index(entries[n]), log.index(entries[n + 1]))
            if (all(self._plain(p, i) and self._free(p, i, i) for i in at)
                    and not any(e.mark == "swapped" for e in entries[max(0, n - 1):n + 3])):
                for i in at:
                    self._reserve(p, i, i)
                log[at[0]], log[at[1]] = log[at[1]], log[at[0]]
                entries[n].mark = entries[n + 1].mark = "swapped"
                self._note("nonmonotonic-send", entries[n + 1].mid)
                return
        raise ValueError("too few records to inject nonmonotonic-send: raise Profile.records")

    def _inject_nonmonotonic_poll(self) -> None:
        p, i = self._pick("nonmonotonic-poll", self._plain)
        self.logs[p][i].mark = "double"
        self._note("nonmonotonic-poll", self.logs[p][i].mid)
        if not self.pr.pulsar:
            self._note("silent-reread", self.logs[p][i].mid)

    def _inject_silent_reread(self) -> None:
        if self.pr.pulsar:
            raise ValueError("silent-reread is judged at Kafka offsets only")
        p, i = self._pick("silent-reread", self._plain)
        self.logs[p][i].mark = "double"
        for kind in ("silent-reread", "nonmonotonic-poll"):
            self._note(kind, self.logs[p][i].mid)

    def _inject_int_nonmonotonic_poll(self) -> None:
        p, i = self._pick("int-nonmonotonic-poll", self._plain)
        self.logs[p][i].mark = "idouble"
        rereads = () if self.pr.pulsar else ("silent-reread",)
        for kind in ("nonmonotonic-poll", "int-nonmonotonic-poll", *rereads):
            self._note(kind, self.logs[p][i].mid)

    def _inject_int_poll_skip(self) -> None:
        self._inject_poll_skip("iskip")

    def _inject_int_nonmonotonic_send(self) -> None:
        first, second = self._transaction(2, "commit")
        log = self.logs[first.p]
        assert log[-1] is second.entry and log[-2] is first.entry
        log[-1], log[-2] = log[-2], log[-1]
        for kind in ("nonmonotonic-send", "int-nonmonotonic-send"):
            self._note(kind, first.mid, second.mid)

    def _inject_poll_skip(self, mark: str = "skip") -> None:
        def ok(p: int, i: int) -> bool:
            log = self.logs[p]
            return (self._plain(p, i) and all(self._readable(p, log[x]) and log[x].mark is None
                                              for x in (i - 1, i + 1)))

        p, i = self._pick("poll-skip", ok, span=(-1, 1))
        log = self.logs[p]
        log[i].mark = mark
        key, later = log[i].key, log[i + 1].rec
        if log[i].rec is not None and later is not None and key == later.key \
                and key is not None:  # the later record is read first: not of the same key
            later.key = f"k{(int(key[1:]) + 1) % _KEYS}"
        self._note("poll-skip", log[i + 1].mid)
        if mark == "iskip":
            self._note("int-poll-skip", log[i + 1].mid)

    def _inject_key_order(self) -> None:
        def both_plain(p: int, i: int) -> bool:
            return self._plain(p, i) and self._plain(p, i + 1)

        p, i = self._pick("key-order", both_plain, span=(0, 1))
        first, later = self.logs[p][i], self.logs[p][i + 1]
        assert first.rec is not None and later.rec is not None
        later.rec.key = first.rec.key
        first.mark, first.arg = "early", later.mid
        later.mark = "early-next"
        self._note("key-order", first.mid)

    def _inject_aborted_read(self) -> None:
        rc_parts = [p for p in range(self.nparts) if self._rc(self._consumer(p))]
        p, i = self._pick("aborted-read", parts=rc_parts)
        rec = self._extra("fail", "aborted")
        rec.p = p
        rec.entry = _Entry(rec.mid, rec, aborted=True)
        rec.entry.mark, rec.entry.reserved = "rcread", True
        self.logs[p].insert(i, rec.entry)
        self._note("aborted-read", rec.mid)

    def _transaction(self, sends: int, end: str, *, in_log: bool = True, outcome: str = "ok",
                     commit_t: float | None = _T0) -> list[_Rec]:
        """A transaction (tx form) of ``sends`` records of one producer to one partition,
        appended to its log (aborted records when ``end`` is ``abort``); ``end``: ``commit``
        (ok), ``abort`` (ok) or ``timeout`` (the commit call's outcome is unknown).
        ``commit_t``: the time of the commit call (none for an abort)."""
        name = f"tx-{self.j}-{len(self.txns)}"
        k, p = self.rng.randrange(self.pr.producers), self.rng.randrange(self.nparts)
        self.txns.append((name, k, end, commit_t if end != "abort" else None))
        self.tx_counts[_TXN_COUNT[end]] += 1
        recs = []
        for _ in range(sends):
            rec = self._extra(outcome)
            rec.k, rec.p, rec.tx = k, p, name
            if self.pr.key_shared:
                rec.key = f"k{self.rng.randrange(_KEYS)}"
            if in_log:
                rec.entry = _Entry(rec.mid, rec, aborted=end == "abort")
                rec.entry.reserved = True
                self.logs[p].append(rec.entry)
            recs.append(rec)
        return recs

    def _background_transactions(self) -> None:
        """The transactions of ``Profile.txn`` (module docstring)."""
        for _ in range(2):
            self._transaction(2, "commit")
        self._transaction(2, "abort")
        self._transaction(1, "timeout", in_log=False, outcome="info")
        self._transaction(2, "timeout")
        self.tx_counts["txn-seen-committed"] += 1  # the last one: the readers see it

    def _inject_torn_transaction(self) -> None:
        kept, lost = self._transaction(2, "commit")
        assert lost.entry is not None
        lost.entry.lost = True
        self._note("torn-transaction", kept.mid, lost.mid)
        self._note("lost-write", lost.mid)

    def _inject_precommitted_read(self) -> None:
        # after every poll of this chunk (a consumer's clock: _tick)
        (rec,) = self._transaction(1, "commit", commit_t=_T0 + 0.001 * 8 * self._stride() * (self.j + 1) - 1)
        self._note("precommitted-read", rec.mid)

    def _inject_unexpected(self) -> None:
        p, i = self._pick("unexpected")
        self.extras += 1
        e = _Entry(f"zz-{self.j}-{self.extras}", None)
        e.reserved = True
        self.logs[p].insert(i, e)
        self._note("unexpected", e.mid)

    def _place_rewinds(self) -> None:
        """Clean rewinds: after a record, reset and re-read the last 1-3 records."""
        for p in range(self.nparts):
            if self.rng.random() < 0.6:
                m = self.rng.randint(1, 3)
                def untouched(p: int, i: int, m: int = m) -> bool:
                    return all(self.logs[p][x].mark is None and self._readable(p, self.logs[p][x])
                               for x in range(i - m + 1, i + 1))

                try:
                    _, i = self._pick("rewind", untouched, span=(-m + 1, 0), parts=[p])
                except ValueError:
                    continue
                log = self.logs[p]
                log[i].mark, log[i].arg = "rewind", m
                last = log[i].rec
                if self.pr.key_shared and last is not None:
                    # one key: the re-read records are below a first delivery of their key
                    for e in log[i - m + 1:i]:
                        if e.rec is not None:
                            e.rec.key = last.key

    # -- positions and lines ------------------------------------------------------

    def _stride(self) -> int:
        """Kafka offsets one chunk may use per partition (records, injected extras, gaps)."""
        return 4 * (self.pr.chunk + 2 * sum(self.pr.inject.values())) + 64

    def _assign_positions(self) -> None:
        pulsar = self.pr.pulsar
        for p, log in enumerate(self.logs):
            pn = p % self.pr.partitions
            offset, ledger, entry = self.j * self._stride(), 1 + self.j * self.nparts + p, 0
            batch, left = -1, 0  # Pulsar: index in the current batch, messages left in it
            for n, e in enumerate(log):
                x = (self.j * self.pr.chunk + n) * 0.001
                e.tm = f'"t":{_T0 + x:.3f},"m":{x:.3f}'
                if not pulsar:
                    e.fields = f'"partition":{pn},"offset":{offset},"epoch":1'
                    e.col = (pn, offset, None, None, None)
                    offset += 2 if self.pr.txn and self.rng.random() < 0.05 else 1  # a txn marker
                    continue
                if left == 0:
                    left, batch = (self.rng.randint(2, 4), 0) if self.rng.random() < 0.3 else (0, -1)
                e.fields = f'"partition":{pn},"offset":null,"ledger":{ledger},"entry":{entry},"batch":{batch}'
                e.col = (pn, None, ledger, entry, batch)
                if left:
                    left, batch = left - 1, batch + 1
                if not left:
                    entry += 1

    def _topic(self, p: int) -> str:
        return f"topic-{p // self.pr.partitions}"

    # -- consumer lines ------------------------------------------------------------
    # A read before it is written: (partition index, entry, mid, redelivery); entry None is
    # a reset of the partition.

    def _tick(self, clock: list[int]) -> float:
        """The next time stamp of a consumer's clock (one per line, increasing through the
        chunks: each chunk has its own range)."""
        clock[0] += 1
        return _T0 + 0.001 * (self.j * (8 * self._stride()) + clock[0])

    @staticmethod
    def _tm(t: float) -> str:
        return f'"t":{t:.6f},"m":{t - _T0:.6f}'

    def _sub(self, phase: str) -> str:
        """The batch fields of a Pulsar run-phase subscription."""
        if not self.pr.pulsar or phase != "run":
            return ""
        kind = "Key_Shared" if self.pr.key_shared else "Exclusive"
        return f',"subscription":"sub-0","subscription_type":"{kind}"'

    def _poll(self, client: str, phase: str, t: float, read: tuple[int, _Entry, str | None, int]) -> str:
        p, e, mid, redelivery = read
        pulsar = f',"redelivery":{redelivery}' if self.pr.pulsar else ""
        return (f'{{"type":"poll","client":"{client}",{self._tm(t)},"mid":{_js(mid)},"phase":"{phase}",'
                f'"topic":"{self._topic(p)}",{e.fields},"ts":1,"key":{_js(e.key)}{self._sub(phase)}'
                f'{pulsar}}}\n')

    def _polls(self, client: str, phase: str, t: float, reads: list[tuple[int, _Entry, str | None, int]],
               isolation: str | None) -> str:
        """One polls line: the reads as columns (all of one topic)."""
        n = len(reads)
        out = [f'{{"type":"polls","client":"{client}",{self._tm(t)},"phase":"{phase}",'
               f'"topic":"{self._topic(reads[0][0])}"{self._sub(phase)}']
        if isolation is not None:
            out.append(f',"isolation":"{isolation}"')
        out.append(self._position_columns([e for _, e, _, _ in reads]))
        keys = [e.key for _, e, _, _ in reads]
        out.append(f',"mids":[{",".join(_js(mid) for _, _, mid, _ in reads)}],"tss":[{",".join("1" * n)}],'
                   f'"keys":{"null" if keys.count(None) == n else "[" + ",".join(map(_js, keys)) + "]"}')
        if self.pr.pulsar:
            out.append(f',"redeliveries":{_list([r for _, _, _, r in reads])}')
        out.append("}\n")
        return "".join(out)

    def _reset(self, client: str, p: int, t: float) -> str:
        """A reset of partition ``p``; without injections, some name no partition (or topic):
        those cover every partition (topic), which could hide an injected anomaly."""
        topic, partition = f'"{self._topic(p)}"', str(p % self.pr.partitions)
        if not self.pr.inject and self.rng.random() < 0.5:
            partition = "null"
            if self.rng.random() < 0.3:
                topic = "null"
        return (f'{{"type":"reset","client":"{client}",{self._tm(t)},"topic":{topic},'
                f'"partition":{partition},"reason":"rebalance","from":null,"to":null}}\n')

    def _write_reads(self, out: list[str], client: str, phase: str, isolation: str | None,
                     reads: list[tuple[int, _Entry | None, str | None, int]]) -> None:
        """Reads and resets as lines: polls batches of up to ``Profile.batch`` records (cut at
        resets, topic changes and before an injected key-order record), some as poll lines."""
        clock = [0]
        batch: list[tuple[int, _Entry, str | None, int]] = []
        limit = self.rng.randint(1, self.pr.batch)
        held = False  # between _OPEN and _CLOSE: one polls line

        def flush(polls: bool = False) -> None:
            nonlocal limit
            if not batch:
                return
            if not polls and self.rng.random() < self.pr.plain:
                for i, read in enumerate(batch):
                    t = self._tick(clock)
                    if i == 0 and read[1].mark == "early":
                        self.early_t[read[1].mid] = t
                    out.append(self._poll(client, phase, t, read))
            else:
                t = self._tick(clock)
                if batch[0][1].mark == "early":
                    self.early_t[batch[0][1].mid] = t
                out.append(self._polls(client, phase, t, batch, isolation))
            batch.clear()
            limit = self.rng.randint(1, self.pr.batch)

        for p, e, mid, redelivery in reads:
            if e is None:
                flush(polls=mid == "close")
                if mid in ("open", "close"):
                    held = mid == "open"
                elif mid != "cut":
                    out.append(self._reset(client, p, self._tick(clock)))
                continue
            if batch and not held and (
                    len(batch) >= limit or batch[0][0] // self.pr.partitions != p // self.pr.partitions
                    or (e.mark == "early" and mid == e.mid)):
                flush()
            batch.append((p, e, mid, redelivery))
        flush()

    def output(self) -> _Output:
        files: dict[str, list[str]] = {}
        run_mids: set[str] = set()
        rec_mids: set[str] = set()
        self.early_t: dict[str | None, float] = {}
        self.junk = 0  # history lines written that a checker skips
        if self.j == 0:
            self._meta(files)
            if self.pr.no_mid:
                self._sends_without_ids(files)
        self._producer_lines(files)
        if not self.tail:
            for c in range(self.pr.consumers):
                self._consumer_lines(files, c, run_mids)
            self._early_lines(files)
        self._recovery_lines(files, rec_mids)
        self._replica_lines(files)
        texts = {name: "".join(lines) for name, lines in files.items()}
        counts = self._counts(run_mids, rec_mids)
        counts["lines"] = sum(text.count("\n") for name, text in texts.items() if name.startswith("history/"))
        counts["skipped"] = self.junk
        counts["replica-lines"] = sum(text.count("\n") for name, text in texts.items()
                                      if name.startswith("replicas/"))
        counts["replica-skipped"] = self.replica_junk
        counts["unjudged-ok"] = len(self.no_mid)
        counts["unjudged"] = len(self.no_mid) + (_SENDS_WITHOUT_IDS if self.j == 0 and self.pr.no_mid else 0)
        return _Output(texts, counts, self.mids, sum(len(lines) for lines in files.values()))

    def _meta(self, files: dict[str, list[str]]) -> None:
        tm = '"t":1700000000.000,"m":0.000'
        for k in range(self.pr.producers):
            files.setdefault(f"history/producer-{k}.jsonl", []).append(
                f'{{"type":"meta","client":"producer-{k}",{tm},'
                f'"transactional":{str(self.pr.txn).lower()}}}\n')
        for c in range(self.pr.consumers):
            iso = "read_committed" if self._rc(c) else "read_uncommitted"
            files.setdefault(f"history/consumer-{c}.jsonl", []).append(
                f'{{"type":"meta","client":"consumer-{c}",{tm},"isolation":"{iso}"}}\n')
        if self.pr.inject.get("key-order"):
            files.setdefault(f"history/{_EARLY}.jsonl", []).append(
                f'{{"type":"meta","client":"{_EARLY}",{tm}}}\n')
        files.setdefault("history/recovery.jsonl", []).append(
            f'{{"type":"meta","client":"recovery",{tm},"isolation":"read_committed"}}\n')
        if self.pr.torn:  # corrupt lines in the middle of files: skipped, not fatal
            files["history/producer-0.jsonl"].append("{this is not json\n")
            # Malformed polls lines (unequal lists, a column that is no list, a float offset):
            # dropped whole; read, they would be unexpected ids.
            head = f'{{"type":"polls","client":"consumer-0",{tm},"phase":"run","topic":"topic-0"'
            files["history/consumer-0.jsonl"] += [
                f'{head},"partitions":[0,0],"offsets":[1,2],"mids":["zz-malformed-1"],"tss":[1,1]}}\n',
                f'{head},"partitions":[0],"offsets":[1],"mids":["zz-malformed-2"],"tss":[1],"keys":[]}}\n',
                f'{head},"partitions":0,"offsets":[1],"mids":["zz-malformed-3"]}}\n',
                f'{head},"partitions":[0],"offsets":[1.5],"mids":["zz-malformed-4"]}}\n',
            ]
            self.junk += 5

    def _sends_without_ids(self, files: dict[str, list[str]]) -> None:
        """Sends of the first producer without message ids (:data:`_SENDS_WITHOUT_IDS` of them):
        not judged, and no other count changes."""
        head = '"client":"producer-0","t":1700000000.000,"m":0.000'
        files["history/producer-0.jsonl"] += [
            f'{{"type":"invoke",{head},"topic":"topic-0","key":null}}\n',
            f'{{"type":"fail",{head},"error":"NOT_LEADER"}}\n',
            f'{{"type":"info",{head},"mid":null,"error":"timeout"}}\n',
            f'{{"type":"invokes",{head},"topic":"topic-0","mids":[null,null],"keys":null,"partitions":null}}\n',
        ]

    def _producer_lines(self, files: dict[str, list[str]]) -> None:
        """Invokes and outcomes as a real producer writes them: the sends in ``invokes``
        batches (some as single ``invoke`` lines), each written before the outcomes of its
        sends; the acks gathered in ``oks`` batches (up to ``Profile.batch``, cut where the
        transaction state changes and before a fail or info, some as single ``ok`` lines)."""
        acks: dict[int, list[_Rec]] = {}
        limit: dict[int, int] = {}
        sends: dict[int, list[_Rec]] = {}
        for rec in self.recs:
            sends.setdefault(rec.k, []).append(rec)

        def flush(k: int) -> None:
            batch = acks.pop(k, [])
            if batch:
                files[f"history/producer-{k}.jsonl"].append(self._acks(k, batch))
            limit[k] = self.rng.randint(1, self.pr.batch)

        for k in sorted(sends):
            client = f"producer-{k}"
            out = files.setdefault(f"history/{client}.jsonl", [])
            recs = sends[k]
            i = 0
            while i < len(recs):
                group = recs[i:i + self.rng.randint(1, self.pr.batch)]
                i += len(group)
                out.append(self._invokes(k, group))
                for rec in group:
                    self._outcome(out, rec, acks, limit, flush)
            flush(k)
            for name, owner, end, commit_t in self.txns:
                if owner == k:
                    out.append(self._txn_lines(client, name, end, commit_t))

    @staticmethod
    def _txn_lines(client: str, tx: str, end: str, commit_t: float | None) -> str:
        """The txn events of a transaction's end: a commit (ok or timed out) or an abort."""
        head = f'{{"type":"txn","client":"{client}","tx":"{tx}"'
        if end == "abort":
            return (f'{head},"t":{_T0:.3f},"action":"abort","status":"invoke"}}\n'
                    f'{head},"t":{_T0:.3f},"action":"abort","status":"ok"}}\n')
        assert commit_t is not None
        status = "ok" if end == "commit" else 'info","error":"timeout'
        return (f'{head},"t":{commit_t:.3f},"action":"commit","status":"invoke"}}\n'
                f'{head},"t":{commit_t + 0.001:.3f},"action":"commit","status":"{status}"}}\n')

    def _invokes(self, k: int, group: list[_Rec]) -> str:
        """The sends of ``group`` (producer ``k``) as one ``invokes`` line per topic, or now and
        then (``Profile.plain``) as single ``invoke`` lines."""
        client = f"producer-{k}"
        if (self.rng.random() < self.pr.plain or len({self._topic(r.p) for r in group}) > 1
                or any(r.tx is not None for r in group)):
            return "".join(f'{{"type":"invoke","client":"{client}",{self._send_tm(rec)},"mid":"{rec.mid}",'
                           f'"topic":"{self._topic(rec.p)}","key":{_js(rec.key)}{_tx(rec)}}}\n'
                           for rec in group)
        keys = [rec.key for rec in group]
        return (f'{{"type":"invokes","client":"{client}",{self._send_tm(group[0])},'
                f'"topic":"{self._topic(group[0].p)}","mids":[{",".join(_js(r.mid) for r in group)}],'
                f'"keys":{"null" if keys.count(None) == len(keys) else "[" + ",".join(map(_js, keys)) + "]"},'
                f'"partitions":null}}\n')

    @staticmethod
    def _send_tm(rec: _Rec) -> str:
        return rec.entry.tm if rec.entry is not None else f'"t":{_T0:.3f},"m":0.000'

    def _outcome(self, out: list[str], rec: _Rec, acks: dict[int, list[_Rec]], limit: dict[int, int],
                 flush: Callable[[int], None]) -> None:
        client, tm = f"producer-{rec.k}", self._send_tm(rec)
        txn = f',"txn":"{rec.txn}"' if rec.txn else ""
        if rec.outcome == "ok":
            assert rec.entry is not None
            batch = acks.setdefault(rec.k, [])
            if batch and (len(batch) >= limit.setdefault(rec.k, 1) or batch[0].txn != rec.txn
                          or batch[0].p // self.pr.partitions != rec.p // self.pr.partitions):
                flush(rec.k)
                batch = acks.setdefault(rec.k, [])
            batch.append(rec)
            return
        flush(rec.k)  # the outcomes keep their order
        if rec.outcome == "fail":
            out.append(f'{{"type":"fail","client":"{client}",{tm},"mid":"{rec.mid}",'
                       f'"error":"NOT_LEADER"{txn}}}\n')
        elif rec.outcome == "info":
            out.append(f'{{"type":"info","client":"{client}",{tm},"mid":"{rec.mid}",'
                       f'"error":"timeout"}}\n')
        if self.rng.random() < 0.001:
            out.append(f'{{"type":"stall","client":"{client}",{tm},"seconds":0.5}}\n')

    def _acks(self, k: int, batch: list[_Rec]) -> str:
        """The acks of producer ``k`` (one topic, one transaction state): an ``oks`` line, or
        now and then (``Profile.plain``) single ``ok`` lines. Odd producers name the topic
        (an ack need not: it binds its invoke's)."""
        client, first = f"producer-{k}", batch[0]
        topic = f',"topic":"{self._topic(first.p)}"' if k % 2 else ""
        txn = f',"txn":"{first.txn}"' if first.txn else ""
        mids = [None if rec.mid in self.no_mid else rec.mid for rec in batch]
        if self.rng.random() < self.pr.plain:
            return "".join(f'{{"type":"ok","client":"{client}",{rec.entry.tm}{_mid_field(mid)}{topic},'
                           f'{rec.entry.fields}{txn}}}\n' for rec, mid in zip(batch, mids, strict=True)
                           if rec.entry is not None)
        entries = [rec.entry for rec in batch if rec.entry is not None]
        return (f'{{"type":"oks","client":"{client}",{entries[-1].tm}{topic}{txn}'
                f',"mids":[{",".join(map(_js, mids))}]{self._position_columns(entries)}}}\n')

    def _position_columns(self, entries: list[_Entry]) -> str:
        """The position columns of a batch line (``,"partitions":..``, then Kafka offsets and
        epochs, or Pulsar ledgers, entries and batches)."""
        cols = list(zip(*(e.col for e in entries), strict=False))
        out = [f',"partitions":{_list(cols[0])}']
        if not self.pr.pulsar:
            out.append(f',"offsets":{_list(cols[1])},"epochs":[{",".join("1" * len(entries))}]')
        else:
            if self.rng.random() < 0.5:  # a column of nulls may be null or left out
                out.append(',"offsets":null')
            out.append(f',"ledgers":{_list(cols[2])},"entries":{_list(cols[3])},"batches":{_list(cols[4])}')
        return "".join(out)

    def _consumer_lines(self, files: dict[str, list[str]], c: int, run_mids: set[str]) -> None:
        client = f"consumer-{c}"
        per_part: list[list[tuple[int, _Entry | None, str | None, int]]] = []
        for p in range(c, self.nparts, self.pr.consumers):
            log, reads = self.logs[p], []
            read = [e for e in log if self._readable(p, e)]
            skip_next = 0
            for n, e in enumerate(read):
                if skip_next:
                    skip_next -= 1
                    continue
                if e.mark == "skip":  # the next record first (in another line), then back after a reset
                    nxt = read[n + 1]
                    reads += [_CUT, (p, nxt, nxt.mid, 0), (p, None, None, 0), (p, e, e.mid, 0),
                              (p, nxt, nxt.mid, 1)]
                    skip_next = 1
                    continue
                if n + 1 < len(read) and read[n + 1].mark == "iskip":  # the same in one poll call
                    skipped, nxt = read[n + 1], read[n + 2]
                    reads += [_OPEN, (p, e, e.mid, 0), (p, nxt, nxt.mid, 0), _CLOSE, (p, None, None, 0),
                              (p, skipped, skipped.mid, 0), (p, nxt, nxt.mid, 1)]
                    skip_next = 2
                    continue
                if e.mark == "truncated":  # the phantom in its place, the record never read
                    reads.append((p, e, str(e.arg), 0))
                    run_mids.add(str(e.arg))
                    continue
                if e.mark == "phantom":
                    reads += [(p, e, str(e.arg), 0), (p, None, None, 0)]
                    run_mids.add(str(e.arg))
                if e.mark == "idouble":  # read twice in one poll call
                    reads += [_OPEN, (p, e, e.mid, 0), (p, e, e.mid, 1), _CLOSE]
                    continue
                reads.append((p, e, e.mid, 0))
                if e.mark == "double":  # read twice, in two poll calls
                    reads += [_CUT, (p, e, e.mid, 1)]
                if e.mark == "rewind":
                    reads.append((p, None, None, 0))
                    reads += [(p, r, r.mid, 1) for r in read[n - int(e.arg or 0) + 1:n + 1]]
            run_mids.update(e.mid for e in read if e.mid is not None and e.mark != "truncated")
            per_part.append(reads)
        merged: list[tuple[int, _Entry | None, str | None, int]] = []
        cursors = [0] * len(per_part)
        while True:
            open_parts = [x for x in range(len(per_part)) if cursors[x] < len(per_part[x])]
            if not open_parts:
                break
            x = self.rng.choice(open_parts)
            take = self.rng.randint(1, 64)
            run = per_part[x][cursors[x]:cursors[x] + take]
            while run.count(_OPEN) > run.count(_CLOSE):  # one poll call stays whole
                run = per_part[x][cursors[x]:cursors[x] + len(run) + 1]
            merged += run
            cursors[x] += len(run)
        iso = "read_committed" if self._rc(c) else "read_uncommitted"
        self._write_reads(files.setdefault(f"history/{client}.jsonl", []), client, "run",
                          iso if not self.pr.pulsar else None, merged)

    def _early_lines(self, files: dict[str, list[str]]) -> None:
        """key-order: the later record of each injected pair, polled by another consumer of the
        subscription just before the partition's consumer polls the earlier one (after a
        reset, so that this client's polls form no sequence)."""
        early = sorted(((self.early_t[e.mid], p, self.logs[p][i + 1]) for p, log in enumerate(self.logs)
                        for i, e in enumerate(log) if e.mark == "early"), key=lambda x: x[0])
        for t, p, later in early:
            out = files.setdefault(f"history/{_EARLY}.jsonl", [])
            out.append(self._reset(_EARLY, p, t - 0.0007))
            read = (p, later, later.mid, 0)
            out.append(self._poll(_EARLY, "run", t - 0.0005, read) if self.rng.random() < 0.5
                       else self._polls(_EARLY, "run", t - 0.0005, [read], None))

    def _recovery_lines(self, files: dict[str, list[str]], rec_mids: set[str]) -> None:
        reads: list[tuple[int, _Entry | None, str | None, int]] = []
        for p, log in enumerate(self.logs):
            for e in log:
                if not e.aborted and not e.lost:
                    reads.append((p, e, e.mid, 0))
                    if e.mid is not None:
                        rec_mids.add(e.mid)
        self._write_reads(files.setdefault("history/recovery.jsonl", []), "recovery", "recovery",
                          "read_committed" if not self.pr.pulsar else None, reads)

    def _replica_lines(self, files: dict[str, list[str]]) -> None:
        prefix = "kafka" if not self.pr.pulsar else "bookie"
        self.replica_junk = 0  # replica lines written that a checker skips
        for n in range(1, self.pr.replicas + 1):
            node = f"{prefix}-{n}"
            out = files.setdefault(f"replicas/{node}.jsonl", [])
            if self.pr.torn_replicas and self.j == 0:  # lines a checker cannot read: skipped, counted
                out += ["{this is not json\n", f'{{"type":"snapshot","node":"{node}"}}\n',
                        f'{{"type":"replica","node":"{node}","topic":"topic-0","partition":0,"offset":"7"}}\n']
                self.replica_junk += 3
            for p, log in enumerate(self.logs):
                for e in log:
                    if e.lost:
                        continue
                    mid = str(e.arg) if e.mark == "diverge" and n == self.pr.replicas else e.mid
                    mid_json = "null" if mid is None else f'"{mid}"'
                    out.append(f'{{"type":"replica","client":"collector","node":"{node}",'
                               f'"topic":"{self._topic(p)}",{e.fields},"mid":{mid_json},'
                               f'"crc":{zlib.crc32((mid or "").encode())}}}\n')

    def _counts(self, run_mids: set[str], rec_mids: set[str]) -> Counter[str]:
        counts: Counter[str] = Counter(polled=len(run_mids), recovered=len(rec_mids))
        counts.update(self.tx_counts)
        for rec in self.recs:
            counts["invoked"] += 1
            # an aborted record in a read_uncommitted consumer's partition: that consumer reads it
            if rec.entry is not None and rec.entry.aborted and not self._rc(self._consumer(rec.p)):
                counts["aborted-uncommitted-read"] += 1
            acked = rec.outcome if rec.mid not in self.no_mid else None  # an ack without its id: none
            outcome = acked or "unacked"
            if acked:
                counts[acked] += 1
            if outcome != "ok":
                counts[f"{outcome}-{'present' if rec.mid in rec_mids else 'absent'}"] += 1
        return counts


def _tx(rec: _Rec) -> str:
    """The ``tx`` field of a send in a transaction (tx form), else nothing."""
    return "" if rec.tx is None else f',"tx":"{rec.tx}"'


def _mid_field(mid: str | None) -> str:
    """``,"mid":"<mid>"``, or nothing for an ack without its id (Profile.no_mid)."""
    return "" if mid is None else f',"mid":"{mid}"'


def _js(value: str | None) -> str:
    """A string (ids, keys: no characters to escape) or null as JSON."""
    return "null" if value is None else f'"{value}"'


def _list(values: Iterable[int | None]) -> str:
    return "[" + ",".join("null" if v is None else str(v) for v in values) + "]"
