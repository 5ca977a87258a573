"""The bookie family: what each bookie holds of a Pulsar topic's ledgers (``bookies/`` of a
run: ``ledgers.json``, each ledger's quorums, ensembles and last confirmed entry, and
``entries.jsonl``, every entry each bookie of each ensemble returned when asked alone, with a
CRC-32 of its payload; read after the recovery phase, docs/pulsar.md).

An entry's write set is BookKeeper's round robin: entry *e* of the ensemble in force (the one
with the greatest first entry at or below *e*) of *E* bookies goes to bookies
``(e + i) mod E`` for *i* below the write quorum. Only entries at or below the ledger's last
confirmed entry are judged, and only the copies on their write set count.

- ``under-replicated``: an entry at or below its ledger's last confirmed entry that fewer
  bookies of its write set hold than the ledger's ack quorum: an acknowledged entry with
  fewer copies than BookKeeper promised when it acknowledged it. Counted per entry.
- ``under-write-quorum``: an entry at or below the last confirmed one that at least the ack
  quorum but fewer than the write quorum of its write set hold. Informational: BookKeeper
  acknowledges at the ack quorum, and the missing copy may still be re-replicated. Counted
  per entry.
- ``bookie-divergence``: the bookies of its write set that hold one entry hold different bytes
  of it (different CRC-32s). Counted per entry.
- ``past-closed-end``: a message whose producer receipt (an ``ok`` line of ``history/``)
  names an entry past the last entry of its ledger, which is closed: the ledger's metadata
  says the entry is not part of it, so no reader will read it. A loss located to the ledger's
  metadata (its recovery or close cut an acknowledged entry). Counted per message.

A bookie that answered "no such entry" (BookKeeper's code -13) does not hold the entry, nor
does a bookie removed for good (``rc`` ``"removed"``: the ``remove`` fault; it is not asked),
nor one that answered "no such ledger" (-7) while another bookie of the write set returned
the entry (a bookie down when the ledger was made never gets it). When no bookie of the
write set returned it, "no such ledger" may mean the broker trimmed the ledger between its
stats and the dump, so the entry is not judged for its copies; nor is one whose write set
has a bookie whose read failed otherwise (unreachable, a timeout). Those reads are listed in
the result's ``unread``, by return code.

Computed here in plain Python over the two files (a run's dump is at most 600,000 reads), not
in Spark; :func:`find` returns the counts and the first examples by (ledger, entry).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.check.result import MAX_EXAMPLES, example
from harness.errors import CheckError
from harness.history import write_set

__all__ = ["KINDS", "Entry", "Ledger", "Receipts", "example_of", "find", "read_ledgers", "write_set"]

KINDS = ("under-replicated", "under-write-quorum", "bookie-divergence", "past-closed-end")
#: BookKeeper's answer that means the bookie does not hold the entry: no such entry
NOT_HELD = -13
#: a bookie removed for good (the ``remove`` fault, not asked): it holds nothing
REMOVED = "removed"
#: no such ledger: not held when another bookie of the write set returned the entry
NO_LEDGER = -7
#: where a run keeps the dump, and its two files
DIR, LEDGERS, ENTRIES = "bookies", "ledgers.json", "entries.jsonl"


@dataclass(frozen=True)
class Ledger:
    """One ledger of the dump: its partition, quorums, ensembles and last confirmed entry."""

    partition: int
    ledger: int
    write_quorum: int
    ack_quorum: int
    ensembles: dict[int, tuple[str, ...]]
    last_confirmed: int
    #: the ledger's state in its metadata (CLOSED: ``last_confirmed`` is its last entry)
    state: str = "?"


@dataclass
class Entry:
    """One entry, the copies its bookies returned (bookie -> CRC-32), and the bookies of its
    write set whose read failed (they may hold it)."""

    ledger: Ledger
    entry: int
    held: dict[str, str] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)
    no_ledger: set[str] = field(default_factory=set)


def read_ledgers(path: Path) -> list[Ledger]:
    """``ledgers.json``; a file that is not a list of ledgers is a CheckError naming it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [Ledger(int(r["partition"]), int(r["ledger"]), int(r["write_quorum"]),
                       int(r["ack_quorum"]), {int(k): tuple(map(str, v)) for k, v in r["ensembles"].items()},
                       int(r["last_confirmed"]), str(r.get("state", "?"))) for r in raw]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckError(f"{path}: not the ledger list of a bookie dump "
                         f"({type(exc).__name__}: {exc})") from exc


