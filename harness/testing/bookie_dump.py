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

__all__ = ["DumpLedger", "write_dump", "LEDGERS"]

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
