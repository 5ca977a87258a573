"""The typed, frozen form of a case file (the YAML schema is in ``cases/SCHEMA.md``).

:func:`harness.case.load_case` builds these after validating the whole file;
the runner only ever sees values that passed validation. Mappings are
read-only (:class:`types.MappingProxyType`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.anomalies import ANOMALIES, INFORMATIONAL
from harness.clusters import SYSTEMS, ClusterDef, get_cluster
from harness.history import RESTORED_BY

__all__ = [
    "SYSTEMS", "ROLES_KAFKA", "ROLES_PULSAR", "ROLE_ANY_BROKER", "ROLE_LAST_TARGET", "ROLE_DOWN", "ROLE_HELD",
    "roles_for",
    "COMMON_ROLES", "PROFILES", "SystemProfile", "systems_with_role", "FAULTS", "FaultSpec",
    "ACTIONS", "NODE_FAULTS", "CHAOS_FAULTS", "MAX_SEED", "CONDITIONS", "ANOMALIES", "DIRECTIONS", "ACKS",
    "ISOLATION_LEVELS", "SUBSCRIPTION_TYPES", "SUBSCRIBE_POSITIONS", "VERDICTS",
    "DEFAULT_OBSERVED", "DEFAULT_CASE_TIMEOUT_S", "DEFAULT_AWAIT_TIMEOUT_S", "DEFAULT_INJECT_TIMEOUT_S",
    "Case", "TopicSpec", "ClientSpec", "Selector", "Step", "StepArgs", "ProduceArgs", "TxnArgs",
    "ConsumeArgs", "FaultArgs", "HealArgs", "AwaitArgs", "InjectArgs", "UnloadArgs", "ReassignArgs",
    "QuorumArgs", "SplitArgs", "ChaosArgs",
    "SubscribeArgs", "ReleaseArgs", "Expect", "Bound", "SCENARIO_FACTS", "NodeGroup", "GROUP_SIZES",
    "DRIVERS",
]

@dataclass(frozen=True)
class SystemProfile:
    """What a case of one system may name: its roles (beside :data:`COMMON_ROLES`) and the
    roles a ``chaos`` step aims at by default. One per system of :data:`SYSTEMS`."""

    name: str
    roles: tuple[str, ...]
    chaos_targets: tuple[str, ...]


ROLES_KAFKA = ("leader", "follower", "controller", "old-leader", "txn-coordinator", "group-coordinator")
ROLES_PULSAR = ("owner", "bookie", "non-auditor-bookie", "non-owner", "zookeeper")
#: Each system's profile, by name.
PROFILES: Mapping[str, SystemProfile] = MappingProxyType({
    "kafka": SystemProfile("kafka", ROLES_KAFKA, ("leader", "follower")),
    "pulsar": SystemProfile("pulsar", ROLES_PULSAR, ("owner", "bookie", "non-owner")),
})
#: Valid for both systems: any one broker (Kafka broker, Pulsar broker).
ROLE_ANY_BROKER = "any-broker"
#: Valid for both systems: the node the most recent fault step acted on.
ROLE_LAST_TARGET = "last-target"
#: Valid for both systems: the node that has been down longest of those a fault step
#: (kill9, stop, powerloss) took down and no step has started since.
ROLE_DOWN = "down"
#: Valid for both systems: the node where the most recent hit of an injection point holds a
#: thread (``inject`` and ``await: {injection: ...}`` before it).
ROLE_HELD = "held"

@dataclass(frozen=True)
class FaultSpec:
    """One fault a case can name: what it takes, where it exists, what undoes it, what the
    timeline records of it. The case schema, the runner and the chaos step read these."""

    name: str
    #: what its argument selects: ``node`` (one selector), ``pair`` (a node and the nodes it
    #: is cut from) or ``optional`` (a selector or nothing: every node)
    selects: str
    #: the systems that have it
    systems: frozenset[str]
    #: the fault that undoes it (a chaos step heals with it); None: it undoes others, or
    #: nothing undoes it (remove)
    healed_by: str | None
    #: what its timeline ``fault`` event's detail holds
    records: str = "nothing beyond the node and the role"
    #: whether a ``chaos`` step may draw it
    chaos: bool = False
    #: why a system not in :attr:`systems` lacks it (for its error)
    absent: str = ""
    #: every system has it on a node whose data lies on a lazy disk (``disk: lazy``)
    lazy_disk: bool = False

    def missing_on(self, system: str, disk: str = "plain") -> str | None:
        """Why a ``system`` case on ``disk`` cannot use this fault (None: it can)."""
        if system in self.systems or (self.lazy_disk and disk == "lazy"):
            return None
        return (f"{self.absent}; {system} has none" if self.absent
                else f"{self.name} applies to {' and '.join(sorted(self.systems))} cases only")

    def __post_init__(self) -> None:
        if self.chaos and self.healed_by is None:
            raise ValueError(f"a chaos fault needs a heal ({self.name})")


_EVERY_SYSTEM = frozenset(SYSTEMS)
#: The faults, by name, in the order the schema documents them.
FAULTS: Mapping[str, FaultSpec] = MappingProxyType({spec.name: spec for spec in (
    FaultSpec("kill9", "node", _EVERY_SYSTEM, RESTORED_BY["kill9"], chaos=True),
    FaultSpec("powerloss", "node", frozenset({"kafka"}), RESTORED_BY["powerloss"], chaos=True,
              records="the cuts: each segment's recovery point, bytes and records lost (on a lazy "
                      "disk: each file's size and synced size, bytes_lost, the torn write)",
              absent="powerloss cuts Kafka log segments, or any node's files on a lazy disk "
                     "(disk: lazy)", lazy_disk=True),
    FaultSpec("stop", "node", _EVERY_SYSTEM, RESTORED_BY["stop"], chaos=True),
    FaultSpec("remove", "node", frozenset({"pulsar"}), None,
              absent="remove takes a Pulsar bookie out for good"),
    FaultSpec("start", "node", _EVERY_SYSTEM, None,
              records="what the start waited for (waited_for_old_session_s)"),
    FaultSpec("pause", "node", _EVERY_SYSTEM, RESTORED_BY["pause"], chaos=True,
              records="the freeze attempts, when more than one"),
    FaultSpec("resume", "node", _EVERY_SYSTEM, None),
    FaultSpec("partition", "pair", _EVERY_SYSTEM, RESTORED_BY["partition"], chaos=True,
              records="the peers cut from and the direction"),
    FaultSpec("degrade", "pair", _EVERY_SYSTEM, RESTORED_BY["degrade"], chaos=True,
              records="the peers, the direction, the effects and the nodes whose sending was shaped"),
    FaultSpec("diskfull", "node", frozenset({"pulsar"}), RESTORED_BY["diskfull"], chaos=True,
              records="seconds until the node registered read-only (registered_s); on a lazy disk, "
                      "that writes fail with ENOSPC",
              absent="diskfull makes a bookie's disks look full, or any node's lazy disk full "
                     "(disk: lazy)", lazy_disk=True),
    FaultSpec("readonly", "node", frozenset(), RESTORED_BY["readonly"], chaos=True,
              records="that writes fail with EROFS",
              absent="readonly makes a node's lazy disk read-only (set disk: lazy)", lazy_disk=True),
    FaultSpec("corrupt", "node", frozenset(), None,
              records="the file, how (bitflip: the offset and the byte before and after; truncate: "
                      "the size and the length cut to)",
              absent="corrupt changes a file of a node's lazy disk (set disk: lazy)", lazy_disk=True),
    FaultSpec("snapshot", "node", frozenset(), None, records="the bytes copied",
              absent="snapshot copies a node's lazy disk (set disk: lazy)", lazy_disk=True),
    FaultSpec("rollback", "node", frozenset(), None, records="the bytes put back",
              absent="rollback puts back a node's lazy disk as its last snapshot (set disk: lazy)",
              lazy_disk=True),
    FaultSpec("clock", "node", _EVERY_SYSTEM, RESTORED_BY["clock"], chaos=True,
              records="the node's clock offset after the fault (offset_s); at the heal, the offset it "
                      "had and the steps a drift or a strobe made (clocks)"),
    FaultSpec("replace", "node", frozenset({"pulsar", "kafka"}), None,
              records="the bytes wiped, what the cluster forgot of the old node (a bookie's cookie), "
                      "what the start waited for",
              absent="replace puts a new Pulsar bookie or Kafka broker (ZooKeeper mode) with an empty "
                     "lazy disk at the old one's address"),
    FaultSpec("join", "node", _EVERY_SYSTEM, None,
              records="what the join waited for (the broker registered) and the seconds (joined_s)"),
    FaultSpec("decommission", "node", _EVERY_SYSTEM, None,
              records="Kafka: the partitions moved off the broker (partitions_moved, moved, moved_s) and "
                      "its unregistration (KRaft: unregistered); a bookie: the seconds its ledgers took "
                      "to be re-replicated (rereplicated_s); both: the seconds of the clean stop "
                      "(stopped_s)"),
    FaultSpec("heal", "optional", _EVERY_SYSTEM, None),
)})

#: Fault steps whose argument is one selector.
NODE_FAULTS = tuple(name for name, spec in FAULTS.items() if spec.selects == "node")
#: Every step name, in the order the schema documents them.
ACTIONS = ("produce", "consume", "sleep", "await") + tuple(FAULTS) + (
    "inject", "unload", "split", "reassign", "quorum", "subscribe", "chaos", "release")
#: Where a ``subscribe`` step starts its subscription.
SUBSCRIBE_POSITIONS = ("latest", "earliest")
#: The largest seed: a chaos schedule is replayed from it, so it must fit result.json's integers.
MAX_SEED = 2**53
#: How a ``chaos`` step picks each fault from its list.
CHAOS_ORDERS = ("random", "rotate")
#: The faults a ``chaos`` step draws from (each healed before the next: start, resume, heal).
CHAOS_FAULTS = tuple(name for name, spec in FAULTS.items() if spec.chaos)
CONDITIONS = ("leader_change", "isr_size", "time", "log", "injection", "workload",
              "no_leader", "leader_is", "controller_change", "checkpoint")
DIRECTIONS = ("both", "in", "out")
ACKS = ("all", "-1", "0", "1")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
VERDICTS = ("pass", "fail")
#: Which client library runs a produce workload (pulsar: the Java client too).
DRIVERS = ("python", "java")

DEFAULT_CASE_TIMEOUT_S = 600.0
DEFAULT_AWAIT_TIMEOUT_S = 60.0
DEFAULT_INJECT_TIMEOUT_S = 60.0


#: Roles every system's cases may use.
COMMON_ROLES = (ROLE_ANY_BROKER, ROLE_LAST_TARGET, ROLE_DOWN, ROLE_HELD)


def roles_for(system: str) -> tuple[str, ...]:
    """The role names a selector of a ``system`` case may use."""
    return PROFILES[system].roles + COMMON_ROLES


def systems_with_role(role: str) -> tuple[str, ...]:
    """The systems whose cases may use ``role`` (none: no system has it)."""
    return tuple(name for name, profile in PROFILES.items() if role in profile.roles + COMMON_ROLES)


def _no_config() -> Mapping[str, str]:
    return MappingProxyType({})


def _no_params() -> Mapping[str, Any]:
    return MappingProxyType({})


#: Observed (reported, not judged) unless a case limits them: the checker's informational ones.
DEFAULT_OBSERVED = INFORMATIONAL


def _zero_limits() -> Mapping[str, int]:
    return MappingProxyType(dict.fromkeys((a for a in ANOMALIES if a not in DEFAULT_OBSERVED), 0))


#: Pulsar: the namespace of topics with ``deduplication: namespace`` (created by the harness,
#: with deduplication on as a namespace-level policy)
DEDUP_NAMESPACE = "public/deduplicated"


@dataclass(frozen=True)
class TopicSpec:
    """The topic the case's workloads use; the last five fields are Pulsar only."""

    name: str | None = None  # None: the runner picks one
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int | None = None
    unclean_leader_election: bool = False
    config: Mapping[str, str] = field(default_factory=_no_config)
    ensemble: int | None = None
    write_quorum: int | None = None
    ack_quorum: int | None = None
    #: pulsar: True, a topic-level policy (when the brokers' default is off); "namespace", the
    #: topic in :data:`DEDUP_NAMESPACE`, whose namespace-level policy turns it on
    deduplication: bool | str = False
    spread: bool = False  # pulsar: after creation, make sure every broker owns a partition

    def qualified(self, name: str) -> str:
        """The run's topic ``name`` as the system must be given it: in its namespace when
        that is not the default one."""
        return f"persistent://{DEDUP_NAMESPACE}/{name}" if self.deduplication == "namespace" else name


