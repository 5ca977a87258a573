"""What each bookie holds of a case topic's ledgers, read after the recovery read.

For every partition of the topic, the owner's internal stats name the managed ledger's
ledgers, each with its metadata (ensembles, quorums, state, last entry of a closed ledger);
the open ledger's last confirmed entry comes from the same stats. Then each bookie of each
ensemble is asked, alone, for every entry of the ledger range that ensemble wrote
(``harness/clients/java/BookieDump.java``, BookKeeper's own bookie client in a helper
container on the cluster's network: no fencing, no recovery). A run directory gets:

- ``bookies/ledgers.json``: per ledger its partition, state, quorums, ensembles, the last
  entry the metadata or the stats confirm, and the range read;
- ``bookies/entries.jsonl``: one line per (ledger, bookie, entry) read: ``rc`` 0 with the
  entry's ``bytes`` (as stored), ``crc32`` of its payload (after the header and the digest
  code, :data:`DIGEST_BYTES`; of all the stored bytes, with ``crc_of`` ``stored``, for a
  ledger of unknown digest type) and the ``lac`` in its header, or the bookie's error
  (``-13``: no such entry); ``rc`` ``"removed"`` for a bookie removed for good (the
  ``remove`` fault), which is not asked: it holds nothing.

The entries a bookie should hold are its write sets: with BookKeeper's round-robin
distribution, entry *e* of an ensemble of *E* bookies is written to bookies
``(e + i) mod E`` for *i* below the write quorum; the checker's bookie family
(:mod:`harness.check.anomalies.bookies`) judges the copies against them.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BackendError
from .pulsar import ledger_metadata, parse_position

if TYPE_CHECKING:
    from .pulsar import PulsarSystem

__all__ = ["LedgerRange", "parse_metadata", "read_ranges", "asked_reads", "dump_bookies",
           "MAX_READS", "ASKED", "REMOVED"]

#: The most (ledger, bookie, entry) reads one dump makes; past it the ranges are cut (and the
#: cut is written in ledgers.json), so a long run's dump stays minutes, not hours.
MAX_READS = 600_000
#: Entries read past the last confirmed one: a bookie may hold an entry its writer never saw
#: acknowledged (written, then the writer died), which is no loss but worth seeing.
PAST_LAST = 2



@dataclass
class LedgerRange:
    """One ledger of a partition, and what of it the dump reads."""

    partition: int
    ledger: int
    state: str  # OPEN | CLOSED | IN_RECOVERY
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    #: first entry id -> the ensemble's bookie ids from that entry on
    ensembles: dict[int, list[str]]
    #: the last entry confirmed: a closed ledger's lastEntryId, an open one's last confirmed
    #: entry from the stats (-1: none)
    last_confirmed: int
    #: the last entry read (last_confirmed + PAST_LAST, unless cut by MAX_READS)
    read_to: int = -1
    cut: bool = False
    #: the ledger's digest type (``digestType`` of its metadata: CRC32C for Pulsar's ledgers)
    digest: str = "?"
    #: where its metadata was read: ``owner`` (the owner's internal stats: the handle it
    #: holds) or ``store`` (the metadata store, when AutoRecovery may have changed it since)
    metadata: str = "owner"


def parse_metadata(partition: int, ledger: int, text: str, last_confirmed: int | None) -> LedgerRange:
    """A ledger from BookKeeper's ``LedgerMetadata{...}`` string (as internalStats gives it);
    ``last_confirmed`` for an open ledger (a closed one's is its ``lastEntryId``)."""
    try:
        fields, frozen = ledger_metadata(text)
    except ValueError:
        raise ValueError(f"unexpected ledger metadata for ledger {ledger}: {text[:300]}") from None
    ensembles = {first: list(members) for first, members in frozen.items()}
    state = fields.get("state", "?")
    last = int(fields.get("lastEntryId", "-1")) if state == "CLOSED" else last_confirmed
    return LedgerRange(partition, ledger, state, int(fields["ensembleSize"]),
                       int(fields["writeQuorumSize"]), int(fields["ackQuorumSize"]), ensembles,
                       -1 if last is None else last, digest=fields.get("digestType", "?"))


def read_ranges(ledgers: list[LedgerRange], max_reads: int = MAX_READS) -> list[tuple[int, str, int, int]]:
    """(ledger, bookie, first, last) to read: each ensemble's whole range from each of its
    bookies, to ``PAST_LAST`` beyond the last confirmed entry; sets each ledger's ``read_to``
    and, once ``max_reads`` would be passed, cuts the rest (``cut``)."""
    tasks: list[tuple[int, str, int, int]] = []
    budget = max_reads
    for led in ledgers:
        led.read_to = led.last_confirmed + PAST_LAST
        firsts = sorted(led.ensembles)
        for i, first in enumerate(firsts):
            last = firsts[i + 1] - 1 if i + 1 < len(firsts) else led.read_to
            last = min(last, led.read_to)
            if last < first:
                continue
            bookies = led.ensembles[first]
            per_bookie = last - first + 1
            if per_bookie * len(bookies) > budget:
                last = first + budget // max(len(bookies), 1) - 1
                led.cut = True
                led.read_to = min(led.read_to, last)
            if last < first:
                break
            tasks.extend((led.ledger, b, first, last) for b in bookies)
            budget -= (last - first + 1) * len(bookies)
    return tasks


#: The bytes of each digest type's code after an entry's 32-byte header (ledger id, entry id,
#: last add confirmed, length) as a bookie stores it: BookKeeper's DigestManager subclasses
#: (CRC32: 8, CRC32C: 4, HMAC: 20, DUMMY: 0). The dump's ``crc32`` covers what follows, the
#: payload the producer sent, because the header and the code differ between the copies of an
#: entry that a ledger recovery wrote again: the recovering client sends it with its own last
#: add confirmed.
DIGEST_BYTES = {"CRC32": 8, "CRC32C": 4, "HMAC": 20, "MAC": 20, "DUMMY": 0}


#: The ``rc`` of the reads a bookie removed for good (the ``remove`` fault) is not asked for:
#: it holds nothing, as a machine lost with its disk.
REMOVED = "removed"
#: the file of the reads
ENTRIES = "entries.jsonl"


#: Reads asked for besides the ledgers' write sets (one JSON object per line: ledger, entry,
#: bookie), e.g. by an injection point: the copy of the held bookie, which an ensemble change
#: may have taken out of the entry's write set.
ASKED = "asked.jsonl"


def asked_reads(path: Path, ledgers: list[LedgerRange]) -> list[tuple[int, str, int, int]]:
    """The (ledger, bookie, entry, entry) reads ``path`` asks for that :func:`read_ranges`
    does not make (a bookie outside the entry's ensemble, or past ``read_to``)."""
    if not path.is_file():
        return []
    covered: dict[int, LedgerRange] = {led.ledger: led for led in ledgers}
    reads = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            lid, entry, bookie = int(row["ledger"]), int(row["entry"]), str(row["bookie"])
        except (ValueError, KeyError, TypeError):
            continue
        led = covered.get(lid)
        if led is not None and entry <= led.read_to:
            first = max((k for k in led.ensembles if k <= entry), default=None)
            if first is not None and bookie in led.ensembles[first]:
                continue  # read_ranges reads it
        if (lid, bookie, entry, entry) not in reads:
            reads.append((lid, bookie, entry, entry))
    return reads


def _from_store(system: PulsarSystem, ledgers: list[LedgerRange], problems: list[str]) -> list[LedgerRange]:
    """The ledgers with their metadata as the metadata store holds it. An owner's internal
    stats give the metadata of the handles it holds, and AutoRecovery's replication workers
    change a ledger's ensembles in the store behind them (seen: an open ledger's first
    fragment re-replicated off a decommissioned bookie, the owner's stats still naming it);
    the dump must ask the bookies that hold the copies now. A ledger the store gave nothing
    for keeps the owner's metadata, and the problem is said."""
    try:
        stored = system.stored_metadata(led.ledger for led in ledgers)
    except Exception as exc:  # an admin or backend error: said, the owner's view kept
        problems.append(f"bookies: ledger metadata from the store: {exc}")
        return ledgers
    fresh = []
    for led in ledgers:
        text = stored.get(led.ledger)
        if text is None:
            problems.append(f"bookies: ledger {led.ledger}: no metadata in the store; the owner's is used")
            fresh.append(led)
            continue
        lac = led.last_confirmed if led.last_confirmed >= 0 else None  # the stats' (an open ledger)
        got = parse_metadata(led.partition, led.ledger, text, lac)
        got.metadata = "store"
        fresh.append(got)
    return fresh


def dump_bookies(system: PulsarSystem, run_dir: Path, topic: str, partitions: int,
                 problems: list[str]) -> Path | None:
    """Writes ``bookies/ledgers.json`` and ``bookies/entries.jsonl`` for ``topic``; a
    problem (stats unreadable, the dump failing) is appended to ``problems`` and the files
    written so far are kept. Returns the directory, or None when nothing could be read."""
    out = run_dir / "bookies"
    ledgers: list[LedgerRange] = []
    for p in range(partitions):
        try:  # partition 0 of a non-partitioned topic is the topic itself (PulsarSystem._part)
            stats = system.internal_stats(topic, p)
        except Exception as exc:  # an admin error, a broker down: said, not raised
            problems.append(f"bookies: internal stats of partition {p}: {exc}")
            continue
        # the last confirmed position names its ledger: an open ledger other than it (one
        # not recovered yet) has no known last entry and is read but not judged (-1)
        lac = parse_position(stats.get("lastConfirmedEntry"))
        for item in stats.get("ledgers") or []:
            meta = item.get("metadata")
            if not meta:
                problems.append(f"bookies: partition {p} ledger {item.get('ledgerId')}: no metadata")
                continue
            try:
                lid = int(item["ledgerId"])
                ledgers.append(parse_metadata(p, lid, str(meta), lac[1] if lac and lac[0] == lid else None))
            except (KeyError, ValueError) as exc:
                problems.append(f"bookies: partition {p}: {exc}")
    if not ledgers:
        return None
    if system.autorecovery:
        ledgers = _from_store(system, ledgers, problems)
    out.mkdir(parents=True, exist_ok=True)
    tasks = read_ranges(ledgers) + asked_reads(out / ASKED, ledgers)
    (out / "ledgers.json").write_text(json.dumps([asdict(led) for led in ledgers], indent=1) + "\n")
    gone = [t for t in tasks if t[1].split(":")[0] in system.removed]
    tasks = [t for t in tasks if t not in gone]
    if tasks:
        try:
            _run_dump(system, run_dir, tasks, {led.ledger: led.digest for led in ledgers})
        except BackendError as exc:
            problems.append(f"bookies: {exc}")
    if gone:  # not asked: a bookie removed for good holds nothing
        with open(out / ENTRIES, "a", encoding="utf-8") as fh:
            for lid, bookie, first, last in gone:
                fh.writelines(json.dumps({"ledger": lid, "entry": e, "bookie": bookie, "rc": REMOVED}) + "\n"
                              for e in range(first, last + 1))
    return out


def _run_dump(system: PulsarSystem, run_dir: Path, tasks: list[tuple[int, str, int, int]],
              digests: dict[int, str], timeout_s: float = 180) -> None:
    from ..clients.jvm import RUN_MOUNT, SOURCES

    work = run_dir / "bookies" / "java"
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCES / "BookieDump.java", work / "BookieDump.java")
    (work / "tasks.txt").write_text("".join(f"{lg} {b} {f} {la}\n" for lg, b, f, la in tasks))
    codes = "".join(f"digest.{lg}={DIGEST_BYTES[d]}\n" for lg, d in sorted(digests.items())
                    if d in DIGEST_BYTES)
    (work / "dump.properties").write_text(
        f"tasks={RUN_MOUNT}/bookies/java/tasks.txt\nout={RUN_MOUNT}/bookies/entries.jsonl\n{codes}")
    libs = "/opt/pulsar/libs/*"
    script = (f"cd {RUN_MOUNT}/bookies/java && "
              f"java -m jdk.compiler/com.sun.tools.javac.Main -nowarn -d classes "
              f"-cp \"$(printf '%s:' {libs}.jar)\" BookieDump.java && "
              f"exec java -Xmx256m -XX:+UseSerialGC -cp 'classes:{libs}' BookieDump dump.properties")
    if system.cluster.on_hosts:
        _dump_on_host(system, run_dir, script, timeout_s)
        return
    name = f"chaos-pulsar-bookie-dump-{uuid.uuid4().hex[:6]}"
    box = system.cluster.run_helper(name, ["sh", "-c", script], role="evidence",
                                    mounts={str(run_dir.resolve()): RUN_MOUNT}, working_dir=RUN_MOUNT)
    try:
        end = time.monotonic() + timeout_s
        while box.status not in ("exited", "dead"):
            if time.monotonic() > end:
                box.kill()
                raise BackendError(f"the bookie dump took over {timeout_s:.0f} s (killed)")
            time.sleep(0.5)
        code = box.attrs().get("State", {}).get("ExitCode")
        logs = box.logs(tail=40)
    finally:
        try:
            box.remove()
        except BackendError:
            pass
    (work / "dump.log").write_text(logs)
    if code != 0:
        raise BackendError(f"the bookie dump exited with code {code}: {logs.strip()[-600:]}")


