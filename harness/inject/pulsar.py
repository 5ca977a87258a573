"""Crash-timing points on Pulsar's and BookKeeper's replication states.

A point targets entry N of a partition's current ledger: N is the id the next entry gets
(:meth:`PulsarSystem.write_position`), or the case's ``offset``. The rule (in
``rules/pulsar-<major>.<minor>.btm``) fires on the first entry at or after N of that ledger,
writes a HIT line naming the ledger and entry, and holds the thread:

- ``BK-JOURNALED`` on one bookie of N's write set (the first, by BookKeeper's round-robin
  striping: bookie ``N mod E`` of the ensemble and the next W-1): the entry is forced to its
  journal, its answer to the broker not sent.
- ``BK-ACK-QUORUM`` on the owner broker: the ledger handle has the ack quorum for the entry,
  the add not completed (the managed ledger has not confirmed it; no receipt sent).

A hit is judged on evidence read independently of the rule: at the hit, the managed
ledger's last confirmed entry from the owner's internal stats (before the held entry: the
producer has no receipt); after the run, each bookie's copy of the held entry from the
bookie dump (``bookies/entries.jsonl``): for BK-JOURNALED the held bookie holds it (its
journal had it), for BK-ACK-QUORUM at least the ack quorum of its write set does.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..case import InjectArgs
from ..errors import AdminError, BackendError, InjectError, WaitTimeout
from ..history import ensemble_at, read_events, write_set
from ..systems.pulsar import namespace_of, parse_position
from ..systems.pulsar_bookies import ASKED
from ..wait import wait_until
from . import ARM_WAIT_S, POINTS, RuleInjector, _Armed, render_rule, rule_blocks

log = logging.getLogger(__name__)


#: points whose hit state is the stored ledger metadata (the owner may not answer)
_STORED_AT_HIT = frozenset({"ENSEMBLE-CHANGE", "LEDGER-RECOVERY", "BUNDLE-ACQUIRED"})


def _bookie_list(text: Any) -> list[str]:
    """``[bookie-1:3181,bookie-3:3181]`` (a HIT line's Java list) -> the bookie ids."""
    return [b for b in str(text or "").strip("[]").split(",") if b]


def managed_ledger(topic_name: str) -> str:
    """The managed ledger's name of a persistent topic: ``persistent://t/ns/x`` ->
    ``t/ns/persistent/x``."""
    domain, _, rest = topic_name.partition("://")
    tenant, namespace, local = rest.split("/", 2)
    return f"{tenant}/{namespace}/{domain}/{local}"


class PulsarInjector(RuleInjector):
    """Arms Pulsar and BookKeeper points on one run's cluster and reports hits."""

    system_name = "pulsar"

    def arm(self, args: InjectArgs, resolver: Any) -> dict[str, Any]:
        version = self.system.cluster.version
        p = args.partition
        try:  # a broker started again just before may not answer yet
            ledger, next_entry = wait_until(lambda: self.system.write_position(self.topic, p),
                                            timeout=ARM_WAIT_S, interval=1.0,
                                            what=f"the write position of {self.topic}-{p}")
        except WaitTimeout as exc:
            raise InjectError(f"inject {args.point}: partition {p} of {self.topic}: {exc}") from exc
        n = args.offset if isinstance(args.offset, int) else next_entry
        owner = self.system.owner(self.topic, p)
        ensemble = ensemble_at(ledger.ensembles, n)
        targets = write_set(ledger.ensembles, ledger.write_quorum, n)
        if args.point == "ENSEMBLE-CHANGE" and args.rule is None:
            self._await_spare(ensemble)
        key = f"chaos-{args.point}-{secrets.token_hex(4)}"
        events = f"/chaos/{key}.events"
        spec = POINTS.get(args.point)
        if args.rule is not None:
            text = Path(args.rule).read_text(encoding="utf-8")
            nodes = [x for x in self.system.brokers() + self.system.bookies()
                     if x.container.status == "running"]
        else:
            blocks = rule_blocks(self._rules() or "")
            if args.point not in blocks or spec is None:
                raise InjectError(f"point {args.point} has no rule for pulsar {version}")
            text = "\n\n".join(b for name, b in blocks.items()
                               if name == args.point or name.startswith(args.point + "."))
            if spec.role == "owner":
                nodes = [owner]
            elif spec.role == "new-owner":
                nodes = [x for x in self.system.brokers()
                         if x.name != owner.name and x.container.status == "running"]
                if not nodes:
                    raise InjectError(f"inject {args.point}: no running broker but the owner "
                                      f"{owner.name} to take {self.topic}-{p} over")
            elif not targets:
                raise InjectError(f"inject {args.point}: ledger {ledger.ledger_id} has no ensemble "
                                  f"for entry {n}")
            else:
                nodes = [self.system.cluster.node(targets[0].rsplit(":", 1)[0])]
        name = self.system.topic_name(self.topic, self.system._part(self.topic, p))
        rendered = render_rule(text, {"TOPIC": name, "ML": managed_ledger(name), "PARTITION": p,
                                      "LEDGER": ledger.ledger_id, "N": n, "KEY": key,
                                      "EVENTS": events, "HOLD_MS": self.hold_ms})
        for node in nodes:
            self._submit(node, rendered, key)
        armed = _Armed(args.point, key, n, p, nodes, events, spec if args.rule is None else None,
                       owner.name, None, time.time())
        armed.extra = {"ledger": ledger.ledger_id,
                       "quorums": [ledger.ensemble_size, ledger.write_quorum, ledger.ack_quorum],
                       "ensemble": list(ensemble), "write_set": targets}
        if args.point == "BUNDLE-ACQUIRED":  # the bundle whose lock the hit is judged on
            try:
                armed.extra["bundle"] = f"{namespace_of(name)}/{self.system.bundle(self.topic, p)}"
            except AdminError as exc:
                raise InjectError(f"inject {args.point}: the bundle of {name}: {exc}") from exc
        self._record_arm(armed, {"n": n, "key": key, "owner": owner.name, **armed.extra})
        log.info(f"inject {args.point}: armed on {', '.join(x.name for x in nodes)} for "
                 f"{self.topic}-{p} ledger {ledger.ledger_id} at entry N={n}")
        return {"point": args.point, "n": n, "ledger": ledger.ledger_id,
                "nodes": [x.name for x in nodes]}

    def _await_spare(self, ensemble: Sequence[str]) -> None:
        """An ensemble change replaces a failed bookie with a writable one outside the ensemble.
        A bookie started just before may not be registered yet: the owner would then close the
        ledger and open another, and the point could not happen. Waits up to ARM_WAIT_S."""
        try:
            wait_until(lambda: self.system.live_bookies() - set(ensemble), timeout=ARM_WAIT_S,
                       interval=1.0, what="a writable bookie outside the ledger's ensemble")
        except WaitTimeout as exc:
            raise InjectError(f"inject ENSEMBLE-CHANGE: no bookie can replace one of the ensemble "
                              f"{', '.join(ensemble)} (the point needs a writable bookie beyond the "
                              f"ensemble size): {exc}") from exc

    def state(self, when: str, armed: _Armed) -> list[dict[str, Any]]:
        """At the hit: the managed ledger's last confirmed entry, from the owner's internal
        stats (empty when it does not answer). Nothing at the kill: the owner may be the node
        killed, and a request to it would delay the case's next step."""
        if when != "hit":
            return []
        if armed.point in _STORED_AT_HIT:
            return [self._stored_at_hit(armed)]
        self._ask_copies(armed)
        try:
            stats = self.system.internal_stats(self.topic, armed.partition, metadata=False)
        except (AdminError, BackendError) as exc:
            log.info(f"inject {armed.point}: no internal stats at the {when}: {exc}")
            return []
        confirmed = parse_position(stats.get("lastConfirmedEntry"))
        cursors = {str(name): parse_position(c.get("markDeletePosition"))
                   for name, c in (stats.get("cursors") or {}).items() if isinstance(c, dict)}
        return [{"when": when, "last_confirmed": list(confirmed) if confirmed else None,
                 "mark_delete": {k: list(v) for k, v in cursors.items() if v is not None}}]

    def _stored_at_hit(self, armed: _Armed) -> dict[str, Any]:
        """ENSEMBLE-CHANGE, LEDGER-RECOVERY, BUNDLE-ACQUIRED: the held ledger's metadata as the
        metadata store holds it (the bookie shell: the owner, held, may not answer), which
        bookies run, and who holds the bundle's lock. No internal stats: a new owner in the
        middle of loading the topic answers none."""
        ledger = (armed.hit or {}).get("ledger", armed.extra.get("ledger"))
        row: dict[str, Any] = {"when": "hit", "ledger": ledger,
                               "running_bookies": sorted(x.name for x in self.system.bookies()
                                                         if x.container.status == "running")}
        bundle = armed.extra.get("bundle")
        if bundle:
            try:
                row["bundle_holder"] = self.system.bundle_holder(bundle)
            except AdminError as exc:
                row["bundle_error"] = str(exc)
        try:
            stored = self.system.stored_ledger(int(str(ledger)), self.topic)
        except (AdminError, BackendError, TypeError, ValueError) as exc:
            log.info(f"inject {armed.point}: no stored metadata of ledger {ledger} at the hit: {exc}")
            row["error"] = str(exc)
            return row
        row["state"] = stored.state
        row["ensembles"] = {str(k): list(v) for k, v in stored.ensembles.items()}
        return row

    def _ask_copies(self, armed: _Armed) -> None:
        """Asks the run's bookie dump for the held entry's copy on every bookie of its write
        set at the arm (an ensemble change after the hit may take a bookie out of it)."""
        hit = armed.hit or {}
        ledger, entry = hit.get("ledger"), hit.get("entry")
        if not isinstance(ledger, int) or not isinstance(entry, int):
            return
        members = write_set({0: armed.extra.get("ensemble") or []}, (armed.extra.get("quorums") or [0, 0])[1],
                            entry)
        out = self.run_dir / "bookies"
        out.mkdir(parents=True, exist_ok=True)
        with (out / ASKED).open("a", encoding="utf-8") as fh:
            for bookie in members:
                fh.write(json.dumps({"ledger": ledger, "entry": entry, "bookie": bookie}) + "\n")

    def replicas_at_kill(self) -> list[dict[str, Any]]:
        return []  # Pulsar's replicas are the bookies' copies (the bookie dump)

    def judge(self, armed: _Armed) -> dict[str, Any]:
        hit = armed.hit
        result: dict[str, Any] = {"point": armed.point, "n": armed.n, "leader": armed.leader,
                                  "follower": None, "hit": False,
                                  "node": hit.get("node") if hit else None,
                                  "detail": {**(hit or {}), **armed.extra} if hit else dict(armed.extra),
                                  "kill": armed.kill}
        spec = armed.spec
        if spec is None:
            result["hit"] = hit is not None
            result["observed"] = "rule fired" if hit else "rule never fired"
            return result
        result["meaning"] = spec.meaning
        result["seed"] = spec.seed
        if armed.point == "CURSOR-UNPERSISTED":
            return self._judge_cursor(armed, result)
        if armed.point == "ENSEMBLE-CHANGE":
            return self._judge_at_hit(armed, result, "at the hit the failed bookie is down, and "
                                      "the stored metadata's last ensemble still names it (the new "
                                      "ensemble is not written)", self._ensemble_change)
        if armed.point == "LEDGER-RECOVERY":
            return self._judge_at_hit(armed, result, "at the hit the stored metadata is IN_RECOVERY; "
                                      "after the run the ledger is CLOSED at or past the last add "
                                      "confirmed at the hit", self._recovery)
        if armed.point == "BUNDLE-ACQUIRED":
            return self._judge_at_hit(armed, result, "at the hit the bundle's ownership lock "
                                      "(ZooKeeper) names the held broker and the last ledger's "
                                      "stored state is OPEN (not fenced)", self._bundle(armed))
        quorums = armed.extra.get("quorums") or [0, 0, 0]
        if armed.point == "BK-JOURNALED":
            result["expected"] = ("at the hit the managed ledger had not confirmed the entry; "
                                  "after the run the held bookie holds it")
        else:
            result["expected"] = ("at the hit the managed ledger had not confirmed the entry; "
                                  f"after the run at least {quorums[2]} bookies (the ack quorum) "
                                  "of its write set hold it")
        if hit is None:
            result["observed"] = "the point was never reached"
            return result
        ledger, entry = hit.get("ledger"), hit.get("entry")
        at_hit = next((r for r in armed.at_hit or [] if r.get("when") == "hit"), None)
        confirmed = at_hit.get("last_confirmed") if at_hit else None
        unconfirmed = (confirmed is not None and isinstance(ledger, int) and isinstance(entry, int)
                       and tuple(confirmed) < (ledger, entry))
        holders = self._holders(ledger, entry)
        if holders is None:
            held_ok, held_text = False, "no bookie dump"
        else:
            ensemble = armed.extra.get("ensemble") or []
            members = write_set({0: ensemble}, quorums[1], entry) if isinstance(entry, int) else []
            in_set = sorted(b for b in holders if b in members)
            held_text = f"held by {', '.join(in_set) or 'no bookie'} of write set {', '.join(members)}"
            if armed.point == "BK-JOURNALED":
                target = next((b for b in members if b.rsplit(":", 1)[0] == hit.get("node")), None)
                held_ok = target in holders
            else:
                held_ok = len(in_set) >= quorums[2]
        shown = ":".join(map(str, confirmed)) if confirmed else "not read"
        result["observed"] = (f"entry {ledger}:{entry}; last confirmed at the hit {shown}; "
                              f"{held_text}")
        result["hit"] = bool(unconfirmed and held_ok)
        return result

    def _judge_cursor(self, armed: _Armed, result: dict[str, Any]) -> dict[str, Any]:
        """CURSOR-UNPERSISTED: at the hit the owner's stats show the subscription's mark-delete
        position at or past the held one (it moved in memory); after the first kill the
        subscription's consumers read again a message at or before it (the position the next
        owner restored from the cursor's ledger was behind: the held write never landed)."""
        result["expected"] = ("at the hit the subscription's mark-delete position (internal stats) "
                              "at or past the held position; after the kill a message at or before "
                              "it delivered again")
        hit = armed.hit
        if hit is None:
            result["observed"] = "the point was never reached"
            return result
        sub, ledger, entry = hit.get("subscription"), hit.get("ledger"), hit.get("entry")
        if not isinstance(ledger, int) or not isinstance(entry, int):
            result["observed"] = f"a HIT line without its position: {hit}"
            return result
        at_hit = next((r for r in armed.at_hit or [] if r.get("when") == "hit"), None)
        moved = (at_hit or {}).get("mark_delete", {}).get(str(sub))
        in_memory = moved is not None and tuple(moved) >= (ledger, entry)
        again = self._redelivered(sub, (ledger, entry), armed.kill["t"] if armed.kill else None)
        shown = ":".join(map(str, moved)) if moved else "not read"
        result["observed"] = (f"subscription {sub}: held write of {ledger}:{entry} (persisted "
                              f"{hit.get('persisted')}); mark-delete at the hit {shown}; "
                              + (f"{again} message(s) at or before it read again after the kill"
                                 if armed.kill else "no kill after the hit"))
        result["hit"] = bool(in_memory and again)
        return result

    def _judge_at_hit(self, armed: _Armed, result: dict[str, Any], expected: str,
                      assess: Any) -> dict[str, Any]:
        """The judgement of a point whose evidence is its HIT line and the state read at the
        hit: ``assess(hit, at_hit)`` gives (hit, observed)."""
        result["expected"] = expected
        if armed.hit is None:
            result["observed"] = "the point was never reached"
            return result
        at_hit = next((r for r in armed.at_hit or [] if r.get("when") == "hit"), {})
        result["hit"], result["observed"] = assess(armed.hit, at_hit)
        return result

    @staticmethod
    def _ensemble_change(hit: dict[str, Any], at_hit: dict[str, Any]) -> tuple[bool, str]:
        """ENSEMBLE-CHANGE: at the hit every bookie the HIT line names as failed is down (its
        container not running), and the stored metadata still has it in the ledger's last
        ensemble, which is not the new one the HIT line names (chosen, not written)."""
        failed = _bookie_list(hit.get("failed"))
        chosen = _bookie_list(hit.get("new_ensemble"))
        stored = at_hit.get("ensembles") or {}
        last = stored[max(stored, key=int)] if stored else []
        down = [b for b in failed if b.rsplit(":", 1)[0] not in at_hit.get("running_bookies", [])]
        unwritten = bool(last) and all(b in last for b in failed) and last != chosen
        observed = (f"ledger {hit.get('ledger')}: failed {', '.join(failed) or '?'} "
                    f"({'down' if failed and down == failed else 'not all down'}); "
                    f"new ensemble from entry {hit.get('entry')}: {', '.join(chosen)}; "
                    f"stored at the hit: {at_hit.get('state', 'not read')} "
                    f"{', '.join(last) or at_hit.get('error', '')}")
        return bool(failed) and down == failed and unwritten, observed

    def _recovery(self, hit: dict[str, Any], at_hit: dict[str, Any]) -> tuple[bool, str]:
        """LEDGER-RECOVERY: at the hit the stored metadata says IN_RECOVERY (the new owner
        marked it before fencing); after the run the ledger is CLOSED at or past the last add
        confirmed the HIT line gives (the recovery, finished by a later owner, cut nothing
        confirmed)."""
        ledger, lac = hit.get("ledger"), hit.get("lac")
        closed = self._closed_at(ledger)
        observed = (f"ledger {ledger} (last add confirmed {lac}) stored "
                    f"{at_hit.get('state') or at_hit.get('error') or 'not read'} at the hit; after "
                    "the run " + (f"CLOSED at entry {closed}" if closed is not None
                                  else "not closed in the bookie dump"))
        return (at_hit.get("state") == "IN_RECOVERY" and closed is not None and isinstance(lac, int)
                and closed >= lac), observed

    def _bundle(self, armed: _Armed) -> Any:
        """BUNDLE-ACQUIRED: at the hit ZooKeeper's ownership lock on the topic's bundle names
        the held broker, and the stored metadata of the partition's last ledger is still OPEN
        (no owner has begun its recovery)."""
        def assess(hit: dict[str, Any], at_hit: dict[str, Any]) -> tuple[bool, str]:
            holder = at_hit.get("bundle_holder")
            observed = (f"bundle {armed.extra.get('bundle')} held by "
                        f"{holder or at_hit.get('bundle_error') or 'no broker'} at the hit (HIT on "
                        f"{hit.get('node')}); ledger {at_hit.get('ledger')} stored "
                        f"{at_hit.get('state') or at_hit.get('error') or 'not read'}")
            return holder == hit.get("node") and at_hit.get("state") == "OPEN", observed
        return assess

    def _closed_at(self, ledger: Any) -> int | None:
        """A closed ledger's last entry from the bookie dump's ``ledgers.json`` (None: not
        closed, or not in the dump)."""
        try:
            rows = json.loads((self.run_dir / "bookies" / "ledgers.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("ledger") == ledger and row.get("state") == "CLOSED":
                last = row.get("last_confirmed")
                return last if isinstance(last, int) else None
        return None

    def _redelivered(self, subscription: Any, upto: tuple[int, int], since: float | None) -> int:
        """Run polls of ``subscription`` after ``since`` at positions at or before ``upto``."""
        if since is None:
            return 0
        n = 0
        for path in sorted((self.run_dir / "history").glob("*.jsonl")):
            try:
                for ev in read_events(path):
                    if (ev.get("type") == "poll" and ev.get("phase") != "recovery"
                            and ev.get("subscription") == subscription
                            and isinstance(ev.get("t"), (int, float)) and ev["t"] > since
                            and isinstance(ev.get("ledger"), int) and isinstance(ev.get("entry"), int)
                            and (ev["ledger"], ev["entry"]) <= upto):
                        n += 1
            except (OSError, ValueError):
                continue
        return n

    def _holders(self, ledger: Any, entry: Any) -> set[str] | None:
        """The bookies (ids) whose copy of ``ledger:entry`` the bookie dump read (rc 0), or
        None when the run has no dump."""
        path = self.run_dir / "bookies" / "entries.jsonl"
        if not path.exists():
            return None
        holders = set()
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("ledger") == ledger and row.get("entry") == entry and row.get("rc") == 0:
                    holders.add(str(row.get("bookie")))
        return holders