@dataclass(frozen=True)
class ClientSpec:
    """Producer/consumer settings: Kafka fields first, then Pulsar ones; ``extra`` is raw config."""

    acks: str = "all"
    retries: int | None = None
    idempotence: bool = False
    transactional_id: str | None = None
    isolation_level: str = "read_uncommitted"
    linger_ms: int = 5
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    max_in_flight: int = 5
    batching: bool = True
    max_pending_messages: int | None = None
    max_pending_messages_across_partitions: int | None = None
    memory_limit_bytes: int | None = None
    send_timeout_ms: int = 30000
    subscription_type: str = "Exclusive"
    batching_max_publish_delay_us: int | None = None
    batching_max_messages: int | None = None
    batching_max_bytes: int | None = None
    block_if_queue_full: bool = True
    extra: Mapping[str, str] = field(default_factory=_no_config)


@dataclass(frozen=True)
class Selector:
    """A node chosen by role (resolved at run time, for ``partition``) or by name."""

    role: str | None = None
    node: str | None = None
    partition: int = 0

    def __post_init__(self) -> None:
        if (self.role is None) == (self.node is None):
            raise ValueError("a Selector has exactly one of role and node")

    def __str__(self) -> str:
        return self.role or self.node or ""


#: how many nodes of a kind a chaos group names: one, fewer than half, more than half, all
GROUP_SIZES = ("one", "minority", "majority", "all")