def _dump_on_host(system: PulsarSystem, run_dir: Path, script: str, timeout_s: float) -> None:
    """The dump on a host of a cluster on hosts (each has the Java runtime, Pulsar's jars and
    every node's name): its files sent to a folder standing in for the run directory, the
    entries read back."""
    from ..clients.jvm import RUN_MOUNT

    node = system.cluster.nodes()[0]  # any host: the dump reads the bookies over the network
    place = f"/chaos/bookie-dump-{uuid.uuid4().hex[:6]}"
    work = run_dir / "bookies" / "java"
    proc = node.container
    status, out = proc.exec(["mkdir", "-p", f"{place}/bookies/java"])
    if status != 0:
        raise BackendError(f"the bookie dump: cannot make {place} on {node.name}'s host: "
                           f"{out.strip()[-200:]}")
    for name in ("BookieDump.java", "tasks.txt", "dump.properties"):
        text = (work / name).read_text().replace(RUN_MOUNT, place)
        proc.put_file(f"{place}/bookies/java/{name}", text.encode())
    code, logs = proc.exec(["timeout", str(int(timeout_s)), "sh", "-c", script.replace(RUN_MOUNT, place)])
    (work / "dump.log").write_text(logs[-20000:])
    if code != 0:
        raise BackendError(f"the bookie dump on {node.name}'s host exited with code {code}: "
                           f"{logs.strip()[-600:]}")
    entries = dict(proc.get_files(f"{place}/bookies/{ENTRIES}"))
    with open(run_dir / "bookies" / ENTRIES, "wb") as fh:
        for content in entries.values():
            fh.write(content)
    proc.exec(["rm", "-rf", place])
