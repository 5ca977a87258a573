"""Pulsar on a dockerized cluster: readiness, topics, topic ownership, ledger ensembles.

Admin calls use the brokers' REST API on their published loopback ports with
the standard library's ``urllib`` (no proxy, never another host): a redirect
to a broker's internal address (``http://broker-2:8080/...``, which Pulsar
sends when another broker owns the topic or is the leader) is rewritten to
that broker's published port. Bookie registrations are read from ZooKeeper
with kazoo.

Node names: ``broker-<n>`` (broker id ``broker-<n>:8080``), ``bookie-<n>``
(bookie id ``bookie-<n>:3181``), ``zk``. Short topic names live in
``public/default``; a full ``persistent://tenant/ns/topic`` name is accepted
wherever a topic is.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tenacity import Retrying, retry_if_exception, retry_if_exception_type, stop_after_delay, wait_exponential

from ..backend.byteman import submit_rules, unload_rules
from ..backend.cluster import Cluster, Node
from ..clusters import BOOKIE_PREFIX
from ..errors import AdminError, BackendError, FaultError, HarnessError, WaitTimeout
from ..wait import wait_until
from ._zk import wait_out_old_session, zk_address, zk_call
from .base import ConsumerClient, Leader, Mark, ProducerClient

if TYPE_CHECKING:
    from ..case import ClientSpec, TopicSpec
    from ..collect import Evidence
    from ..history import HistoryWriter

__all__ = ["PulsarSystem", "LedgerState", "CLUSTER_NAME"]

#: ``clusterName`` of the brokers (compose/images/pulsar/entrypoint.sh, CLUSTER).
CLUSTER_NAME = "chaos"
#: The broker settings the image applies (entrypoint.sh); create_topic policies override them per topic.
DEFAULT_QUORUMS = (2, 2, 2)
_BROKER_HTTP_PORT = 8080
_BOOKIE_PORT = 3181
_MAX_REDIRECTS = 5
#: how long a lookup keeps retrying a bundle that is changing hands (Pulsar's clients retry
#: such lookups within their 30-s operation timeout)
_LOOKUP_SETTLE_S = 30.0
#: the message ids of the admin API's ``latest`` and ``earliest`` (MessageId.latest/earliest)
_LATEST, _EARLIEST = 2**63 - 1, -1
#: The longest a start waits for ZooKeeper to expire a killed node's session (bookies 10 s,
#: brokers 15 s here, checked on ZooKeeper's 2 s tick).
OLD_SESSION_WAIT_S = 30.0
#: kazoo logs every refused connection while ZooKeeper starts; failures surface as AdminError.


@dataclass(frozen=True)
class LedgerState:
    """The ledger a topic (partition) currently writes to, from the owner's internal stats."""

    topic: str
    ledger_id: int
    state: str  # OPEN | CLOSED | IN_RECOVERY
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    #: first entry id -> bookie ids of the ensemble from that entry on (ensemble changes add keys)
    ensembles: dict[int, tuple[str, ...]]

    @property
    def current_ensemble(self) -> tuple[str, ...]:
        return self.ensembles[max(self.ensembles)] if self.ensembles else ()

    def as_event(self) -> dict[str, Any]:
        return {"topic": self.topic, "ledger": self.ledger_id, "state": self.state,
                "quorums": [self.ensemble_size, self.write_quorum, self.ack_quorum],
                "ensembles": {str(k): list(v) for k, v in self.ensembles.items()}}


class _HttpStatus(AdminError):
    """A REST call answered with an error status (kept for the callers that expect some)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _NoBroker(AdminError):
    """No broker answered an admin call (all down, or starting)."""


class _OwnersDisagree(_NoBroker):
    """The running brokers name different owners (one resumed from a pause still claims the
    bundle another took over; it lets go once it sees its metadata session expired)."""


def _handover(exc: BaseException) -> bool:
    """A lookup's answer while a bundle changes hands (worth retrying)."""
    if not isinstance(exc, _HttpStatus):
        return False
    return exc.status == 503 or (exc.status == 500 and "acquire ownership" in str(exc))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None  # surfaces as HTTPError; _request rewrites and follows it itself