@dataclass(frozen=True)
class NodeGroup:
    """A ``chaos`` target naming several nodes of one kind at once (Jepsen's targets):
    ``size`` of :data:`GROUP_SIZES` among ``nodes`` (the cluster's nodes of ``kind``). Which
    ones is drawn in the schedule from its seed."""

    size: str
    kind: str
    nodes: tuple[str, ...]

    def count(self) -> int:
        """How many nodes the group names: a minority is at most (n - 1) // 2 (at least one),
        a majority n // 2 + 1."""
        n = len(self.nodes)
        return {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}[self.size]

    def __str__(self) -> str:
        return f"{self.size} of {self.kind}s"


@dataclass(frozen=True)
class TxnArgs:
    """``produce.transactions`` (kafka): ``size`` records per transaction; ``abort`` the share
    of transactions aborted, spread evenly (transaction i aborts when floor((i + 1) *
    abort) > floor(i * abort): 0.25 aborts every fourth, 1 every one)."""

    size: int = 10
    abort: float = 0.0
    #: the producer's transaction timeout (``transaction.timeout.ms``; None: the client's)
    timeout_s: float | None = None
    #: a client-side breakpoint: hold the producer for ``hold_s`` just before it ends its
    #: ``hold_at``-th transaction (1-based; None: never), e.g. past the transaction timeout
    hold_at: int | None = None
    hold_s: float = 0.0

    def aborts(self, index: int) -> bool:
        """Whether transaction ``index`` (0-based) is aborted."""
        return math.floor((index + 1) * self.abort + 1e-9) > math.floor(index * self.abort + 1e-9)


