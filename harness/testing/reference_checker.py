"""A plain-Python checker with the anomaly definitions of ``harness.check``.

One process, dicts and sets, the history files streamed twice (the second pass
judges poll sequences once the recovery read is known). The bench times it
against the Spark job; the tests check that both agree on random histories.
Memory grows with the history (about 1 GB per million messages): it is a
reference, not a tool for large runs.

Lines are read by ``harness.check.lines.read_lines``, the history contract's
plain-Python reading (the Spark job's ingest takes the same lines through PyArrow,
and falls back to that reading only near lines PyArrow refuses; so these tests
also check the fast path against it): a line that is not a JSON object, or whose
numeric fields are not integers, is dropped; a non-string value of a string field
becomes its JSON text; a batch line (``polls``, ``oks``, ``invokes``) is its events
(``harness.history.expand_batch``; a null column reads like an absent one, as the
line's own field); its columns must be lists (integer lists for positions), else
the line is dropped. History lines that are dropped, of a type that is no client
event, or batches whose columns differ in length are counted as skipped (``lines``
and ``skipped`` counts), sends without a message id as not judged (``unjudged``,
``unjudged-ok``), replica lines that are dropped or not replica records as skipped
(``replica-lines``, ``replica-skipped``), each per file and reason (the result's
``unread``); a history of which no line could be read is a CheckError,
as are inputs that are not readable files (``harness.check.inputs``), as in the
Spark job.

Usage: ``python -m harness.testing.reference_checker RUN_DIR`` prints the result as JSON.
"""

from __future__ import annotations

import bisect
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.check.anomalies.vocab import PRECOMMIT_SLACK_S
from harness.check.inputs import require_lines, run_files
from harness.check.lines import FileTally, Tally, read_lines
from harness.check.result import MAX_EXAMPLES, CheckResult, example, make_result
from harness.errors import CheckError

__all__ = ["check"]

Seq = tuple[int, int, int]  # (file index, line number, index in a polls batch): file order
Pos = tuple[int, int, int]
Place = tuple[str, int, Pos]  # (topic, partition, position)


def valid_position(event: dict[str, Any]) -> Pos | None:
    """The key of ``harness.history.position_key`` for an event with a partition and a
    non-negative offset (Kafka) or ledger and entry (Pulsar), else None. (position_key
    itself fails on ``"batch": null``.)"""
    if event.get("partition") is None:
        return None
    offset = event.get("offset")
    if offset is not None:
        return (-1, offset, -1) if offset >= 0 else None
    ledger, entry, batch = event.get("ledger"), event.get("entry"), event.get("batch")
    if ledger is None or entry is None or ledger < 0 or entry < 0:
        return None
    return (ledger, entry, -1 if batch is None else batch)


@dataclass
class _Read:
    """One poll, as examples show it."""

    client: str | None
    phase: str
    topic: str | None
    partition: int | None
    pos: Pos | None

    t: float | None = None

    def example(self, mid: str) -> dict[str, Any]:
        return example(mid=mid, client=self.client, phase=self.phase, topic=self.topic,
                       partition=self.partition, pos=self.pos)


@dataclass
class _Txn:
    """What the history says about one transaction (docs/checker.md "Transactions")."""

    committed: bool = False  # a commit ok
    aborted: bool = False  # an abort ok
    commit_t: float | None = None  # the t of its first commit invoke
    first: tuple[Seq, str | None] | None = None  # its first txn event: (seq, client)
    mids: list[str] = field(default_factory=list)  # ids whose first invoke carries it


@dataclass
class _Mid:
    """What the history says about one message id."""

    invoked: bool = False
    inv: tuple[Seq, str | None, str | None] | None = None  # (seq, client, topic)
    ack: tuple[str | None, str | None, int | None, Pos | None] | None = None  # client, topic, partition, pos
    ok: bool = False
    fail: bool = False
    info: bool = False
    aborted: bool = False
    run: bool = False
    rec: bool = False
    bindings: set[Place] = field(default_factory=set)
    first_read: _Read | None = None
    first_rc_read: _Read | None = None
    tx: str | None = None  # the transaction of its first invoke
    rc_read: bool = False  # polled by a read_committed client (either phase)
    ru_read: bool = False  # polled by another client
    rec_rc: bool = False  # in the recovery read, by a read_committed client
    src: str | None = None  # a copier's send: the input id it copies (its first invoke's)
    early_rc_read: _Read | None = None  # its first read_committed poll before the commit call

    def ack_topic(self) -> str | None:
        """The ack's topic: ok events need not name it, their invoke does."""
        if self.ack is not None and self.ack[1] is not None:
            return self.ack[1]
        return self.inv[2] if self.inv is not None else None

    def ack_place(self) -> Place | None:
        topic = self.ack_topic()
        if self.ack is None or self.ack[3] is None or topic is None:
            return None
        return (topic, self.ack[2], self.ack[3])  # type: ignore[return-value]