def _copies(path: Path, unread: dict[str, int]) -> Iterator[tuple[int, int, str, str | None, Any]]:
    """(ledger, entry, bookie, crc32, rc) of each entry a bookie returned, crc32 None where its
    read failed (not "no such entry"); a line that is not such a read is counted in ``unread``."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                lid, eid, bookie, rc = int(r["ledger"]), int(r["entry"]), str(r["bookie"]), r["rc"]
                if rc in (NOT_HELD, REMOVED):
                    continue  # the bookie has no such entry, or was removed for good: no copy
                yield lid, eid, bookie, str(r["crc32"]) if rc == 0 else None, rc
            except (ValueError, TypeError, KeyError):
                unread["not a bookie read"] = unread.get("not a bookie read", 0) + 1


#: the producer receipts that name a ledger and an entry: (mid, partition, ledger, entry,
#: client) of each ``ok`` event, batch lines expanded (the plan reads them from the history)
Receipts = Callable[[], Iterable[tuple[str, Any, int, int, Any]]]


def _past_closed_end(receipts: Receipts, ledgers: Mapping[int, Ledger]) -> list[dict[str, Any]]:
    """The examples of ``past-closed-end``, one per message (its first such receipt by
    ledger and entry), by ledger, entry and id."""
    closed = {lid: led for lid, led in ledgers.items() if led.state == "CLOSED"}
    found: dict[str, dict[str, Any]] = {}
    if not closed:
        return []
    for mid, partition, lid, eid, client in receipts():
        led = closed.get(lid)
        seen = found.get(mid)
        if (led is not None and eid > led.last_confirmed
                and (seen is None or (lid, eid) < (seen["ledger"], seen["entry"]))):
            found[mid] = example(mid=mid, client=client, partition=partition, ledger=lid, entry=eid,
                                 last_entry=led.last_confirmed)
    return sorted(found.values(), key=lambda ex: (ex["ledger"], ex["entry"], ex["mid"]))


def example_of(kind: str, ex: Entry, names: Any = None, details: Any = None) -> dict[str, Any]:
    """The example of one entry: where it is, its write set and quorums, and each copy."""
    led = ex.ledger
    return example(partition=led.partition, ledger=led.ledger, entry=ex.entry,
                   last_confirmed=led.last_confirmed, ack_quorum=led.ack_quorum,
                   write_quorum=led.write_quorum,
                   write_set=write_set(led.ensembles, led.write_quorum, ex.entry),
                   held=[{"bookie": b, "crc32": c} for b, c in sorted(ex.held.items())])


def find(run_dir: Path, receipts: Receipts | None = None
         ) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    """Counts, first examples and unread lines (by file and reason) of this family in
    ``run_dir``; all empty when the run has no dump (a Kafka run, or a dump that failed).
    ``receipts`` (called only when a ledger of the dump is closed) gives the producer receipts
    ``past-closed-end`` is judged on; None: not judged."""
    ledgers_path, entries_path = run_dir / DIR / LEDGERS, run_dir / DIR / ENTRIES
    if not ledgers_path.is_file() or not entries_path.is_file():
        return {}, {}, {}
    ledgers = {led.ledger: led for led in read_ledgers(ledgers_path)}
    entries: dict[tuple[int, int], Entry] = {}
    unread: dict[str, int] = {}
    for lid, eid, bookie, crc, rc in _copies(entries_path, unread):
        led = ledgers.get(lid)
        if led is None or eid > led.last_confirmed or eid < 0:
            continue
        if bookie in write_set(led.ensembles, led.write_quorum, eid):
            ex = entries.setdefault((lid, eid), Entry(led, eid))
            if crc is None and rc == NO_LEDGER:
                ex.no_ledger.add(bookie)
            elif crc is None:
                ex.unknown.add(bookie)
                reason = f"bookie read failed (rc {json.dumps(rc)})"
                unread[reason] = unread.get(reason, 0) + 1
            else:
                ex.held[bookie] = crc
    counts = {kind: 0 for kind in KINDS}
    examples: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for led in sorted(ledgers.values(), key=lambda x: x.ledger):
        for eid in range(0, led.last_confirmed + 1):
            ex = entries.get((led.ledger, eid)) or Entry(led, eid)
            found = []
            if ex.no_ledger and not ex.held:  # the ledger may be gone: its copies are not known
                reason = f"bookie read failed (rc {NO_LEDGER})"
                unread[reason] = unread.get(reason, 0) + len(ex.no_ledger)
            elif ex.unknown:
                pass  # a bookie that may hold it did not answer: its copies are not known
            elif len(ex.held) < led.ack_quorum:
                found.append("under-replicated")
            elif len(ex.held) < led.write_quorum:
                found.append("under-write-quorum")
            if len(set(ex.held.values())) > 1:
                found.append("bookie-divergence")
            for kind in found:
                counts[kind] += 1
                if len(examples[kind]) < MAX_EXAMPLES:
                    examples[kind].append(example_of(kind, ex))
    past = _past_closed_end(receipts, ledgers) if receipts is not None else []
    counts["past-closed-end"], examples["past-closed-end"] = len(past), past[:MAX_EXAMPLES]
    return ({k: n for k, n in counts.items() if n}, {k: v for k, v in examples.items() if v},
            {f"{DIR}/{ENTRIES}": unread} if unread else {})