@dataclass(frozen=True)
class ProduceArgs:
    """``produce``: exactly one of ``count`` and ``duration_s`` is set."""

    name: str
    count: int | None = None
    duration_s: float | None = None
    rate: float | None = None  # messages/s; None: as fast as possible
    background: bool = False
    value_size: int = 100
    keys: int | None = None  # number of distinct keys; None: no keys
    partition: int | None = None  # None: the partitioner decides
    driver: str = "python"  # pulsar: "java" runs the Java client (harness/clients/java)
    #: client keys that replace the case's ``client`` section for this workload only
    settings: Mapping[str, Any] = field(default_factory=_no_params)
    #: kafka: send in transactions (None: no transactions)
    transactions: TxnArgs | None = None
    #: background only: the producer connects when its step runs and sends nothing until a
    #: ``release`` step names it (a producer connected to a broker and idle)
    held: bool = False


@dataclass(frozen=True)
class ReleaseArgs:
    """``release``: a ``held`` background producer starts sending."""

    name: str


@dataclass(frozen=True)
class CopyArgs:
    """``copy`` (kafka): a copier reads the case topic (read_committed) and writes each record
    to its output topic, ``<case topic>-<name>``, in transactions that also commit its input
    offsets (docs/transactions.md). It stops once ``count`` input records are copied in
    committed transactions, or after ``duration_s``."""

    name: str
    transactions: TxnArgs
    background: bool = False
    count: int | None = None
    duration_s: float | None = None
    value_size: int = 100
    #: after a transaction that did not commit: ``committed`` (exactly once), or a broken
    #: copier that checks the checker: ``none`` (reads on), ``beginning`` (copies all again)
    rewind: str = "committed"