class _Checker:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.files, self.replica_files = run_files(run_dir)
        self.tally = FileTally()
        self.mids: dict[str, _Mid] = {}
        self.bound: dict[Place, set[str]] = {}
        self.replicas: dict[Place, set[tuple[str | None, str]]] = {}
        #: per place, the ids of the recovery read, and of run polls with the first poll's
        #: file order and client
        self.rec_ids: dict[Place, set[str]] = {}
        self.run_ids: dict[Place, dict[str, tuple[Seq, Any]]] = {}
        self.recovered: dict[tuple[str, int], list[Pos]] = {}
        self.rc_clients: set[str | None] = set()
        self.txns: dict[str, _Txn] = {}
        self.found: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
        #: Key_Shared run polls: (t, seq, topic, subscription, key, partition, pos, client, mid)
        self.key_shared: list[tuple[Any, ...]] = []
        #: producer receipts naming a ledger and an entry: (mid, client, partition, ledger, entry)
        self.receipts: list[tuple[str, Any, Any, int, int]] = []

    def _mid(self, mid: str) -> _Mid:
        m = self.mids.get(mid)
        if m is None:
            m = self.mids[mid] = _Mid()
        return m

    def _flag(self, kind: str, key: Any, found: dict[str, Any]) -> None:
        """One anomaly of ``kind``; ``key`` orders examples as the Spark job does."""
        self.found.setdefault(kind, []).append((key, found))

    # -- pass 1: ids, bindings, the recovery read --------------------------------

    def first_pass(self) -> None:
        recovered: set[tuple[str, int, Pos]] = set()
        for fidx, path in enumerate(self.files):
            tally = Tally()
            for (n, i), ev in read_lines(path, tally=tally):
                kind, mid, pos = ev.get("type"), ev.get("mid"), valid_position(ev)
                if kind in ("meta", "poll") and ev.get("isolation") == "read_committed":
                    self.rc_clients.add(ev.get("client"))
                if kind == "txn" and ev.get("tx") is not None:
                    self._txn_event(ev, (fidx, n, i))
                if kind == "poll" and pos is not None and ev.get("topic") is not None:
                    place = (ev["topic"], ev["partition"], pos)
                    if ev.get("phase") == "recovery":
                        recovered.add(place)
                    if mid is not None:
                        self.bound.setdefault(place, set()).add(mid)
                        self._mid(mid).bindings.add(place)
                        if ev.get("phase") == "recovery":
                            self.rec_ids.setdefault(place, set()).add(mid)
                        else:
                            first = ((fidx, n, i), ev.get("client"))
                            self.run_ids.setdefault(place, {}).setdefault(mid, first)
                if mid is None or kind not in ("invoke", "ok", "fail", "info", "poll"):
                    continue
                if (kind == "poll" and ev.get("phase") != "recovery"
                        and ev.get("subscription_type") == "Key_Shared" and ev.get("key") is not None
                        and ev["t"] is not None and pos is not None and ev.get("topic") is not None):
                    self.key_shared.append((ev["t"], (fidx, n, i), ev["topic"], ev.get("subscription"),
                                            ev["key"], ev["partition"], pos, ev.get("client"), mid))
                m = self._mid(mid)
                if kind == "invoke":
                    m.invoked = True
                    if m.inv is None:
                        m.inv = ((fidx, n, i), ev.get("client"), ev.get("topic"))
                        m.tx = ev.get("tx")
                        m.src = ev.get("src")
                elif kind == "ok":
                    m.ok = True
                    ledger, entry = ev.get("ledger"), ev.get("entry")
                    if isinstance(ledger, int) and isinstance(entry, int) and ledger >= 0 and entry >= 0:
                        self.receipts.append((mid, ev.get("client"), ev.get("partition"), ledger, entry))
                    if m.ack is None:
                        m.ack = (ev.get("client"), ev.get("topic"), ev.get("partition"), pos)
                elif kind == "fail":
                    m.fail = True
                elif kind == "info":
                    m.info = True
                if kind in ("ok", "fail") and ev.get("txn") == "aborted":
                    m.aborted = True
                if kind == "poll":
                    read = _Read(ev.get("client"), "recovery" if ev.get("phase") == "recovery" else "run",
                                 ev.get("topic"), ev.get("partition"), pos)
                    if read.phase == "recovery":
                        m.rec = True
                    else:
                        m.run = True
                    if m.first_read is None:
                        m.first_read = read
            self._counted(path, tally)
        for path in self.replica_files:
            tally = Tally()
            for _, ev in read_lines(path, replicas=True, tally=tally):
                pos, mid = valid_position(ev), ev.get("mid")
                if ev.get("type") == "replica" and pos is not None and ev.get("topic") is not None \
                        and mid is not None:
                    place = (ev["topic"], ev["partition"], pos)
                    self.bound.setdefault(place, set()).add(mid)
                    self.replicas.setdefault(place, set()).add((ev.get("node"), mid))
            self._counted(path, tally)
        for mid, m in self.mids.items():
            acked = m.ack_place()
            if acked is not None:
                self.bound.setdefault(acked, set()).add(mid)
                m.bindings.add(acked)
        for mid, m in self.mids.items():
            if m.tx is not None:
                self.txns.setdefault(m.tx, _Txn()).mids.append(mid)
        for topic, partition, pos in recovered:
            self.recovered.setdefault((topic, partition), []).append(pos)
        for positions in self.recovered.values():
            positions.sort()

    def _counted(self, path: Path, tally: Tally) -> None:
        """A file's tally, read, into the check's."""
        name = str(path.relative_to(self.run_dir))
        self.tally.lines[name] += tally.lines
        self.tally.unread[name].update(tally.reasons)

    def _txn_event(self, ev: dict[str, Any], seq: Seq) -> None:
        txn = self.txns.setdefault(ev["tx"], _Txn())
        action, status = ev.get("action"), ev.get("status")
        if txn.first is None:
            txn.first = (seq, ev.get("client"))
        if action == "commit" and status == "ok":
            txn.committed = True
        elif action == "abort" and status == "ok":
            txn.aborted = True
        elif action == "commit" and status == "invoke" and ev.get("t") is not None:
            txn.commit_t = ev["t"] if txn.commit_t is None else min(txn.commit_t, ev["t"])

    # -- pass 2: poll sequences and read_committed reads ---------------------------

    def second_pass(self) -> None:
        last_poll: dict[tuple[Any, ...], tuple[Seq, Pos, str | None, int]] = {}
        last_reset: dict[tuple[Any, ...], Seq] = {}
        polled: dict[tuple[Any, ...], Seq] = {}  # (group, position, id): its last poll
        for fidx, path in enumerate(self.files):
            for (n, i), ev in read_lines(path):
                kind, client = ev.get("type"), ev.get("client")
                topic, partition = ev.get("topic"), ev.get("partition")
                seq = (fidx, n, i)
                if kind == "reset":  # a missing topic or partition covers them all
                    last_reset[(client, topic, partition)] = seq
                if kind != "poll":
                    continue
                mid, phase = ev.get("mid"), "recovery" if ev.get("phase") == "recovery" else "run"
                if mid is not None:
                    self._judged_read(self.mids[mid], _Read(client, phase, topic, partition,
                                                            valid_position(ev), ev.get("t")))
                pos = valid_position(ev)
                if pos is None or topic is None or partition is None:  # pos: partition is not None
                    continue
                recovered = self.recovered.get((topic, partition), [])
                at_or_below = bisect.bisect_right(recovered, pos)
                group = (client, phase, topic, partition)
                prev = last_poll.get(group)
                last_poll[group] = (seq, pos, mid, at_or_below)
                resets = [last_reset.get((client, t, p)) for t in (topic, None) for p in (partition, None)]
                if mid is not None and pos[0] == -1:  # silent-reread: Kafka offsets
                    before = polled.get((group, pos, mid))
                    polled[(group, pos, mid)] = seq
                    if before is not None and not any(r is not None and r > before for r in resets):
                        self._flag("silent-reread", (_nf(client), _nf(topic), partition, seq), example(
                            client=client, phase=phase, mid=mid, topic=topic, partition=partition,
                            pos=pos, prev={"mid": mid, "pos": pos}))
                if prev is None or any(r is not None and r > prev[0] for r in resets):
                    continue
                key = (_nf(client), _nf(topic), partition, seq)
                found = example(client=client, phase=phase, mid=mid, topic=topic, partition=partition,
                                pos=pos, prev={"mid": prev[2], "pos": prev[1]})
                one_call = prev[0][:2] == seq[:2]  # records of one polls line: one poll call
                if pos <= prev[1]:
                    kind = "nonmonotonic-poll"
                elif (skipped := bisect.bisect_left(recovered, pos) - prev[3]) > 0:
                    kind, found = "poll-skip", {**found, "skipped": skipped}
                else:
                    continue
                self._flag(kind, key, found)
                if one_call:
                    self._flag(f"int-{kind}", key, found)

    def _judged_read(self, m: _Mid, read: _Read) -> None:
        """A poll of ``m``, once the read_committed clients and commit times are known. A poll
        without a client is neither read_committed nor not (as in the Spark job)."""
        if read.client is None:
            return
        if read.client not in self.rc_clients:
            m.ru_read = True
            return
        m.rc_read = True
        m.rec_rc |= read.phase == "recovery"
        if m.first_rc_read is None:
            m.first_rc_read = read
        commit_t = self.txns[m.tx].commit_t if m.tx is not None else None
        if m.early_rc_read is None and (commit_t is None or (
                read.t is not None and read.t < commit_t - PRECOMMIT_SLACK_S)):
            m.early_rc_read = read

    # -- Key_Shared per-key order ------------------------------------------------------

    def key_order(self) -> None:
        """Per (topic, subscription, key, partition), in poll order (t, then file order), each
        id's first poll in the subscription against the highest position of earlier ones."""
        seen: set[tuple[str, str | None, str]] = set()
        top: dict[tuple[Any, ...], tuple[Pos, str | None, str]] = {}
        for _, seq, topic, sub, key, partition, pos, client, mid in sorted(self.key_shared,
                                                                           key=lambda r: r[:2]):
            if (topic, sub, mid) in seen:
                continue  # a redelivery
            seen.add((topic, sub, mid))
            group = (topic, sub, key, partition)
            prev = top.get(group)
            if prev is not None and pos < prev[0]:
                self._flag("key-order", (_nf(sub), _nf(topic), key, partition, seq), example(
                    subscription=sub, key=key, client=client, mid=mid, topic=topic, partition=partition,
                    pos=pos, prev={"client": prev[1], "mid": prev[2], "pos": prev[0]}))
            if prev is None or pos >= prev[0]:
                top[group] = (pos, client, mid)

    # -- judgement ------------------------------------------------------------------

    def _states(self) -> dict[str, str]:
        """Each transaction's status: committed, aborted, seen-committed or unknown."""
        return {tx: "committed" if txn.committed else "aborted" if txn.aborted
                else "seen-committed" if any(self.mids[mid].rc_read for mid in txn.mids) else "unknown"
                for tx, txn in self.txns.items()}

    def _torn(self, states: dict[str, str]) -> None:
        for tx, txn in self.txns.items():
            ms = [self.mids[mid] for mid in txn.mids]
            rec = sum(m.rec for m in ms)
            if states[tx] in ("committed", "seen-committed") and any(m.rec_rc for m in ms) \
                    and rec < len(ms):
                firsts = [m.inv for m in ms if m.inv is not None]
                client = (min(firsts, key=lambda inv: inv[0])[1] if firsts
                          else txn.first[1] if txn.first is not None else None)
                missing = min(mid for mid, m in zip(txn.mids, ms, strict=True) if not m.rec)
                self._flag("torn-transaction", tx, example(tx=tx, client=client, ids=len(ms),
                                                           recovered=rec, missing=missing))

    def judge(self) -> CheckResult:
        counts = dict.fromkeys(("invoked", "ok", "fail", "info", "polled", "recovered"), 0)
        states = self._states()
        self._torn(states)
        for txn_state in states.values():
            name = "txn-unknown" if txn_state == "seen-committed" else f"txn-{txn_state}"
            counts[name] = counts.get(name, 0) + 1
            if txn_state == "seen-committed":
                counts["txn-seen-committed"] = counts.get("txn-seen-committed", 0) + 1
        sends: dict[tuple[Any, ...], list[tuple[Seq, Pos, str, str | None]]] = {}
        for mid, m in self.mids.items():
            for name, flag in (("invoked", m.invoked), ("ok", m.ok), ("fail", m.fail), ("info", m.info),
                               ("polled", m.run), ("recovered", m.rec)):
                counts[name] += flag
            outcome = ("ok" if m.ok else "fail" if m.fail else "info" if m.info
                       else "unacked" if m.invoked else None)
            if outcome not in (None, "ok"):
                name = f"{outcome}-{'present' if m.rec else 'absent'}"
                counts[name] = counts.get(name, 0) + 1
            state = states[m.tx] if m.tx is not None else None
            aborted = m.aborted or state == "aborted"
            if state is None:
                committed = (m.ok and not m.aborted) or (
                    not m.ok and not m.fail and (m.info or m.invoked) and m.run)
            else:
                committed = state in ("committed", "seen-committed")
            if aborted and m.ru_read:
                counts["aborted-uncommitted-read"] = counts.get("aborted-uncommitted-read", 0) + 1
            if committed and (not m.rec or not m.run):
                client, _, partition, pos = m.ack if m.ack is not None else (None, None, None, None)
                ack = example(mid=mid, client=client, topic=m.ack_topic(), partition=partition, pos=pos)
                if not m.rec:
                    self._flag("lost-write", mid, ack)
                elif not m.run:
                    self._flag("unseen", mid, ack)
            if len(m.bindings) > 1:
                positions = sorted(m.bindings)[:MAX_EXAMPLES]
                self._flag("duplicate", mid, example(mid=mid, positions=[
                    example(topic=t, partition=p, pos=pos) for t, p, pos in positions]))
            if (m.run or m.rec) and not m.invoked:
                self._flag("unexpected", mid, m.first_read.example(mid))  # type: ignore[union-attr]
            if aborted and m.first_rc_read is not None:
                self._flag("aborted-read", mid, m.first_rc_read.example(mid))
            elif state is None and not m.aborted and not m.ok and m.fail and m.first_read is not None:
                self._flag("aborted-read", mid, m.first_read.example(mid))  # a failed write, read
            if (state in ("committed", "seen-committed", "unknown") and m.early_rc_read is not None
                    and m.tx is not None):
                read, commit_t = m.early_rc_read, self.txns[m.tx].commit_t
                self._flag("precommitted-read", mid, example(
                    mid=mid, tx=m.tx, client=read.client, phase=read.phase, topic=read.topic,
                    partition=read.partition, pos=read.pos, t=read.t, commit_t=commit_t))
            if m.inv is not None and m.ack is not None and m.ack[3] is not None:
                sends.setdefault((m.inv[1], m.ack_topic(), m.ack[2]), []).append(
                    (m.inv[0], m.ack[3], mid, m.tx))
        for (client, topic, partition), acked in sends.items():
            acked.sort()
            for (_, prev_pos, prev_mid, prev_tx), (seq, pos, mid, tx) in zip(acked, acked[1:], strict=False):
                if pos <= prev_pos:
                    key = (_nf(client), _nf(topic), partition, seq)
                    found = example(client=client, mid=mid, topic=topic, partition=partition, pos=pos,
                                    prev={"mid": prev_mid, "pos": prev_pos})
                    self._flag("nonmonotonic-send", key, found)
                    if tx is not None and tx == prev_tx:  # within one transaction
                        self._flag("int-nonmonotonic-send", key, found)
        for place, mids in self.bound.items():
            topic, partition, pos = place
            if len(mids) > 1:
                self._flag("inconsistent-offsets", place, example(
                    topic=topic, partition=partition, pos=pos, mids=sorted(mids)[:MAX_EXAMPLES]))
            replicas = self.replicas.get(place, set())
            if len({mid for _, mid in replicas}) > 1:
                self._flag("replica-divergence", place, example(
                    topic=topic, partition=partition, pos=pos,
                    replicas=[{"node": node, "mid": mid} for node, mid in sorted(replicas, key=_nf_pair)]))
        self._truncation_skips()
        bookie_unread = self._bookies()
        copied = self._exactly_once()
        if copied is not None:
            counts["eos-copied"] = copied
        anomalies = {kind: len(rows) for kind, rows in self.found.items()}
        examples = {kind: [ex for _, ex in sorted(rows, key=lambda r: r[0])[:MAX_EXAMPLES]]
                    for kind, rows in self.found.items()}
        counts.update(self.tally.counts())
        return make_result(anomalies, examples, counts, {**self.tally.by_file(), **bookie_unread})

    def _bookies(self) -> dict[str, dict[str, int]]:
        """under-replicated, under-write-quorum, bookie-divergence and past-closed-end
        (docs/checker.md) from
        ``bookies/``: bookie *j* of the ensemble in force holds entry *e* when ``(j - e) mod E``
        is below the write quorum; entries past the ledger's last confirmed one are not judged.
        Returns the lines that are not bookie reads, by file and reason."""
        base = self.run_dir / "bookies"
        if not (base / "ledgers.json").is_file() or not (base / "entries.jsonl").is_file():
            return {}
        try:
            ledgers = {int(r["ledger"]): r for r in json.loads((base / "ledgers.json").read_text())}
            for r in ledgers.values():
                r["segments"] = sorted((int(first), [str(b) for b in members])
                                       for first, members in r["ensembles"].items())
                for key in ("partition", "last_confirmed", "write_quorum", "ack_quorum"):
                    r[key] = int(r[key])
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CheckError(f"{base / 'ledgers.json'}: not the ledger list of a bookie dump "
                             f"({type(exc).__name__}: {exc})") from exc

        def ensemble(led: dict[str, Any], entry: int) -> list[str]:
            members: list[str] = []
            for first, bookies in led["segments"]:
                if first <= entry:
                    members = bookies
            return members

        held: dict[tuple[int, int], dict[str, str]] = {}
        failed: set[tuple[int, int]] = set()  # entries a write-set bookie's read failed on
        no_ledger: dict[tuple[int, int], int] = {}  # write-set bookies without the ledger
        bad = 0
        reasons: dict[str, int] = {}
        with open(base / "entries.jsonl", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    rc, lid, eid, bookie = r["rc"], int(r["ledger"]), int(r["entry"]), str(r["bookie"])
                    crc = str(r["crc32"]) if rc == 0 else ""
                except (ValueError, TypeError, KeyError):
                    bad += 1
                    continue
                led = ledgers.get(lid)
                if rc in (-13, "removed") or led is None or not 0 <= eid <= led["last_confirmed"]:
                    continue  # no such entry, or a bookie removed for good: not held
                members = ensemble(led, eid)
                if bookie in members and (members.index(bookie) - eid) % len(members) < led["write_quorum"]:
                    if rc == 0:
                        held.setdefault((lid, eid), {})[bookie] = crc
                    elif rc == -7:
                        no_ledger[(lid, eid)] = no_ledger.get((lid, eid), 0) + 1
                    else:
                        failed.add((lid, eid))
                        reason = f"bookie read failed (rc {json.dumps(rc)})"
                        reasons[reason] = reasons.get(reason, 0) + 1
        for lid in sorted(ledgers):
            led = ledgers[lid]
            for eid in range(led["last_confirmed"] + 1):
                copies = held.get((lid, eid), {})
                members = ensemble(led, eid)
                ex = example(partition=led["partition"], ledger=lid, entry=eid,
                             last_confirmed=led["last_confirmed"], ack_quorum=led["ack_quorum"],
                             write_quorum=led["write_quorum"],
                             write_set=[members[(eid + i) % len(members)]
                                        for i in range(min(led["write_quorum"], len(members)))],
                             held=[{"bookie": b, "crc32": c} for b, c in sorted(copies.items())])
                if no_ledger.get((lid, eid)) and not copies:
                    reason = "bookie read failed (rc -7)"
                    reasons[reason] = reasons.get(reason, 0) + no_ledger[(lid, eid)]
                elif (lid, eid) in failed:
                    pass
                elif len(copies) < led["ack_quorum"]:
                    self._flag("under-replicated", (lid, eid), ex)
                elif len(copies) < led["write_quorum"]:
                    self._flag("under-write-quorum", (lid, eid), ex)
                if len(set(copies.values())) > 1:
                    self._flag("bookie-divergence", (lid, eid), ex)
        # past-closed-end: a receipt past the last entry of a closed ledger, per message (its
        # first such receipt by ledger and entry)
        past: dict[str, tuple[int, int, Any, Any]] = {}
        for mid, client, partition, lid, eid in self.receipts:
            led = ledgers.get(lid)
            if led is None or led.get("state") != "CLOSED" or eid <= led["last_confirmed"]:
                continue
            if mid not in past or (lid, eid) < past[mid][:2]:
                past[mid] = (lid, eid, client, partition)
        for mid, (lid, eid, client, partition) in past.items():
            self._flag("past-closed-end", (lid, eid, mid),
                       example(mid=mid, client=client, partition=partition, ledger=lid, entry=eid,
                               last_entry=ledgers[lid]["last_confirmed"]))
        if bad:
            reasons["not a bookie read"] = bad
        return {"bookies/entries.jsonl": reasons} if reasons else {}

    def _exactly_once(self) -> int | None:
        """eos-duplicate and eos-loss (docs/checker.md "Exactly once"); the number of input
        ids copied, or None when no send copies one."""
        if not any(m.src is not None for m in self.mids.values()):
            return None
        copies: dict[str, list[str]] = {}
        for mid, m in self.mids.items():
            if m.src is not None and m.rec_rc:
                copies.setdefault(m.src, []).append(mid)
        for src, ids in copies.items():
            if len(ids) > 1:
                self._flag("eos-duplicate", src, example(mid=src, copies=len(ids), copy=min(ids)))
        bound: dict[tuple[str, int], Pos] = {}
        for src in copies:
            copied = self.mids.get(src)
            place = copied.ack_place() if copied is not None else None
            if place is not None:
                topic, partition, pos = place
                if (topic, partition) not in bound or pos > bound[(topic, partition)]:
                    bound[(topic, partition)] = pos
        for mid, m in self.mids.items():
            place = m.ack_place()
            if place is None or not m.rec_rc or mid in copies:
                continue
            topic, partition, pos = place
            if (topic, partition) in bound and pos < bound[(topic, partition)]:
                self._flag("eos-loss", mid, example(mid=mid, topic=topic, partition=partition, pos=pos))
        return len(copies)

    def _truncation_skips(self) -> None:
        """Positions where the recovery read holds one id, run polls read others and not it,
        and a run poll at a later position of the partition read the recovery's id there."""
        positions: dict[tuple[str, int], list[Pos]] = {}
        for topic, partition, pos in self.run_ids:
            positions.setdefault((topic, partition), []).append(pos)
        for (topic, partition), found in positions.items():
            later = False  # a later position whose recovery id a run poll read
            for pos in sorted(found, reverse=True):
                place = (topic, partition, pos)
                rec, run = self.rec_ids.get(place, set()), self.run_ids[place]
                if len(rec) != 1:
                    continue
                (recovered,) = rec
                if recovered in run:
                    later = True
                elif later:
                    mid, (_, client) = min(run.items(), key=lambda item: item[1][0])
                    self._flag("truncation-skip", place, example(
                        topic=topic, partition=partition, pos=pos, mid=mid, client=client,
                        recovered_mid=recovered))


def _nf(value: Any) -> tuple[bool, Any]:
    """Sort key putting None first, as Spark sorts nulls."""
    return (value is not None, value if value is not None else "")


def _nf_pair(pair: tuple[Any, Any]) -> tuple[tuple[bool, Any], ...]:
    return tuple(_nf(x) for x in pair)


def check(run_dir: str | Path) -> CheckResult:
    """Check ``run_dir`` in this process; same result as ``harness.check.check_run``."""
    checker = _Checker(Path(run_dir))
    checker.first_pass()
    counts = checker.tally.counts()
    require_lines(checker.run_dir, counts["lines"], counts["skipped"])
    checker.second_pass()
    checker.key_order()
    return checker.judge()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.testing.reference_checker RUN_DIR")
    print(json.dumps(check(sys.argv[1]).to_dict(), indent=2, sort_keys=True))
