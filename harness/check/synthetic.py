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
and re-reads a few records (clean). The recovery reader (read_committed) reads
every committed record; every replica holds every record of the log.

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
``aborted-read``
    a read_committed consumer reads a record of an aborted transaction.
``unexpected``
    a record that was never sent (``zz-...``) is in the log.

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness.check.result import ANOMALIES, COUNTS

__all__ = ["Expected", "Profile", "generate"]

_T0 = 1_700_000_000.0


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

    def __post_init__(self) -> None:
        unknown = set(self.inject) - set(ANOMALIES)
        if unknown:
            raise ValueError(f"unknown anomalies to inject: {sorted(unknown)}")
        if self.system not in ("kafka", "pulsar"):
            raise ValueError(f"system must be kafka or pulsar, not {self.system!r}")
        if min(self.topics, self.partitions, self.producers, self.consumers, self.chunk) < 1:
            raise ValueError("topics, partitions, producers, consumers and chunk must be >= 1")
        if self.inject.get("replica-divergence") and self.replicas < 2:
            raise ValueError("replica-divergence needs replicas >= 2")


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
            _tear(files)
    finally:
        for fh in files.values():
            fh.close()
    anomalies = {kind: profile.inject.get(kind, 0) for kind in ANOMALIES}
    anomalies["inconsistent-offsets"] += anomalies["replica-divergence"]
    return Expected(anomalies, {name: counts[name] for name in COUNTS},
                    {kind: frozenset(ids) for kind, ids in mids.items()}, lines)


def _outputs(jobs: list[tuple[Profile, int, int, int]], workers: int) -> Iterator[_Output]:
    """Chunk outputs in order, made here or by ``workers`` processes."""
    if workers <= 1:
        yield from map(_make_chunk, jobs)
        return
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        yield from pool.imap(_make_chunk, jobs)


def _tear(files: Mapping[str, IO[str]]) -> None:
    """Torn last lines (a crash mid-write) in the consumer and recovery files."""
    torn = ('{"type":"poll","client":"recovery","t":1.0,"m":1.0,"mid":"torn-1","phase":"recovery",'
            '"topic":"topic-0","partition":0,"offset":1')
    for name, fh in files.items():
        if name.startswith("history/consumer-") or name == "history/recovery.jsonl":
            fh.write(torn)


@dataclass
class _Output:
    files: dict[str, str]
    counts: Counter[str]
    mids: dict[str, set[str]]
    lines: int


class _Rec:
    """A send: message id, producer, partition index, outcome, transaction state, its log entry."""

    __slots__ = ("mid", "k", "p", "outcome", "txn", "entry")

    def __init__(self, mid: str, k: int, p: int, outcome: str | None, txn: str | None) -> None:
        self.mid, self.k, self.p, self.outcome, self.txn = mid, k, p, outcome, txn
        self.entry: _Entry | None = None