@dataclass(frozen=True)
class ConsumeArgs:
    """``consume``: stops at ``count`` or ``duration_s``, whichever comes first.

    A background consume with neither runs until the case's end.
    """

    name: str
    background: bool = False
    duration_s: float | None = None
    count: int | None = None
    group: str | None = None  # Kafka group / Pulsar subscription; None: the runner picks one
    subscription_type: str | None = None  # pulsar; None: the client section's
    isolation_level: str | None = None  # kafka; None: the client section's


@dataclass(frozen=True)
class FaultArgs:
    """kill9, powerloss, stop, start, pause, resume, partition, degrade, corrupt; ``peer``
    None: isolate from (or degrade towards) all other nodes. ``effects`` (degrade):
    ``loss_pct``, ``delay_ms``, ``jitter_ms``, ``duplicate_pct``, ``reorder_pct``,
    ``rate_bps``, each only when given."""

    target: Selector
    peer: Selector | None = None
    direction: str = "both"
    effects: Mapping[str, float] = field(default_factory=_no_params)
    #: a lazy disk's fault: ``torn`` (powerloss); ``file`` (a kind), ``how`` and ``offset``
    #: (corrupt)
    disk: Mapping[str, Any] = field(default_factory=_no_params)
    #: a clock fault: one of ``jump_s``, ``drift`` (a fraction) or ``strobe_s`` (with
    #: ``period_s``); ``for_s`` bounds a drift or a strobe
    clock: Mapping[str, float] = field(default_factory=_no_params)


@dataclass(frozen=True)
class HealArgs:
    """``heal``: ``target`` None heals everything."""

    target: Selector | None = None


@dataclass(frozen=True)
class AwaitArgs:
    """``await`` and ``sleep`` (condition ``time``); ``params`` per condition, see SCHEMA.md."""

    condition: str
    timeout_s: float
    params: Mapping[str, Any] = field(default_factory=_no_params)


@dataclass(frozen=True)
class InjectArgs:
    """``inject``: arm ``point`` (built in, or the user's Byteman ``rule`` file)."""

    point: str
    partition: int = 0
    offset: int | str = "next"
    rule: Path | None = None
    timeout_s: float = DEFAULT_INJECT_TIMEOUT_S


@dataclass(frozen=True)
class UnloadArgs:
    """``unload`` (pulsar): moves the bundle of ``partition`` to ``to`` (None: another broker)."""

    partition: int = 0
    to: Selector | None = None


@dataclass(frozen=True)
class SplitArgs:
    """``split`` (pulsar): splits the namespace bundle holding ``partition`` in two and unloads
    both halves (the admin API's ``split-bundle --unload``), under whatever load runs; waits
    until the partition lies in a new bundle with an owner."""

    partition: int = 0
    timeout_s: float = 90.0


@dataclass(frozen=True)
class ReassignArgs:
    """``reassign`` (kafka): moves the replicas of ``partition`` to the brokers ``to`` (in
    order: the first is the preferred leader) under whatever load runs, and waits until the
    reassignment is complete."""

    to: tuple[Selector, ...]
    partition: int = 0
    timeout_s: float = 120.0


@dataclass(frozen=True)
class QuorumArgs:
    """``quorum`` (kafka, a dynamic KRaft quorum): makes the controller ``add`` a voter (it
    must follow the metadata log already, as an observer) or removes ``remove`` from the
    voters (it stays an observer), with Kafka's own ``kafka-metadata-quorum``, and waits
    until the voters are the new set."""

    add: Selector | None = None
    remove: Selector | None = None
    timeout_s: float = 120.0


@dataclass(frozen=True)
class SubscribeArgs:
    """``subscribe`` (pulsar): creates the durable subscription ``group`` on every partition
    of the case topic through the admin API, with no consumer, at ``position`` (``latest``:
    after the last message written, ``earliest``: before the first)."""

    group: str
    position: str = "latest"


