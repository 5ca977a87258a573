"""Synthetic Pulsar per-bookie dumps (``bookies/`` of a run) with known anomalies, for the
checker's bookie family and the reference checker.

:func:`write_dump` writes ``bookies/ledgers.json`` and ``bookies/entries.jsonl`` as a run
writes them (docs/pulsar.md): each ledger's range read from every bookie of each ensemble,
an entry held by exactly its write set with one CRC-32, the reads past the last confirmed
entry answered "no such entry"; then it injects the anomalies asked for, each on an entry of
its own, and returns how many of each the checker must count. It also writes the noise a
checker must not count: copies past the last confirmed entry and copies on a bookie outside
the entry's write set.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DumpLedger", "write_dump", "write_closed_short", "LEDGERS"]

KINDS = ("under-replicated", "under-write-quorum", "bookie-divergence")
NO_SUCH_ENTRY = -13


@dataclass(frozen=True)
class DumpLedger:
    partition: int
    ledger: int
    write_quorum: int
    ack_quorum: int
    ensembles: dict[int, tuple[str, ...]]
    last_confirmed: int

    def write_set(self, entry: int) -> list[str]:
        first = max(k for k in self.ensembles if k <= entry)
        ens = self.ensembles[first]
        return [ens[(entry + i) % len(ens)] for i in range(self.write_quorum)]

    def ensemble_of(self, entry: int) -> tuple[str, ...]:
        return self.ensembles[max(k for k in self.ensembles if k <= entry)]


#: two ledgers: 3/2/2 with an ensemble change at entry 20, and an open 3/3/2 one
LEDGERS = (
    DumpLedger(0, 7, 2, 2, {0: ("bookie-1:3181", "bookie-2:3181", "bookie-3:3181"),
                            20: ("bookie-1:3181", "bookie-4:3181", "bookie-3:3181")}, 59),
    DumpLedger(1, 8, 3, 2, {0: ("bookie-2:3181", "bookie-1:3181", "bookie-3:3181")}, 39),
)


@dataclass
class _Copy:
    bookie: str
    crc: str | None  # None: the bookie answers "no such entry"
    failed: bool = False  # the read failed (the bookie unreachable): it may hold the entry
    no_ledger: bool = False  # the bookie answers "no such ledger"


@dataclass
class _Dump:
    reads: dict[tuple[int, int], list[_Copy]] = field(default_factory=dict)


def write_dump(run_dir: Path, inject: dict[str, int], seed: int = 1,
               ledgers: tuple[DumpLedger, ...] = LEDGERS, bad_lines: int = 0,
               failed_reads: int = 0, no_ledger: int = 0, trimmed: int = 0) -> dict[str, int]:
    """Writes the dump of ``ledgers`` into ``run_dir/bookies`` with ``inject`` (kind -> how
    many; ``under-write-quorum`` needs a ledger whose write quorum exceeds its ack quorum),
    ``bad_lines`` lines that are no bookie read, and ``failed_reads`` entries of their own
    whose every copy but one failed to be read (unreachable bookies: not judged), ``no_ledger``
    entries of a W > A ledger one of whose copies answers "no such ledger" (counted
    under-write-quorum: another bookie returned the entry), and ``trimmed`` entries every copy
    of which answers "no such ledger" (not judged); returns the expected counts."""
    rnd = random.Random(seed)
    dump = _Dump()
    for led in ledgers:
        for e in range(led.last_confirmed + 3):
            ws = led.write_set(e)
            dump.reads[(led.ledger, e)] = [
                _Copy(b, f"{rnd.getrandbits(32):08x}" if b in ws and e <= led.last_confirmed else None)
                for b in led.ensemble_of(e)]
            crcs = {c.crc for c in dump.reads[(led.ledger, e)] if c.crc}
            for c in dump.reads[(led.ledger, e)]:  # one CRC per entry: the writer sent the same bytes
                if c.crc:
                    c.crc = min(crcs)
    free = [(led, e) for led in ledgers for e in range(1, led.last_confirmed + 1)]
    rnd.shuffle(free)
    expected = dict.fromkeys(KINDS, 0)
    for kind in KINDS:
        for _ in range(inject.get(kind, 0)):
            fits = [x for x in free if kind != "under-write-quorum" or x[0].write_quorum > x[0].ack_quorum]
            if not fits:
                raise ValueError(f"no entry left for {kind}")
            led, e = fits[0]
            free.remove((led, e))
            held = [c for c in dump.reads[(led.ledger, e)] if c.crc]
            if kind == "under-replicated":
                for c in held[led.ack_quorum - 1:]:
                    c.crc = None  # fewer copies than the ack quorum
            elif kind == "under-write-quorum":
                for c in held[led.ack_quorum:]:
                    c.crc = None  # the ack quorum, not the write quorum
            else:
                held[-1].crc = f"{int(held[-1].crc or '0', 16) ^ 1:08x}"
            expected[kind] += 1
    for _ in range(failed_reads):
        led, e = free.pop()
        for c in [c for c in dump.reads[(led.ledger, e)] if c.crc][1:]:
            c.failed = True
    for _ in range(no_ledger):
        led, e = next(x for x in free if x[0].write_quorum > x[0].ack_quorum)
        free.remove((led, e))
        [c for c in dump.reads[(led.ledger, e)] if c.crc][-1].no_ledger = True
        expected["under-write-quorum"] += 1
    for _ in range(trimmed):
        led, e = free.pop()
        for c in dump.reads[(led.ledger, e)]:
            c.no_ledger = True
    # noise: a copy past the last confirmed entry, a copy outside the write set (ensemble of 3, W=2)
    led = ledgers[0]
    dump.reads[(led.ledger, led.last_confirmed + 1)][0].crc = "deadbeef"
    outside = next(b for b in led.ensemble_of(5) if b not in led.write_set(5))
    for c in dump.reads[(led.ledger, 5)]:
        if c.bookie == outside:
            c.crc = "0badf00d"
    out = run_dir / "bookies"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ledgers.json").write_text(json.dumps([
        {"partition": led.partition, "ledger": led.ledger, "state": "CLOSED", "ensemble_size": 3,
         "write_quorum": led.write_quorum, "ack_quorum": led.ack_quorum,
         "ensembles": {str(k): list(v) for k, v in led.ensembles.items()},
         "last_confirmed": led.last_confirmed, "read_to": led.last_confirmed + 2, "cut": False}
        for led in ledgers]))
    lines = []
    for (lid, e), copies in sorted(dump.reads.items()):
        for c in copies:
            if c.failed:
                lines.append({"ledger": lid, "entry": e, "bookie": c.bookie, "rc": -8,
                              "error": "Bookie handle is not available"})
            elif c.no_ledger:
                lines.append({"ledger": lid, "entry": e, "bookie": c.bookie, "rc": -7,
                              "error": "No such ledger exists on Bookies"})
            elif c.crc is None:
                lines.append({"ledger": lid, "entry": e, "bookie": c.bookie, "rc": NO_SUCH_ENTRY,
                              "error": "No such entry"})
            else:
                lines.append({"ledger": lid, "entry": e, "bookie": c.bookie, "rc": 0, "bytes": 168,
                              "crc32": c.crc, "lac": e - 1})
    rnd.shuffle(lines)  # the dump's reads complete in any order
    text = [json.dumps(x) for x in lines] + ["{torn", '{"ledger": 7}', "[1, 2]"][:bad_lines]
    (out / "entries.jsonl").write_text("\n".join(text) + "\n")
    return expected



def write_closed_short(run_dir: Path, cut: int, open_ledgers: int = 1) -> int:
    """Writes a dump of the ledgers the history's producer receipts name (E = W = A = 2, every
    entry held by both bookies): the ledger with the most receipts CLOSED ``cut`` entries
    short of its last receipt, the next ``open_ledgers`` left OPEN with their last confirmed
    entry just as short (not judged: an open ledger has no last entry yet), the others closed
    at their last receipt. Returns how many messages the checker must count
    ``past-closed-end`` (each message of the cut entries once)."""
    from harness.check.lines import receipts
    from harness.history import history_files

    by_ledger: dict[int, dict[int, set[str]]] = {}
    partition_of: dict[int, int] = {}
    for mid, partition, lid, eid, _ in receipts(history_files(run_dir)):
        by_ledger.setdefault(lid, {}).setdefault(eid, set()).add(mid)
        partition_of[lid] = int(partition or 0)
    order = sorted(by_ledger, key=lambda lid: (-sum(map(len, by_ledger[lid].values())), lid))
    if len(order) < 1 + open_ledgers:
        raise ValueError(f"the history's receipts name {len(order)} ledgers")
    bookies = ("bookie-1:3181", "bookie-2:3181")
    ledgers, lines, expected = [], [], 0
    for i, lid in enumerate(order):
        last = max(by_ledger[lid])
        if i <= open_ledgers:
            last -= cut
        if i == 0:
            expected = len({m for e, mids in by_ledger[lid].items() if e > last for m in mids})
        ledgers.append({"partition": partition_of[lid], "ledger": lid,
                        "state": "OPEN" if 0 < i <= open_ledgers else "CLOSED", "ensemble_size": 2,
                        "write_quorum": 2, "ack_quorum": 2, "ensembles": {"0": list(bookies)},
                        "last_confirmed": last, "read_to": last + 2, "cut": False})
        lines += [{"ledger": lid, "entry": e, "bookie": b, "rc": 0, "bytes": 100, "crc32": f"{e:08x}",
                   "lac": e - 1} for e in range(last + 1) for b in bookies]
    out = run_dir / "bookies"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ledgers.json").write_text(json.dumps(ledgers))
    (out / "entries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return expected