class _Entry:
    """A record in a partition's log. ``mark``/``arg`` say how readers deviate at it."""

    __slots__ = ("mid", "rec", "aborted", "lost", "reserved", "mark", "arg", "fields", "tm")

    def __init__(self, mid: str | None, rec: _Rec | None, aborted: bool = False) -> None:
        self.mid, self.rec, self.aborted = mid, rec, aborted
        self.lost = self.reserved = False
        self.mark: str | None = None
        self.arg: str | int | None = None
        self.fields = self.tm = ""


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
        for g in range(lo, hi):
            self._send(g)
        if j == 0 and not self.tail:
            self._inject()
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
                and e.rec.entry is e and not e.lost)

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
        for kind in ANOMALIES:
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

    def _inject_replica_divergence(self) -> None:
        p, i = self._pick("replica-divergence", self._plain)
        e = self.logs[p][i]
        e.mark, e.arg = "diverge", self._extra("info").mid
        for kind in ("replica-divergence", "inconsistent-offsets"):
            self._note(kind, e.mid, str(e.arg))

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

    def _inject_poll_skip(self) -> None:
        def ok(p: int, i: int) -> bool:
            log = self.logs[p]
            return (self._plain(p, i) and all(self._readable(p, log[x]) and log[x].mark is None
                                              for x in (i - 1, i + 1)))

        p, i = self._pick("poll-skip", ok, span=(-1, 1))
        self.logs[p][i].mark = "skip"
        self._note("poll-skip", self.logs[p][i + 1].mid)

    def _inject_aborted_read(self) -> None:
        rc_parts = [p for p in range(self.nparts) if self._rc(self._consumer(p))]
        p, i = self._pick("aborted-read", parts=rc_parts)
        rec = self._extra("fail", "aborted")
        rec.p = p
        rec.entry = _Entry(rec.mid, rec, aborted=True)
        rec.entry.mark, rec.entry.reserved = "rcread", True
        self.logs[p].insert(i, rec.entry)
        self._note("aborted-read", rec.mid)

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
                try:
                    _, i = self._pick("rewind", lambda p, i, m=m: all(
                        self.logs[p][x].mark is None and self._readable(p, self.logs[p][x])
                        for x in range(i - m + 1, i + 1)), span=(-m + 1, 0), parts=[p])
                except ValueError:
                    continue
                self.logs[p][i].mark, self.logs[p][i].arg = "rewind", m

    # -- positions and lines ------------------------------------------------------

    def _stride(self) -> int:
        """Kafka offsets one chunk may use per partition (records, injected extras, gaps)."""
        return 4 * (self.pr.chunk + 2 * sum(self.pr.inject.values())) + 64

    def _assign_positions(self) -> None:
        pulsar = self.pr.system == "pulsar"
        for p, log in enumerate(self.logs):
            pn = p % self.pr.partitions
            offset, ledger, entry = self.j * self._stride(), 1 + self.j * self.nparts + p, 0
            batch, left = -1, 0  # Pulsar: index in the current batch, messages left in it
            for n, e in enumerate(log):
                x = (self.j * self.pr.chunk + n) * 0.001
                e.tm = f'"t":{_T0 + x:.3f},"m":{x:.3f}'
                if not pulsar:
                    e.fields = f'"partition":{pn},"offset":{offset},"epoch":1'
                    offset += 2 if self.pr.txn and self.rng.random() < 0.05 else 1  # a txn marker
                    continue
                if left == 0:
                    left, batch = (self.rng.randint(2, 4), 0) if self.rng.random() < 0.3 else (0, -1)
                e.fields = f'"partition":{pn},"offset":null,"ledger":{ledger},"entry":{entry},"batch":{batch}'
                if left:
                    left, batch = left - 1, batch + 1
                if not left:
                    entry += 1

    def _topic(self, p: int) -> str:
        return f"topic-{p // self.pr.partitions}"

    def _poll(self, client: str, phase: str, p: int, e: _Entry, mid: str | None = None) -> str:
        mid = e.mid if mid is None else mid
        mid_json = "null" if mid is None else f'"{mid}"'
        return (f'{{"type":"poll","client":"{client}",{e.tm},"mid":{mid_json},"phase":"{phase}",'
                f'"topic":"{self._topic(p)}",{e.fields},"ts":1,"key":null}}\n')

    def _reset(self, client: str, p: int, e: _Entry) -> str:
        """A reset of partition ``p``; without injections, some name no partition (or topic):
        those cover every partition (topic), which could hide an injected anomaly."""
        topic, partition = f'"{self._topic(p)}"', str(p % self.pr.partitions)
        if not self.pr.inject and self.rng.random() < 0.5:
            partition = "null"
            if self.rng.random() < 0.3:
                topic = "null"
        return (f'{{"type":"reset","client":"{client}",{e.tm},"topic":{topic},'
                f'"partition":{partition},"reason":"rebalance","from":null,"to":null}}\n')

    def output(self) -> _Output:
        files: dict[str, list[str]] = {}
        run_mids: set[str] = set()
        rec_mids: set[str] = set()
        if self.j == 0:
            self._meta(files)
        self._producer_lines(files)
        if not self.tail:
            for c in range(self.pr.consumers):
                self._consumer_lines(files, c, run_mids)
        self._recovery_lines(files, rec_mids)
        self._replica_lines(files)
        return _Output({name: "".join(lines) for name, lines in files.items()},
                       self._counts(run_mids, rec_mids), self.mids,
                       sum(len(lines) for lines in files.values()))

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
        files.setdefault("history/recovery.jsonl", []).append(
            f'{{"type":"meta","client":"recovery",{tm},"isolation":"read_committed"}}\n')
        if self.pr.torn:  # a corrupt line in the middle of a file: skipped, not fatal
            files["history/producer-0.jsonl"].append("{this is not json\n")

    def _producer_lines(self, files: dict[str, list[str]]) -> None:
        for rec in self.recs:
            client = f"producer-{rec.k}"
            out = files.setdefault(f"history/{client}.jsonl", [])
            tm = rec.entry.tm if rec.entry is not None else f'"t":{_T0:.3f},"m":0.000'
            out.append(f'{{"type":"invoke","client":"{client}",{tm},"mid":"{rec.mid}",'
                       f'"topic":"{self._topic(rec.p)}","key":null}}\n')
            txn = f',"txn":"{rec.txn}"' if rec.txn else ""
            if rec.outcome == "ok":
                assert rec.entry is not None
                topic = f',"topic":"{self._topic(rec.p)}"' if rec.k % 2 else ""  # ok need not name it
                out.append(f'{{"type":"ok","client":"{client}",{tm},"mid":"{rec.mid}"{topic},'
                           f'{rec.entry.fields}{txn}}}\n')
            elif rec.outcome == "fail":
                out.append(f'{{"type":"fail","client":"{client}",{tm},"mid":"{rec.mid}",'
                           f'"error":"NOT_LEADER"{txn}}}\n')
            elif rec.outcome == "info":
                out.append(f'{{"type":"info","client":"{client}",{tm},"mid":"{rec.mid}",'
                           f'"error":"timeout"}}\n')
            if self.rng.random() < 0.001:
                out.append(f'{{"type":"stall","client":"{client}",{tm},"seconds":0.5}}\n')

    def _consumer_lines(self, files: dict[str, list[str]], c: int, run_mids: set[str]) -> None:
        client = f"consumer-{c}"
        per_part: list[list[str]] = []
        for p in range(c, self.nparts, self.pr.consumers):
            log, lines = self.logs[p], []
            read = [e for e in log if self._readable(p, e)]
            skip_next = False
            for n, e in enumerate(read):
                if skip_next:
                    skip_next = False
                    continue
                if e.mark == "skip":  # the next record first, then back after a reset
                    nxt = read[n + 1]
                    lines += [self._poll(client, "run", p, nxt), self._reset(client, p, e),
                              self._poll(client, "run", p, e), self._poll(client, "run", p, nxt)]
                    skip_next = True
                    continue
                if e.mark == "phantom":
                    lines += [self._poll(client, "run", p, e, str(e.arg)), self._reset(client, p, e)]
                    run_mids.add(str(e.arg))
                lines.append(self._poll(client, "run", p, e))
                if e.mark == "double":
                    lines.append(self._poll(client, "run", p, e))
                if e.mark == "rewind":
                    lines.append(self._reset(client, p, e))
                    lines += [self._poll(client, "run", p, r) for r in read[n - int(e.arg or 0) + 1:n + 1]]
            run_mids.update(e.mid for e in read if e.mid is not None)
            per_part.append(lines)
        out = files.setdefault(f"history/{client}.jsonl", [])
        cursors = [0] * len(per_part)
        while True:
            open_parts = [x for x in range(len(per_part)) if cursors[x] < len(per_part[x])]
            if not open_parts:
                break
            x = self.rng.choice(open_parts)
            take = self.rng.randint(1, 64)
            out += per_part[x][cursors[x]:cursors[x] + take]
            cursors[x] += take

    def _recovery_lines(self, files: dict[str, list[str]], rec_mids: set[str]) -> None:
        out = files.setdefault("history/recovery.jsonl", [])
        for p, log in enumerate(self.logs):
            for e in log:
                if not e.aborted and not e.lost:
                    out.append(self._poll("recovery", "recovery", p, e))
                    if e.mid is not None:
                        rec_mids.add(e.mid)

    def _replica_lines(self, files: dict[str, list[str]]) -> None:
        prefix = "kafka" if self.pr.system == "kafka" else "bookie"
        for n in range(1, self.pr.replicas + 1):
            node = f"{prefix}-{n}"
            out = files.setdefault(f"replicas/{node}.jsonl", [])
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
        for rec in self.recs:
            counts["invoked"] += 1
            outcome = rec.outcome or "unacked"
            if rec.outcome:
                counts[rec.outcome] += 1
            if outcome != "ok":
                counts[f"{outcome}-{'present' if rec.mid in rec_mids else 'absent'}"] += 1
        return counts