@dataclass(frozen=True)
class ChaosArgs:
    """``chaos``: for ``duration_s``, faults drawn from ``faults`` on nodes drawn from
    ``targets``, one at a time: a quiet gap drawn from ``gap_s``, the fault, held for a time
    drawn from ``hold_s``, then healed. ``seed`` None: the run's seed (``--seed``, or drawn)."""

    duration_s: float
    faults: tuple[str, ...]
    targets: tuple[Selector | NodeGroup, ...]
    gap_s: tuple[float, float] = (5.0, 15.0)
    hold_s: tuple[float, float] = (3.0, 10.0)
    seed: int | None = None
    #: ``random``: each fault drawn from ``faults``; ``rotate``: ``faults`` in turn, so each
    #: kind comes back at a steady pace (Jepsen's rotating nemesis packages)
    order: str = "random"


StepArgs = (ProduceArgs | ConsumeArgs | CopyArgs | FaultArgs | HealArgs | AwaitArgs | InjectArgs | UnloadArgs
            | ReassignArgs | QuorumArgs | SplitArgs | SubscribeArgs | ChaosArgs | ReleaseArgs)


@dataclass(frozen=True)
class Step:
    """One entry of ``steps``: ``index`` is 0-based, ``line`` is the action's line in the file."""

    index: int
    line: int
    action: str
    args: StepArgs

    @property
    def label(self) -> str:
        """``steps[3].kill9``: how errors and reports name this step."""
        return f"steps[{self.index}].{self.action}"


#: What a case can state must have happened (``expect.scenario``), each a count of what the
#: run recorded (measured by :mod:`harness.run.scenario`), and what it counts.
SCENARIO_FACTS: Mapping[str, str] = MappingProxyType({
    "stalls": "stall events in the history (a transactional hold; a Pulsar send that blocked)",
    "held-transactions-aborted": "transactions a hold held before their commit whose late commit "
                                 "was refused (fail or info) and none of whose records the "
                                 "read_committed recovery read holds: the broker aborted them",
    "truncated": "records a follower's truncation cut, the most on one node (an injection's HIT "
                 "line: leo_before - leo)",
    "powerloss-cut": "records the power losses cut (the cuts of the timeline's powerloss faults)",
    "powerloss-bytes": "bytes the power losses of lazy disks dropped (unsynced data of every file: "
                       "the timeline's powerloss faults, bytes_lost)",
    "powerlosses": "power losses applied (the timeline's powerloss faults)",
    "chaos-faults": "faults the chaos steps applied (not skipped)",
    "clock-faults": "clock faults applied: jumps, drifts and strobes of nodes' wall clocks (the "
                    "timeline's clock faults)",
    "delayed-packets": "packets the degrade steps' queues held back (delay, jitter) before sending them "
                       "(the timeline's heal entries, delayed)",
    "wiped-bytes": "bytes the replace steps wiped: the old nodes' data, gone before the new nodes "
                   "started empty (the timeline's replace faults, bytes_wiped)",
    "lock-loops": "nodes whose metadata lock flapped in a loop during the run (apache/pulsar#17759: "
                  "the result's recovery.lock_loops)",
    "sessions-lost": "nodes whose metadata session was declared lost during the run (Pulsar's "
                     "session watcher; the result's recovery.sessions_lost)",
    "fenced-writes": "writes the bookies refused because the ledger was fenced (the brokers' logs; "
                     "the result's recovery.fenced_writes): an old owner stopped by its successor",
    "ledger-directories": "ledger directories of the bookies holding the case topic's entries (ledger "
                          "L in directory L mod the number of bookie.ledgerDirectories)",
    "ensemble-changes": "ensemble changes in the case topic's ledgers (each ledger's ensembles after "
                        "its first, from the bookie dump's ledgers.json)",
    "fenced-rereplications": "fragments of the case topic's ledgers that BookKeeper's AutoRecovery "
                             "began to re-replicate after a bookie fenced the ledger (the bookies' logs)",
    "polled": "distinct ids the run's consumers polled (run-phase polls of consume steps, the "
              "recovery read apart)",
})