class PulsarSystem:
    """Admin view of a Pulsar cluster (two brokers, three bookies, one ZooKeeper)."""

    name: ClassVar[str] = "pulsar"

    def __init__(self, cluster: Cluster, request_timeout: float = 10.0) -> None:
        self.cluster = cluster
        self.spec = cluster.spec
        self.request_timeout = request_timeout
        # ProxyHandler({}): an http_proxy in the environment must not see loopback admin calls.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
        self._partition_counts: dict[str, int] = {}
        self._restarted: dict[str, float] = {}  # node -> when restart() restarted it
        #: bookies removed for good (the ``remove`` fault): readiness and the dump leave them out
        self.removed: set[str] = set()

    # -- naming -------------------------------------------------------------------
    def brokers(self) -> list[Node]:
        """The brokers that are members (a spare joins at a ``join`` step)."""
        return [n for n in self.cluster.nodes() if n.kind == "pulsar-broker" and n.member]

    def bookies(self) -> list[Node]:
        return [n for n in self.cluster.nodes() if n.kind == "bookie"]

    def broker_id(self, node: Node | str) -> str:
        """The id Pulsar knows a broker by (``broker-1:8080``)."""
        return f"{node if isinstance(node, str) else node.name}:{_BROKER_HTTP_PORT}"

    def admin_url(self, node: Node | str) -> str:
        name = node if isinstance(node, str) else node.name
        spec = self.spec.node(name)
        if spec.admin_port is None:
            raise AdminError(f"{name} is not a Pulsar broker (no admin port)")
        return f"http://{spec.address}:{spec.admin_port}"

    def service_url(self, node: Node | str) -> str:
        """The binary-protocol URL of one broker where the harness reaches it (the ``external``
        listener)."""
        name = node if isinstance(node, str) else node.name
        return f"pulsar://{self.spec.node(name).endpoint}"

    @staticmethod
    def topic_name(topic: str, partition: int | None = None) -> str:
        """``persistent://public/default/<topic>[-partition-<n>]``."""
        full = topic if "://" in topic else f"persistent://public/default/{topic}"
        return f"{full}-partition-{partition}" if partition is not None else full

    def _topic_path(self, topic: str, partition: int | None = None) -> str:
        """``persistent/tenant/ns/topic`` for REST paths (the topic part URL-quoted)."""
        full = self.topic_name(topic, partition)
        domain, rest = full.split("://", 1)
        tenant, ns, local = rest.split("/", 2)
        return f"{domain}/{tenant}/{ns}/{urllib.parse.quote(local, safe='')}"

    def _part(self, topic: str, partition: int | None) -> int | None:
        """The partition suffix to use: partition 0 of a non-partitioned topic is the topic."""
        if partition is None:
            return None
        full = self.topic_name(topic)
        if full not in self._partition_counts:
            self.partitions(topic)
        if self._partition_counts[full] > 0:
            return partition
        if partition == 0:
            return None
        raise AdminError(f"{full} is not partitioned: it has no partition {partition}")

    def _node_for_url(self, url: str) -> Node:
        """The broker a lookup or redirect URL points at (internal or external form)."""
        parsed = urllib.parse.urlsplit(url if "://" in url else f"x://{url}")
        host, port = parsed.hostname, parsed.port
        for spec in self.spec.nodes_of("pulsar-broker", spares=True):
            if host == spec.name or (host == spec.address and port in (spec.host_port, spec.admin_port)):
                return self.cluster.node(spec.name)
        raise AdminError(f"{url!r} names no broker of cluster {self.spec.name}")

    def _bookie_node(self, bookie_id: str) -> Node:
        return self.cluster.node(bookie_id.rsplit(":", 1)[0])

    # -- REST ---------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None, *,
                 nodes: Iterable[Node | str] | None = None, timeout: float | None = None,
                 query: dict[str, Any] | None = None) -> Any:
        """One admin call; tries each broker in turn (default: all) until one answers.

        Follows Pulsar's 307 redirects to another broker through that broker's published
        port. Returns the decoded JSON body (the raw text when it is not JSON, None when
        empty); raises AdminError (``_HttpStatus`` for an HTTP error status).
        """
        targets = [n if isinstance(n, str) else n.name for n in nodes] if nodes is not None \
            else self._broker_order()
        if query:
            path += "?" + urllib.parse.urlencode(query)
        errors: list[str] = []
        for name in targets:
            try:
                return self._call(method, self.admin_url(name) + path, body, timeout)
            except _HttpStatus:
                raise
            except AdminError as exc:
                errors.append(f"{name}: {exc}")
        raise _NoBroker(f"{method} {path}: no broker answered ({'; '.join(errors)})")

    def _broker_order(self) -> list[str]:
        """Running brokers first: a paused one accepts connections (docker-proxy) but never answers."""
        names = [s.name for s in self.spec.nodes_of("pulsar-broker")]
        try:
            up = {n.name for n in self.brokers() if n.container.status == "running"}
        except HarnessError:
            return names
        return [n for n in names if n in up] + [n for n in names if n not in up]

    def _call(self, method: str, url: str, body: Any, timeout: float | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        for _ in range(_MAX_REDIRECTS + 1):
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Accept", "application/json")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            try:
                with self._opener.open(req, timeout=timeout or self.request_timeout) as resp:
                    raw = resp.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as exc:
                if exc.code in (301, 302, 307, 308) and exc.headers.get("Location"):
                    url = self._rewrite(exc.headers["Location"])
                    continue
                text = exc.read().decode("utf-8", "replace") if exc.fp else ""
                try:
                    reason = json.loads(text).get("reason", text)
                except (ValueError, AttributeError):
                    reason = text
                raise _HttpStatus(f"{method} {url}: HTTP {exc.code} {str(reason)[:300]}",
                                  exc.code) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise AdminError(f"{method} {url}: {reason}") from None
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                return raw
        raise AdminError(f"{method} {url}: more than {_MAX_REDIRECTS} redirects")

    def _rewrite(self, location: str) -> str:
        """A redirect target on loopback: internal broker hosts become their published ports."""
        parts = urllib.parse.urlsplit(location)
        node = self._node_for_url(location)  # refuses any host that is not one of our brokers
        base = urllib.parse.urlsplit(self.admin_url(node))
        return urllib.parse.urlunsplit((base.scheme, base.netloc, parts.path, parts.query, ""))

    # -- readiness ------------------------------------------------------------------
    def broker_healthy(self, node: Node | str) -> bool:
        """The broker's own health check (a produce/consume round trip on its heartbeat topic)."""
        return self._request("GET", "/admin/v2/brokers/health", nodes=[node], timeout=30) == "ok"

    def active_brokers(self) -> set[str]:
        """Broker ids registered in the metadata store (``broker-1:8080``, ...)."""
        return set(self._request("GET", f"/admin/v2/brokers/{CLUSTER_NAME}") or [])

    def leader_broker(self) -> Node:
        data = self._request("GET", "/admin/v2/brokers/leaderBroker")
        return self._node_for_url(data.get("brokerId") or data["serviceUrl"])

    def live_bookies(self, *, writable_only: bool = True) -> set[str]:
        """Bookie ids registered in ZooKeeper (``/ledgers/available``; read-only ones optional)."""
        def read(zk: Any) -> set[str]:
            ids = {c for c in zk.get_children("/ledgers/available") if c != "readonly"}
            if not writable_only and zk.exists("/ledgers/available/readonly"):
                ids |= set(zk.get_children("/ledgers/available/readonly"))
            return ids
        return self._zk(read, "/ledgers/available")

    def auditor(self) -> str | None:
        """The bookie whose AutoRecovery is the Auditor now (its leader election in the
        metadata store: Pulsar's driver, else BookKeeper's own); None when none runs."""
        def read(zk: Any) -> str | None:
            data = b""
            if zk.exists("/ledgers/underreplication/leader"):
                data = zk.get("/ledgers/underreplication/leader")[0] or b""
            elif zk.exists("/ledgers/underreplication/auditorelection"):
                votes = sorted(zk.get_children("/ledgers/underreplication/auditorelection"))
                votes = [v for v in votes if v != "ATTEMPT"]
                if votes:
                    data = zk.get(f"/ledgers/underreplication/auditorelection/{votes[0]}")[0] or b""
            m = re.search(r"(bookie-\d+)", data.decode("utf-8", "replace"))
            return m.group(1) if m else None
        return self._zk(read, "/ledgers/underreplication")

    def set_disk_full(self, node: Node, full: bool) -> dict[str, Any]:
        """The ``diskfull`` fault on a bookie: a Byteman rule makes BookKeeper's disk checker
        (``DiskChecker.checkDir``, called by the bookie's ``LedgerDirsMonitor`` every
        ``diskCheckInterval``, 1 s on these bookies) throw ``DiskOutOfSpaceException`` for
        every directory, as when the disk passes ``diskUsageThreshold``. The bookie marks its
        ledger directories full and turns read-only (``readOnlyModeEnabled``): it serves reads,
        refuses adds, and registers under ``/ledgers/available/readonly``; writers replace it
        in their ensembles. Unloading the rule lets the next check find room: the bookie turns
        writable again. Waits (at most 30 s) until ZooKeeper shows the new registration."""
        if node not in self.bookies():
            raise FaultError(f"diskfull applies to bookies; {node.name} is not one")
        bookie = f"{node.name}:{_BOOKIE_PORT}"
        key = f"chaos-diskfull-{node.name}"
        t0 = time.monotonic()
        try:
            if full:
                submit_rules(node, _DISK_FULL_RULE.replace("@KEY@", key), key)
            else:
                unload_rules(node, key)
        except BackendError as exc:
            raise FaultError(f"diskfull on {node.name}: {exc}") from exc

        def registered() -> bool:
            writable = bookie in self.live_bookies()
            return (not writable and bookie in self.live_bookies(writable_only=False)) if full else writable
        wait_until(registered, timeout=30, interval=0.5,
                   what=f"{bookie} registered {'read-only' if full else 'writable'} in ZooKeeper")
        return {"registered_s": round(time.monotonic() - t0, 2),
                "registration": "readonly" if full else "writable"}

    def bundle_holder(self, bundle: str) -> str | None:
        """The broker whose ownership lock on a namespace bundle (``tenant/ns/range``)
        ZooKeeper holds now (``/namespace/<tenant>/<ns>/<range>``, the owner's ephemeral node;
        its ``nativeUrl`` names the broker), or None when no broker holds it."""
        def read(zk: Any) -> str | None:
            path = f"/namespace/{bundle}"
            if not zk.exists(path):
                return None
            data, _ = zk.get(path)
            url = str(json.loads(data.decode() or "{}").get("nativeUrl") or "")
            return url.split("://", 1)[-1].rsplit(":", 1)[0] or None
        return self._zk(read, f"the owner of bundle {bundle}")

    def before_start(self, node: Node) -> dict[str, Any] | None:
        """A bookie or broker: waits (up to :data:`OLD_SESSION_WAIT_S`) until ZooKeeper has
        expired the session of the node's killed self, whose ephemeral registration lock it
        still holds (``/ledgers/available/<bookie id>``, ``/loadbalance/brokers/<broker
        id>``). A bookie started before that fails to register ("Resource at
        /ledgers/available/bookie-2:3181 is already locked", seen on 4.0.7 with a bookie
        started 0.5 s after its kill -9), closes its request processor and lingers without
        serving; and its registration, still the old session's, looks alive until that session
        expires. Returns how long it waited, or None when the registration was already gone
        (a clean stop removes it)."""
        kind = node.spec.kind
        parents: tuple[str, ...]
        if kind == "bookie":
            parents = ("/ledgers/available", "/ledgers/available/readonly")
        elif kind == "pulsar-broker":
            parents = ("/loadbalance/brokers",)
        else:
            return None
        prefix = f"{node.name}:"

        def gone() -> bool:
            def read(zk: Any) -> bool:
                return not any(c.startswith(prefix) for parent in parents if zk.exists(parent)
                               for c in zk.get_children(parent))
            return bool(self._zk(read, f"{node.name}'s registration"))

        return wait_out_old_session(gone, node.name, f"{parents[0]}/{prefix}*", OLD_SESSION_WAIT_S)

    def wait_ready(self, timeout: float = 90) -> None:
        """Every bookie registered, every broker registered and healthy, a leader broker."""
        bookies = self.spec.nodes_of("bookie")
        brokers = [n.name for n in self.brokers()]
        logs = self.cluster.node_logs
        wait_until(lambda: not self.unregistered_bookies(), timeout=timeout,
                   what=f"{self.spec.name}: all {len(bookies) - len(self.removed)} bookies registered"
                        + (f" ({', '.join(sorted(self.removed))} removed)" if self.removed else ""),
                   logs=logs)
        wait_until(lambda: self.active_brokers() >= {self.broker_id(b) for b in brokers},
                   timeout=timeout, what=f"{self.spec.name}: all {len(brokers)} brokers registered",
                   logs=logs)
        for b in brokers:
            wait_until(functools.partial(self.broker_healthy, b), timeout=timeout,
                       what=f"{self.spec.name}: {b} health check",
                       logs=functools.partial(self.cluster.node_logs, [b]))
        wait_until(self.leader_broker, timeout=timeout, what=f"{self.spec.name}: a leader broker",
                   logs=logs)

    def joined(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Waits until a spare broker whose gate just opened serves: registered with the
        others and its health check passing (a bundle moves to it only then)."""
        if node.kind != "pulsar-broker":
            raise FaultError(f"join: {node.name} is a {node.kind}; only a spare broker joins a Pulsar "
                             "cluster")
        logs = functools.partial(self.cluster.node_logs, [node.name])
        wait_until(lambda: self.broker_id(node) in self.active_brokers(), timeout=timeout,
                   what=f"{node.name} registered", logs=logs)
        wait_until(functools.partial(self.broker_healthy, node.name), timeout=timeout,
                   what=f"{node.name} health check", logs=logs)
        return {"broker_id": self.broker_id(node)}

    def lock_loops(self, window_s: float = 10, threshold: int = 20) -> dict[str, int]:
        """Nodes that keep losing and re-acquiring a metadata lock: node -> invalidations
        logged in the last ``window_s`` (only those with ``threshold`` or more).

        apache/pulsar#17759: after a ZooKeeper session expires, a bookie's registration lock
        (``/ledgers/available/<bookie>``) can flap without end, thousands of "Lock on resource
        ... was invalidated" a minute, and the brokers' BookKeeper clients see the bookie come
        and go. Such a cluster passes every readiness check but stalls writes.
        """
        loops: dict[str, int] = {}
        for node in self.bookies() + self.brokers():
            try:
                if node.container.status != "running":
                    continue
                # the tail, not ``since``: Docker reads a log from its start to honour ``since``,
                # and a looping node writes hundreds of megabytes
                text = node.container.logs(tail=3000, timestamps=True)
            except HarnessError:
                continue
            since = max(time.time() - window_s, self._restarted.get(node.name, 0.0))
            count = count_recent(text, "was invalidated", since)
            if count >= threshold:
                loops[node.name] = count
        return loops

    def lock_loops_since(self, since: float, window_s: float = 10,
                         threshold: int = 20) -> dict[str, int]:
        """Nodes whose metadata lock flapped in a loop at any time since ``since`` (Unix
        seconds): node -> the most invalidations logged within ``window_s`` (only those with
        ``threshold`` or more). A loop that a later outage interrupted counts too; :meth:`lock_loops`
        sees only one still going."""
        loops: dict[str, int] = {}
        for name, text in self._logs_since(since):
            most = densest(stamps_of(text, "was invalidated", since), window_s)
            if most >= threshold:
                loops[name] = most
        return loops

    def _logs_since(self, since: float) -> Iterator[tuple[str, str]]:
        """(node, its time-stamped log since ``since``) of each bookie and broker that can
        be read."""
        for node in self.bookies() + self.brokers():
            try:
                yield node.name, node.container.logs(since=since, timestamps=True)
            except HarnessError:
                continue

    def sessions_lost(self, since: float) -> dict[str, int]:
        """Nodes whose metadata-store client declared its ZooKeeper session lost since
        ``since`` (Unix seconds): node -> times.

        Pulsar's session watcher (``ZKSessionWatcher``) declares the session lost when its
        client has been disconnected for 5/6 of the negotiated session timeout ("Notifying
        session is lost"), or on ZooKeeper's Expired event ("ZooKeeper session expired"); on
        reconnection it revalidates every lock the node holds, the step apache/pulsar#17759
        loops in.
        """
        lost: dict[str, int] = {}
        for name, text in self._logs_since(since):
            count = sum(count_recent(text, needle, since) for needle in SESSION_LOST_LINES)
            if count:
                lost[name] = count
        return lost

    def fenced_writes(self, since: float) -> dict[str, int]:
        """Brokers whose writes a bookie refused since ``since`` (Unix seconds) because the
        ledger was fenced: node -> refusals, one per bookie that refused ("Fencing exception on
        write: L<ledger> E<entry> on <bookie>", BookKeeper's ``PendingAddOp``). A fence is set
        by the recovery of a ledger's next owner, so a refusal is an old owner's write stopped.
        """
        refused: dict[str, int] = {}
        for name, text in self._logs_since(since):
            count = count_recent(text, FENCED_WRITE_LINE, since)
            if count:
                refused[name] = count
        return refused

    def stale_after_session_loss(self, lost: dict[str, int]) -> list[str]:
        """The brokers among ``lost``: a broker whose metadata session expired registers
        with the load manager again only with its next load report (up to a minute), and
        the next run's unload to it can fail until then."""
        brokers = {n.name for n in self.brokers()}
        return sorted(name for name in lost if name in brokers)

    def unregistered_brokers(self) -> list[str]:
        """Running brokers missing from the load manager's registry (``/loadbalance/brokers``):
        after its metadata session expired, a broker registers again only with its next load
        report (up to a minute), and until then no bundle can be assigned to it."""
        try:
            active = self.active_brokers()
        except HarnessError:
            return []  # no broker answers: the readiness wait says so
        return [n.name for n in self.brokers()
                if n.container.status == "running" and self.broker_id(n) not in active]

    def reuse_problem(self) -> str | None:
        """What makes this running cluster unfit for another case (None: fit): a metadata
        lock flapping in a loop (:meth:`lock_loops`), or a broker missing from the load
        manager's registry (:meth:`unregistered_brokers`)."""
        loops = self.lock_loops()
        missing = self.unregistered_brokers()
        problems = []
        if loops:
            problems.append("lock invalidated in a loop (apache/pulsar#17759): "
                            + ", ".join(f"{n} {c} times in 10 s" for n, c in sorted(loops.items())))
        if missing:
            problems.append(f"not registered with the load manager (a metadata session that "
                            f"expired): {', '.join(missing)}")
        return "; ".join(problems) or None

    def reuse_remedy(self, problem: str) -> str:
        """Restarts the nodes whose lock flaps and the brokers missing from the registry (a
        fresh ZooKeeper session); returns what it did."""
        return self.restart(sorted(set(self.lock_loops()) | set(self.unregistered_brokers())))

    def restart(self, names: list[str]) -> str:
        """Stops (SIGTERM, 10 s) and starts these nodes: a fresh JVM and ZooKeeper session;
        returns what it did."""
        for name in names:
            node = self.cluster.node(name)
            node.container.stop(timeout=10)
            node.container.start()
            self._restarted[name] = time.time()  # its earlier lines no longer count
        return f"restarted {', '.join(names) or 'nothing (the loop had stopped)'}"

    def unregistered_bookies(self) -> list[str]:
        """Bookies not registered as writable in ``/ledgers/available`` (those removed for
        good apart)."""
        live = self.live_bookies()
        return [n.name for n in self.spec.nodes_of("bookie")
                if f"{n.name}:{_BOOKIE_PORT}" not in live and n.name not in self.removed]

    def forget_node(self, node: Node) -> dict[str, Any]:
        """A bookie replaced by a new one with an empty disk at the same address: its cookie
        (``/ledgers/cookies/<bookie id>``) is removed, as an operator does after
        decommissioning it, or the new bookie refuses to start (its directories have no
        cookie and ZooKeeper has the old one)."""
        if node.kind != "bookie":
            raise FaultError(f"replace: {node.name} is a {node.kind}; only a bookie is replaced "
                             "with an empty disk at its address")
        path = f"/ledgers/cookies/{node.name}:{_BOOKIE_PORT}"
        self.removed.discard(node.name)  # a new bookie at a decommissioned one's address

        def delete(zk: Any) -> bool:
            if zk.exists(path):
                zk.delete(path)
                return True
            return False

        return {"cookie_removed": path if self._zk(delete, path) else None}

    def drain(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Decommission, first half: a bookie's ledgers are not moved while it runs
        (BookKeeper re-replicates them once it is down: :meth:`retire`). Only a bookie is
        decommissioned; a broker's bundles move when it stops (``stop``)."""
        if node.kind != "bookie":
            raise FaultError(f"decommission: {node.name} is a {node.kind}; on Pulsar only a bookie is "
                             "decommissioned (a broker's bundles move when it stops: use stop)")
        return {}

    def retire(self, node: Node, timeout: float = 300) -> dict[str, Any]:
        """Decommission, second half, the bookie down: BookKeeper's own ``decommissionbookie``
        (BookieShell) in a running bookie triggers an audit, waits until every ledger that
        had a fragment on the bookie is re-replicated by AutoRecovery (a cluster without it,
        ``bookie.autoRecoveryDaemonEnabled``, waits until ``timeout``), then removes its
        cookie, so that a new bookie may start at its address (``replace``). Readiness
        leaves it out from then on."""
        bookie_id = f"{node.name}:{_BOOKIE_PORT}"
        runners = [n for n in self.bookies() if n.name != node.name and n.container.status == "running"]
        if not runners:
            raise AdminError(f"decommission {node.name}: no other bookie is running to run the shell")
        cmd = ["timeout", str(int(timeout)), "java", "-Xmx128m", *_BOOKIE_SHELL, "decommissionbookie",
               "-bookieid", bookie_id]
        t0 = time.monotonic()
        code, out = runners[0].container.exec(cmd)
        seconds = round(time.monotonic() - t0, 3)
        if code != 0:
            why = (f"not done in {timeout:.0f} s (is AutoRecovery running? bookie.autoRecoveryDaemonEnabled)"
                   if code == 124 else f"exit {code}")
            raise AdminError(f"decommission {node.name}: BookKeeper's decommissionbookie on "
                             f"{runners[0].name}: {why}: " + " | ".join(out.strip().splitlines()[-3:])[:600])
        self.removed.add(node.name)
        return {"decommissioned": bookie_id, "rereplicated_s": seconds}

    def removable(self, node: Node) -> bool:
        """Bookies only: BookKeeper re-replicates a lost bookie's ledgers (AutoRecovery)."""
        return node.kind == "bookie"

    def ready_remedy(self) -> str | None:
        """For a recovery that waits too long for readiness: restarts every bookie that is
        still not registered, and says which and why (the last line it logged about its
        ZooKeeper session or its shutdown). None when every bookie is registered.

        Seen in CI on 4.0.7 (zk-pause-session-expiry): after ZooKeeper came back from a
        pause longer than the sessions, two bookies re-acquired their registration locks,
        while the third failed its re-registration with SessionExpiredException, closed its
        ZooKeeper client and never registered again, though its JVM kept running. An
        operator restarts such a bookie; the harness does the same and says so.
        """
        names = self.unregistered_bookies()
        if not names:
            return None
        why = []
        for name in names:
            try:
                tail = self.cluster.node(name).container.logs(tail=400)
            except HarnessError:
                tail = ""
            last = next((ln.strip() for ln in reversed(tail.splitlines())
                         if _BOOKIE_DOWN.search(ln)), None)
            why.append(f"{name} (last said: {last[:200]})" if last else name)
        self.restart(names)
        return ("restarted the bookies that had not re-registered: " + ", ".join(why))

    # -- topics -------------------------------------------------------------------------
    def partitions(self, topic: str) -> int:
        """Partition count (0 for a non-partitioned or absent topic)."""
        data = self._request("GET", f"/admin/v2/{self._topic_path(topic)}/partitions")
        count = int(data.get("partitions", 0)) if isinstance(data, dict) else 0
        self._partition_counts[self.topic_name(topic)] = count
        return count

    def deduplicating_namespace(self, namespace: str, timeout: float = 60) -> None:
        """Creates ``namespace`` (``tenant/name``) if it does not exist and turns message
        deduplication on for its topics as a namespace-level policy; idempotent. (A
        topic-level policy would do it for one topic, but on Pulsar 4.0.7 any topic-level
        policy makes a new owner replay the deduplication cursor twice at once:
        apache/pulsar#25954, docs/pulsar.md.)"""
        try:
            self._request("PUT", f"/admin/v2/namespaces/{namespace}", timeout=30)
        except _HttpStatus as exc:
            if exc.status != 409:  # 409: already exists
                raise AdminError(f"creating namespace {namespace} failed: {exc}") from exc
        policy = f"/admin/v2/namespaces/{namespace}/deduplication"
        self._request("POST", policy, True, timeout=30)
        wait_until(lambda: self._request("GET", policy) is True, timeout=timeout,
                   what=f"namespace {namespace}: deduplication policy applied")

    def broker_defaults(self) -> dict[str, str]:
        """The brokers' effective configuration (``/admin/v2/brokers/configuration/runtime``)."""
        data = self._request("GET", "/admin/v2/brokers/configuration/runtime")
        return {str(k): str(v) for k, v in (data or {}).items()}

    def create_topic(self, name: str, partitions: int = 0, *, ensemble: int | None = None,
                     write_quorum: int | None = None, ack_quorum: int | None = None,
                     deduplication: bool | str | None = None, timeout: float = 60) -> None:
        """Creates ``name`` (non-partitioned when ``partitions`` is 0); idempotent.

        Quorums left None keep the broker defaults (2/2/2). Quorums that differ from the
        brokers' set a topic-level persistence policy, then the topic is reloaded until its
        current ledger uses them (checked in the ledger metadata). ``deduplication``: None
        keeps ``brokerDeduplicationEnabled``; a value that differs from it sets the
        topic-level policy; ``"namespace"``: the topic's namespace is created if need be and
        turns deduplication on for its topics (a namespace-level policy, set before the topic
        is created), and the topic has no policy of its own. Returns once every partition is
        owned with an open ledger.
        """
        path = f"/admin/v2/{self._topic_path(name)}"
        if deduplication == "namespace":
            self.deduplicating_namespace(namespace_of(self.topic_name(name)), timeout=timeout)
            deduplication = None
        try:
            if partitions > 0:
                self._request("PUT", f"{path}/partitions", partitions, timeout=30)
            else:
                self._request("PUT", path, timeout=30)
        except _HttpStatus as exc:
            if exc.status != 409:  # 409: already exists
                raise AdminError(f"creating topic {name} failed: {exc}") from exc
        self._partition_counts[self.topic_name(name)] = partitions
        parts: list[int | None] = list(range(partitions)) if partitions > 0 else [None]
        for p in parts:  # loads every partition on its owner (a first ledger is opened)
            wait_until(functools.partial(self.current_ledger, name, p), timeout=timeout,
                       what=f"topic {self.topic_name(name, p)}: owned with an open ledger",
                       logs=self.cluster.node_logs)

        wanted_policies = deduplication is not None or \
            (ensemble, write_quorum, ack_quorum) != (None, None, None)
        defaults = self.broker_defaults() if wanted_policies else {}
        if deduplication is not None and \
                str(bool(deduplication)).lower() != defaults.get("brokerDeduplicationEnabled", "false"):
            self._request("POST", f"{path}/deduplicationEnabled", bool(deduplication))
            wait_until(lambda: self._request("GET", f"{path}/deduplicationEnabled") == bool(deduplication),
                       timeout=timeout, what=f"topic {name}: deduplication policy applied")

        if (ensemble, write_quorum, ack_quorum) == (None, None, None):
            return
        base = tuple(int(defaults.get(k, d)) for k, d in zip(
            ("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
             "managedLedgerDefaultAckQuorum"), DEFAULT_QUORUMS, strict=False))
        e, w, a = (v if v is not None else d
                   for v, d in zip((ensemble, write_quorum, ack_quorum), base, strict=False))
        if not e >= w >= a >= 1:
            raise AdminError(f"topic {name}: need ensemble >= write quorum >= ack quorum >= 1, "
                             f"got {e}/{w}/{a}")
        if (e, w, a) == base:
            return
        policy = {"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": w, "bookkeeperAckQuorum": a,
                  "managedLedgerMaxMarkDeleteRate": 0.0}
        self._request("POST", f"{path}/persistence", policy)

        def applied() -> bool:
            got = self._request("GET", f"{path}/persistence") or {}
            return (got.get("bookkeeperEnsemble"), got.get("bookkeeperWriteQuorum"),
                    got.get("bookkeeperAckQuorum")) == (e, w, a)

        wait_until(applied, timeout=timeout, what=f"topic {name}: persistence policy {e}/{w}/{a} applied")

        def on_new_ledger(p: int | None) -> bool:
            led = self.current_ledger(name, p)
            if (led.ensemble_size, led.write_quorum, led.ack_quorum) == (e, w, a):
                return True
            self._request("PUT", f"/admin/v2/{self._topic_path(name, p)}/unload", timeout=30)
            return False

        for p in parts:
            wait_until(functools.partial(on_new_ledger, p), timeout=timeout, interval=1.0,
                       what=f"topic {self.topic_name(name, p)}: a ledger with quorums {e}/{w}/{a}",
                       logs=self.cluster.node_logs)

    def delete_topics(self, names: list[str]) -> None:
        """Force-deletes each topic (all partitions); absent ones are skipped."""
        for name in names:
            path = f"/admin/v2/{self._topic_path(name)}"
            try:
                if self.partitions(name) > 0:
                    self._request("DELETE", f"{path}/partitions", query={"force": "true"}, timeout=60)
                else:
                    self._request("DELETE", path, query={"force": "true"}, timeout=60)
            except _HttpStatus as exc:
                if exc.status != 404:
                    raise AdminError(f"deleting topic {name} failed: {exc}") from exc
            self._partition_counts.pop(self.topic_name(name), None)

    def topics(self, namespace: str = "public/default") -> list[str]:
        """Full names of the namespace's persistent topics (partitioned ones once, no system topics)."""
        plain = self._request("GET", f"/admin/v2/persistent/{namespace}") or []
        parted = self._request("GET", f"/admin/v2/persistent/{namespace}/partitioned") or []
        names = set(parted) | {t for t in plain if "-partition-" not in t}
        return sorted(t for t in names if "/__" not in t)

    # -- ownership ---------------------------------------------------------------------------
    def lookup(self, topic: str, partition: int | None = None, *,
               settle: float = _LOOKUP_SETTLE_S, via: str | None = None) -> dict[str, Any]:
        """Pulsar's topic lookup (what a client does first; assigns an unowned bundle).

        While a bundle changes hands, the broker asked to take it can answer HTTP 500 "Failed
        to acquire ownership" (the old owner still holds its lock) or 503 (the bundle is being
        unloaded). Such an answer is retried for ``settle`` seconds, as Pulsar's own clients
        retry a lookup; any other error, or one that lasts longer, is raised. ``via`` asks
        that broker alone (default: the first running one that answers).
        """
        partition = self._part(topic, partition)
        path = f"/lookup/v2/topic/{self._topic_path(topic, partition)}"
        retrying = Retrying(stop=stop_after_delay(settle),
                            wait=wait_exponential(multiplier=0.25, max=2.0),
                            retry=retry_if_exception(_handover), reraise=True)
        data = retrying(self._request, "GET", path, timeout=30, nodes=None if via is None else [via])
        if not isinstance(data, dict) or "brokerUrl" not in data:
            raise AdminError(f"lookup of {self.topic_name(topic, partition)} returned {data!r}")
        return data

    def owner(self, topic: str, partition: int | None = None, *,
              settle: float = _LOOKUP_SETTLE_S) -> Node:
        """The broker serving ``topic`` (a partition of it), as the lookup answers."""
        return self._node_for_url(self.lookup(topic, partition, settle=settle)["brokerUrl"])

    def agreed_owner(self, topic: str, partition: int | None = None) -> Node:
        """The owner as every running broker that answers names it.

        A broker resumed after a pause longer than its metadata session still answers lookups
        as the owner for a moment, while another broker serves the topic; a fault aimed at
        "the owner" then would hit the wrong node. Raises ``_OwnersDisagree`` (a caller
        retries) while the answers differ, ``_NoBroker`` when none answers.
        """
        full = self.topic_name(topic, self._part(topic, partition))
        running = [n.name for n in self.brokers() if n.container.status == "running"]
        named: dict[str, str] = {}
        for name in running:
            try:
                named[name] = self._node_for_url(self.lookup(topic, partition, via=name)["brokerUrl"]).name
            except _HttpStatus:
                raise
            except AdminError:
                continue  # starting, or stopped since: the others decide
        if not named:
            raise _NoBroker(f"no running broker answered a lookup of {full}")
        if len(set(named.values())) > 1:
            raise _OwnersDisagree(f"the brokers name different owners of {full}: "
                                  + ", ".join(f"{k} says {v}" for k, v in sorted(named.items())))
        return self.cluster.node(next(iter(named.values())))

    def non_owner(self, topic: str, partition: int | None = None, *, agreed: bool = False) -> Node:
        """A broker other than the owner (the first one running); ``agreed``: the owner as
        :meth:`agreed_owner` names it."""
        owner = self.agreed_owner(topic, partition) if agreed else self.owner(topic, partition)
        others = [n for n in self.brokers() if n.name != owner.name]
        running = [n for n in others if n.container.status == "running"]
        if not (running or others):
            raise AdminError(f"no broker other than {owner.name}")
        return (running or others)[0]

    def bundle(self, topic: str, partition: int | None = None) -> str:
        """The namespace bundle range holding the topic (``0x40000000_0x50000000``)."""
        partition = self._part(topic, partition)
        data = self._request("GET", f"/lookup/v2/topic/{self._topic_path(topic, partition)}/bundle")
        return str(data).strip().strip('"')

    def split_bundle(self, topic: str, partition: int, *, timeout: float = 90) -> dict[str, Any]:
        """Splits the bundle holding the partition in two and unloads both halves
        (``PUT .../{bundle}/split?unload=true``), then waits until the partition lies in a
        new bundle that a broker owns. Returns the bundles and the owners before and after."""
        tn = self.topic_name(topic, partition)
        namespace = namespace_of(tn)
        before, owner_before = self.bundle(topic, partition), self.owner(topic, partition).name
        t0 = time.monotonic()
        self._request("PUT", f"/admin/v2/namespaces/{namespace}/{before}/split", query={"unload": "true"},
                      timeout=min(60.0, timeout))

        def moved() -> tuple[str, str] | None:
            after = self.bundle(topic, partition)
            return (after, self.owner(topic, partition, settle=0).name) if after != before else None

        found = wait_until(moved, timeout=timeout, what=f"{tn}: in a new bundle after splitting {before}",
                           logs=lambda: self.cluster.node_logs([n.name for n in self.brokers()]))
        assert found is not None
        return {"partition": partition, "bundle_before": before, "bundle": found[0],
                "owner_before": owner_before, "owner": found[1], "seconds": round(time.monotonic() - t0, 3)}

    def create_subscription(self, topic: str, name: str, position: str = "latest") -> dict[str, Any]:
        """Creates the durable subscription ``name`` on every partition of ``topic`` through the
        admin API (``pulsar-admin topics create-subscription``), with no consumer, at
        ``position`` (``latest`` or ``earliest``). Returns, per partition, the cursor as the
        owner then reports it (mark-delete and read positions, the cursor's ledger)."""
        at = _LATEST if position == "latest" else _EARLIEST
        try:
            self._request("PUT", f"/admin/v2/{self._topic_path(topic)}/subscription/"
                                 f"{urllib.parse.quote(name, safe='')}",
                          {"ledgerId": at, "entryId": at}, timeout=30)
        except _HttpStatus as exc:
            raise AdminError(f"creating subscription {name} on {self.topic_name(topic)} failed: "
                             f"{exc}") from exc
        count = self.partitions(topic)
        cursors = {}
        for p in range(count) if count else [None]:
            cursor = (self.internal_stats(topic, p, metadata=False).get("cursors") or {}).get(name) or {}
            cursors[str(p or 0)] = {k: cursor.get(k)
                                    for k in ("markDeletePosition", "readPosition", "cursorLedger")}
        return cursors

    def unload(self, topic: str, partition: int | None = None, *, to: Node | str | None = None,
               timeout: float = 60, attempt_s: float = 20) -> Node:
        """Moves the topic's bundle to ``to`` (default: another broker); returns the new owner.

        Unloads the bundle (every topic in it) with ``destinationBroker``; the leader assigns
        it there on the next lookup, which this method makes, waiting until the owner changed.
        ``destinationBroker`` is a hint, and the handover races the clients' own lookups: the
        old owner can take the bundle back before it released its lock, and the destination
        then answers every lookup with "Failed to acquire ownership" (seen on 4.0.7). So an
        attempt that has not moved the bundle in ``attempt_s`` unloads it again, until
        ``timeout``.
        """
        partition = self._part(topic, partition)
        current = self.owner(topic, partition)
        dest = self.cluster.node(to if isinstance(to, str) else to.name) if to is not None \
            else self.non_owner(topic, partition)
        if dest.name == current.name:
            return current
        tn = self.topic_name(topic, partition)
        namespace = namespace_of(tn)
        bundle = self.bundle(topic, partition)
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            left = deadline - time.monotonic()
            try:
                self._request("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload",
                              query={"destinationBroker": self.broker_id(dest)},
                              timeout=max(5.0, min(60.0, left)))
            except HarnessError:
                if attempts > 1 and left <= attempt_s:
                    raise  # the last chance failed; earlier ones are retried below
            window = min(attempt_s, max(1.0, deadline - time.monotonic()))
            last_window = deadline - time.monotonic() <= attempt_s
            try:
                wait_until(lambda: self.owner(topic, partition, settle=0).name == dest.name,
                           timeout=window,
                           what=f"{tn}: owned by {dest.name} after unloading bundle {bundle} "
                                f"({attempts} unload(s))",
                           logs=(lambda: self.cluster.node_logs([current.name, dest.name]))
                           if last_window else None)
            except WaitTimeout:
                if last_window:
                    raise
                continue
            # confirm with a lookup that waits out the handover: right after one that named
            # dest, the next can still fail with "Failed to acquire ownership" (a CI run on
            # 4.0.7), and the old owner may take the bundle back
            try:
                if self.owner(topic, partition).name == dest.name:
                    return dest
            except HarnessError:
                if last_window:
                    raise
            if deadline - time.monotonic() <= 0:
                raise WaitTimeout(f"{tn}: not kept by {dest.name} after unloading bundle "
                                  f"{bundle} ({attempts} unload(s)) in {timeout:.0f}s")

    def spread(self, topic: str, partitions: int, *, attempts: int = 6) -> dict[int, str]:
        """Moves bundles until every broker owns at least ``partitions // 4`` partitions (and one).

        The load manager may put every bundle of a new topic on one broker; a case about one
        broker's failure needs partitions on both. Returns partition -> owning broker.
        """
        brokers = [b.name for b in self.brokers()]
        want = max(1, partitions // 4)
        owners: dict[int, str] = {}
        for _ in range(attempts + 1):
            owners = {p: self.owner(topic, p if partitions > 0 else None).name
                      for p in range(max(partitions, 1))}
            counts = {b: sum(1 for o in owners.values() if o == b) for b in brokers}
            poor = min(counts, key=lambda b: counts[b])
            if counts[poor] >= want or partitions < 2:
                return owners
            rich = max(counts, key=lambda b: counts[b])
            # move the bundle of one of the busier broker's partitions
            victim = next(p for p, o in sorted(owners.items()) if o == rich)
            self.unload(topic, victim, to=poor)
        return owners

    # -- ledgers -------------------------------------------------------------------------------
    def internal_stats(self, topic: str, partition: int | None = None, *,
                       metadata: bool = True) -> dict[str, Any]:
        """The managed ledger's internal stats (ledgers, cursors), with ledger metadata."""
        partition = self._part(topic, partition)
        data = self._request("GET", f"/admin/v2/{self._topic_path(topic, partition)}/internalStats",
                             query={"metadata": str(metadata).lower()}, timeout=30)
        if not isinstance(data, dict):
            raise AdminError(f"internal stats of {self.topic_name(topic, partition)}: {data!r}")
        return data

    def current_ledger(self, topic: str, partition: int | None = None) -> LedgerState:
        """The ledger the topic writes to now, with its ensembles (from its metadata)."""
        return self.write_position(topic, partition)[0]

    def write_position(self, topic: str, partition: int | None = None) -> tuple[LedgerState, int]:
        """The ledger the topic writes to now and the id its next entry gets (N): one past the
        managed ledger's last confirmed entry when that is in this ledger, else 0."""
        partition = self._part(topic, partition)
        tn = self.topic_name(topic, partition)
        stats = self.internal_stats(topic, partition)
        ledgers = stats.get("ledgers") or []
        if not ledgers or not ledgers[-1].get("metadata"):
            raise AdminError(f"{tn} has no current ledger yet")
        state = _parse_ledger(tn, int(ledgers[-1]["ledgerId"]), str(ledgers[-1]["metadata"]))
        confirmed = parse_position(stats.get("lastConfirmedEntry"))
        return state, confirmed[1] + 1 if confirmed and confirmed[0] == state.ledger_id else 0

    def stored_ledger(self, ledger_id: int, topic: str = "?") -> LedgerState:
        """Ledger ``ledger_id``'s metadata as the metadata store holds it now, read by
        BookKeeper's own shell (``BookieShell ledgermetadata``) in a running bookie's container:
        independent of any broker (an owner in the middle of a change or a recovery answers
        nothing). About 2 s (a JVM start)."""
        bookies = [n for n in self.bookies() if n.container.status == "running"]
        if not bookies:
            raise AdminError(f"ledger {ledger_id}: no running bookie to read its metadata")
        cmd = ["java", "-Xmx128m", *_BOOKIE_SHELL, "ledgermetadata", "-ledgerid", str(ledger_id)]
        try:
            code, out = bookies[0].container.exec(cmd)
        except BackendError as exc:
            raise AdminError(f"ledger {ledger_id}: the bookie shell on {bookies[0].name}: {exc}") from exc
        m = re.search(r"LedgerMetadata\{.*\}", out)
        if code != 0 or m is None:
            raise AdminError(f"ledger {ledger_id}: the bookie shell on {bookies[0].name} gave no "
                             f"metadata (exit {code}): {out.strip()[-300:]}")
        return _parse_ledger(topic, ledger_id, m.group(0))

    @property
    def autorecovery(self) -> bool:
        """Whether the bookies run AutoRecovery (``bookie.autoRecoveryDaemonEnabled``): its
        replication workers change ledgers' ensembles in the metadata store behind their
        owners, whose internal stats keep the metadata of the handles they hold."""
        setting = self.cluster.broker_config.get(f"{BOOKIE_PREFIX}autoRecoveryDaemonEnabled", "")
        return str(setting).lower() == "true"

    def stored_metadata(self, ledger_ids: Iterable[int]) -> dict[int, str]:
        """Each ledger's ``LedgerMetadata{...}`` as the metadata store holds it now, read by
        BookKeeper's shell in a running bookie, the ledgers in parallel (one JVM each, about
        2 s together). A ledger the shell gave no metadata for is left out."""
        ids = sorted(set(ledger_ids))
        bookies = [n for n in self.bookies() if n.container.status == "running"]
        if not ids or not bookies:
            return {}
        java = shlex.join(["java", "-Xmx96m", "-XX:TieredStopAtLevel=1", *_BOOKIE_SHELL, "ledgermetadata",
                           "-ledgerid"])
        script = " ".join(f"({java} {i} 2>&1 | sed 's/^/@{i}@ /') &" for i in ids) + " wait"
        try:
            _, out = bookies[0].container.exec(["sh", "-c", script])
        except BackendError as exc:
            raise AdminError(f"ledger metadata from the store: the bookie shell on {bookies[0].name}: "
                             f"{exc}") from exc
        found: dict[int, str] = {}
        for line in out.splitlines():
            m = re.match(r"@(\d+)@ .*?(LedgerMetadata\{.*\})", line)
            if m:
                found[int(m.group(1))] = m.group(2)
        return found

    def ledger_ensemble(self, topic: str, partition: int | None = None) -> list[Node]:
        """The bookies of the current ledger's latest ensemble (where new entries go)."""
        return [self._bookie_node(b) for b in self.current_ledger(topic, partition).current_ensemble]

    # -- the System protocol (harness.systems.base) ----------------------------------------------
    def create_case_topic(self, topic: str, spec: TopicSpec) -> list[Mark]:
        self.create_topic(topic, spec.partitions, ensemble=spec.ensemble,
                          write_quorum=spec.write_quorum, ack_quorum=spec.ack_quorum,
                          deduplication=spec.deduplication or None)  # False: broker default
        if not spec.spread:
            return []
        owners = self.spread(topic, spec.partitions)
        return [Mark("partitions spread over the brokers", {str(p): o for p, o in owners.items()})]

    def leader_of(self, topic: str, partition: int) -> Leader:
        owner = self.owner(topic, partition)
        name = owner.name if owner else None
        return Leader(name, name)

    def leader_ref(self, node: Node | str) -> str:
        return node if isinstance(node, str) else node.name

    def leadership(self, topic: str, partition: int) -> dict[str, Any]:
        owner = self.owner(topic, partition)
        name = owner.name if owner else None
        return {"topic": topic, "partition": partition, "leader": name, "leader_node": name}

    def converged(self, topic: str, partitions: int, replication_factor: int) -> bool:
        return all(self.owner(topic, p) for p in range(partitions))

    def resolve_role(self, role: str, topic: str, partition: int,
                     last_leader: Callable[[], str | None]) -> Node:
        if role == "zookeeper":
            return self.cluster.node("zk")
        if role not in ("owner", "non-owner", "bookie", "non-auditor-bookie"):
            raise FaultError(f"unknown pulsar role {role!r}")
        # the brokers answer: a step right after they were started again may find none yet, or
        # one resumed from a pause may still claim the topic for a moment
        retrying = Retrying(stop=stop_after_delay(_LOOKUP_SETTLE_S), wait=wait_exponential(0.25, max=2.0),
                            retry=retry_if_exception_type(_NoBroker), reraise=True)
        return retrying(self._role_node, role, topic, partition)

    def _role_node(self, role: str, topic: str, partition: int) -> Node:
        if role == "owner":
            return self.agreed_owner(topic, partition)
        if role == "non-owner":
            return self.non_owner(topic, partition, agreed=True)
        ensemble = self.ledger_ensemble(topic, partition)
        if not ensemble:
            raise FaultError(f"{role}: partition {partition} of {topic} has no open ledger yet")
        auditor = self.auditor() if role == "non-auditor-bookie" else None
        return next((b for b in ensemble if b.name != auditor), ensemble[0])

    def producer(self, topic: str, history: HistoryWriter, client: ClientSpec) -> ProducerClient:
        from ..clients.pulsar import PulsarProducerClient

        return PulsarProducerClient(self.spec.bootstrap, topic, history, client)

    def consumer(self, topic: str, history: HistoryWriter, client: ClientSpec,
                 group: str | None) -> ConsumerClient:
        from ..clients.pulsar import PulsarConsumerClient

        return PulsarConsumerClient(self.spec.bootstrap, topic, history, client, subscription=group)

    def recovery_read(self, topic: str, history: HistoryWriter, client: ClientSpec,
                      partitions: int) -> dict[str, Any]:
        from ..clients.pulsar import PulsarConsumerClient

        return PulsarConsumerClient(self.spec.bootstrap, topic, history, client
                                    ).read_all(partitions).as_dict()

    def collect_evidence(self, run_dir: Path, evidence: Evidence, topic: str,
                         partitions: int) -> None:
        """Each bookie's entries of the topic's ledgers, asked of each bookie alone
        (``bookies/``: :mod:`.pulsar_bookies`); a problem is said, not raised."""
        from .pulsar_bookies import dump_bookies

        dump_bookies(self, run_dir, topic, partitions, evidence.problems)

    def java_producer(self, run_dir: Path, topic: str, name: str, client: ClientSpec,
                      ready: threading.Event | None) -> Any:
        from ..clients.pulsar import PulsarJavaProducer

        return PulsarJavaProducer(self.cluster, run_dir, topic, name, client, ready)

    # -- ZooKeeper ----------------------------------------------------------------------------------
    def _zk(self, fn: Any, what: str) -> Any:
        return zk_call(zk_address(self.spec), what, fn)


#: the ``diskfull`` fault's rule (@KEY@: the rule set's name): every disk check finds the
#: directory full, as BookKeeper's DiskChecker does past diskUsageThreshold
_DISK_FULL_RULE = """RULE @KEY@ every disk check finds the directory full
CLASS org.apache.bookkeeper.util.DiskChecker
METHOD checkDir
AT ENTRY
IF true
DO throw new org.apache.bookkeeper.util.DiskChecker$DiskOutOfSpaceException("chaos-harness diskfull",
                                                                            $0.getDiskUsageThreshold())
ENDRULE
"""
#: what bin/bookkeeper adds for Pulsar's metadata-store drivers (compose/images/pulsar/entrypoint.sh)
_SHELL_PROPS = (
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dlog4j2.configurationFile=/opt/pulsar/config/log4j2.properties")
#: BookKeeper's shell in a bookie's container, with that bookie's configuration (the command follows)
_BOOKIE_SHELL = (*_SHELL_PROPS, "-cp", "/opt/pulsar/libs/*", "org.apache.bookkeeper.bookie.BookieShell",
                 "-conf", "/opt/pulsar/run/bookkeeper.conf")
_META_FIELD = re.compile(r"(ensembleSize|writeQuorumSize|ackQuorumSize|state|lastEntryId|digestType)="
                         r"(-?[A-Z_0-9]+)")
_ENSEMBLES = re.compile(r"ensembles=\{([^{}]*)\}")
_ENSEMBLE = re.compile(r"(\d+)=\[([^\]]*)\]")


#: what a bookie logs when its ZooKeeper session ends or it shuts down (for ready_remedy)
_BOOKIE_DOWN = re.compile(r"Session expired|SessionExpired|state:Closed|[Ss]hut(ting)? ?down|"
                          r"exited|Failed to register")


#: what Pulsar's session watcher logs when it declares a node's metadata session lost
SESSION_LOST_LINES = ("Notifying session is lost", "ZooKeeper session expired")
#: a bookie refused a broker's write: the ledger is fenced (BookKeeper's PendingAddOp)
FENCED_WRITE_LINE = "Fencing exception on write"


def stamps_of(text: str, needle: str, since: float) -> list[float]:
    """The times (Unix seconds) of the lines of a ``docker logs --timestamps`` text holding
    ``needle``, stamped at or after ``since`` (Docker's stamp:
    ``2026-11-22T08:16:53.838123456Z``); a line without a readable stamp is left out."""
    import datetime as dt

    stamps = []
    for line in text.splitlines():
        if needle not in line:
            continue
        stamp = line.split(" ", 1)[0]
        try:
            when = dt.datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(
                tzinfo=dt.timezone.utc).timestamp()
            if stamp[19:20] == ".":
                when += float("0" + stamp[19:].rstrip("Z")[:10])
        except ValueError:
            continue
        if when >= since:
            stamps.append(when)
    return stamps


def count_recent(text: str, needle: str, since: float) -> int:
    """Lines of a ``docker logs --timestamps`` text holding ``needle``, stamped at or after
    ``since`` (Unix seconds)."""
    return len(stamps_of(text, needle, since))


def densest(stamps: list[float], window_s: float) -> int:
    """The most of ``stamps`` within any ``window_s`` seconds."""
    ordered = sorted(stamps)
    most, lo = 0, 0
    for hi, t in enumerate(ordered):
        while t - ordered[lo] > window_s:
            lo += 1
        most = max(most, hi - lo + 1)
    return most


def parse_position(position: Any) -> tuple[int, int] | None:
    """``"12:345"`` (ledger:entry, as the internal stats write a position) -> (12, 345)."""
    if not isinstance(position, str) or ":" not in position:
        return None
    try:
        ledger, entry = position.split(":", 1)
        return int(ledger), int(entry)
    except ValueError:
        return None


def namespace_of(topic_name: str) -> str:
    """``persistent://tenant/ns/topic`` -> ``tenant/ns``."""
    return topic_name.split("://", 1)[1].rsplit("/", 1)[0]


def ledger_metadata(text: str) -> tuple[dict[str, str], dict[int, tuple[str, ...]]]:
    """The fields (``ensembleSize``, ``writeQuorumSize``, ``ackQuorumSize``, ``state``,
    ``lastEntryId``) and the ensembles (first entry -> bookie ids) of BookKeeper's
    ``LedgerMetadata{...}`` string, as internalStats returns it; a ValueError when the quorums
    or the ensembles are missing."""
    fields = dict(_META_FIELD.findall(text))
    block = _ENSEMBLES.search(text)
    if block is None or not {"ensembleSize", "writeQuorumSize", "ackQuorumSize"} <= fields.keys():
        raise ValueError(text[:300])
    ensembles = {int(first): tuple(b.strip() for b in members.split(",") if b.strip())
                 for first, members in _ENSEMBLE.findall(block.group(1))}
    return fields, ensembles


def _parse_ledger(topic: str, ledger_id: int, text: str) -> LedgerState:
    """Parses BookKeeper's ``LedgerMetadata{...}`` string (as internalStats returns it)."""
    try:
        fields, ensembles = ledger_metadata(text)
    except ValueError:
        raise AdminError(f"unexpected ledger metadata for {topic} ledger {ledger_id}: {text[:300]}") from None
    return LedgerState(topic, ledger_id, fields.get("state", "?"), int(fields["ensembleSize"]),
                       int(fields["writeQuorumSize"]), int(fields["ackQuorumSize"]), ensembles)