@dataclass(frozen=True)
class Bound:
    """A count's bounds, each inclusive (None: unbounded on that side; one is set)."""

    at_least: int | None = None
    at_most: int | None = None

    def __post_init__(self) -> None:
        if self.at_least is None and self.at_most is None:
            raise ValueError("a Bound has at_least, at_most or both")

    def holds(self, count: int) -> bool:
        """Whether ``count`` is within the bounds."""
        return ((self.at_least is None or count >= self.at_least)
                and (self.at_most is None or count <= self.at_most))

    def __str__(self) -> str:
        """``>= 1``, ``<= 0``, ``== 1`` or ``1 to 5``: how a verdict row shows it."""
        if self.at_most is None:
            return f">= {self.at_least}"
        if self.at_least is None:
            return f"<= {self.at_most}"
        if self.at_least == self.at_most:
            return f"== {self.at_least}"
        return f"{self.at_least} to {self.at_most}"


def _no_scenario() -> Mapping[str, Bound]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Expect:
    """What the verdict judges.

    ``anomalies`` holds a limit for every judged anomaly (every name of
    :data:`ANOMALIES` not in ``observe``; 0 unless the case says otherwise).
    ``verdict`` ``fail`` marks a case that reproduces a known bug.
    """

    anomalies: Mapping[str, int] = field(default_factory=_zero_limits)
    observe: frozenset[str] = DEFAULT_OBSERVED
    min_acked: int = 1
    injection_hit: bool | None = None  # None: not judged
    verdict: str = "pass"
    #: with ``verdict: fail``: the anomalies that must exceed their limits, every other
    #: expectation holding (the named bug, and no other failure, reproduced)
    reproduces: frozenset[str] = frozenset()
    #: bounds on what a fault costs (harness.check.latency; None: not judged): the longest
    #: unavailability of any partition after any fault, in seconds; the run's p99 send
    #: latency and p99 end-to-end latency, in ms
    max_unavailable_s: float | None = None
    p99_latency_ms: float | None = None
    p99_e2e_latency_ms: float | None = None
    #: at least this many ids of aborted transactions read by read_uncommitted clients (the
    #: checker's ``aborted-uncommitted-read`` count; None: not judged)
    min_aborted_seen: int | None = None
    #: what must have happened (:data:`SCENARIO_FACTS` -> its bounds): a run whose scenario
    #: did not happen is not as expected, whatever else it shows
    scenario: Mapping[str, Bound] = field(default_factory=_no_scenario)
    #: at most this many repairs while the run waited on its cluster (a forced controller
    #: election, a restart of bookies that did not re-register; None: not judged): a repair
    #: can turn a liveness bug into a pass, and ``0`` forbids it
    repairs: int | None = None

    def __post_init__(self) -> None:
        if self.verdict == "fail" and not self.reproduces:
            raise ValueError("an Expect of verdict fail names the anomalies it reproduces")


@dataclass(frozen=True)
class Case:
    """A validated case file."""

    name: str
    path: Path | None
    description: str
    system: str
    cluster: str
    version: str
    broker_config: Mapping[str, str]
    topic: TopicSpec
    client: ClientSpec
    steps: tuple[Step, ...]
    expect: Expect
    timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    #: what each node's data directory lies on (:data:`harness.clusters.DISKS`): ``lazy``
    #: makes a power loss drop every byte a process did not fsync, in every file
    disk: str = "plain"
    #: the ``versions:`` entry this case was loaded for (None: the file has no such list)
    variant: str | None = None
    #: every entry's label, in file order
    variants: tuple[str, ...] = ()
    #: the entry's ``source``: the public source its expectation states
    source: str = ""
    #: the labels of the entries marked ``ci: false`` (run by the full matrix, not by CI)
    outside_ci: frozenset[str] = frozenset()
    #: ``ci: false`` at the top: every item of the case is left to the full matrix
    in_ci: bool = True

    @property
    def clock(self) -> str:
        """``fake`` when a step moves a node's wall clock (the cluster then gives each node a
        clock of its own: :mod:`harness.backend.clock`), else ``real``: a case without clock
        faults does not pay for them."""
        return "fake" if any(s.action == "clock" or isinstance(s.args, ChaosArgs) and "clock" in s.args.faults
                             for s in self.steps) else "real"

    @property
    def cluster_def(self) -> ClusterDef:
        """The definition of :attr:`cluster` in :mod:`harness.clusters`."""
        return get_cluster(self.cluster)
