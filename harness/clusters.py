"""The cluster definitions the harness knows: names, nodes, versions, ports.

One table, read by the case validator (node names, versions) and by the
backend (compose file, images, published ports). The compose files in
``compose/`` must agree with it; ``tests/unit/test_clusters.py`` checks that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import CaseError

__all__ = ["ClusterDef", "NodeDef", "NodesFile", "RemoteNode", "CLUSTERS", "DISKS", "DISK_FILE_KINDS",
           "CORRUPTIONS", "get_cluster", "ROOT", "COMPOSE_DIR", "REPORTS_DIR",
           "CASES_DIR", "SYSTEMS", "KAFKA_VERSIONS", "PULSAR_VERSIONS", "BOOKIE_PREFIX", "versions_of",
           "regression_dirs"]

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "compose"
#: where run directories go by default, and the shipped case files
REPORTS_DIR = ROOT / "reports"
CASES_DIR = ROOT / "cases"

#: The systems the harness runs (a case's ``system``, a cluster's ``system``).
SYSTEMS = ("kafka", "pulsar")
#: Versions with a resolvable Maven build; first is the default.
KAFKA_VERSIONS = ("3.9.2", "4.1.2")
PULSAR_VERSIONS = ("4.0.7", "4.2.4")
#: a case's ``broker_config`` key with this prefix sets a bookie's setting (pulsar)
BOOKIE_PREFIX = "bookie."
#: what a node's data directory (``/data``) lies on: the container's own layer (``plain``),
#: or a lazy disk that forgets what was not fsynced on a power loss (``lazy``:
#: :mod:`harness.backend.lazyfs`)
DISKS = ("plain", "lazy")
#: the kinds of file a ``corrupt`` step aims at on a lazy disk (their patterns:
#: :data:`harness.backend.lazyfs.FILE_KINDS`)
DISK_FILE_KINDS = ("log", "index", "checkpoint", "journal", "entrylog", "metadata")
#: what a ``corrupt`` step does to the file
CORRUPTIONS = ("bitflip", "truncate")


@dataclass(frozen=True)
class NodeDef:
    """One container of a cluster.

    ``kind``: zookeeper, broker (Kafka broker or combined KRaft node), controller
    (KRaft controller-only node), bookie, pulsar-broker. ``host_port`` (and ``admin_port``):
    the port the harness reaches it on at ``address`` (loopback: a container's published
    port). A ``spare`` node is no member of the cluster until a ``join`` step adds it.
    """

    name: str
    kind: str
    node_id: int
    host_port: int | None = None
    admin_port: int | None = None
    address: str = "127.0.0.1"
    #: held in reserve: its container runs, its process starts at a ``join`` step
    #: (:mod:`harness.backend.spare`)
    spare: bool = False

    @property
    def endpoint(self) -> str:
        """``address:host_port``, where the harness reaches the node's client port."""
        return f"{self.address}:{self.host_port}"


#: system -> the kind of node clients connect to, and the scheme of its bootstrap address
_CLIENT_NODES = {"kafka": ("broker", ""), "pulsar": ("pulsar-broker", "pulsar://")}


@dataclass(frozen=True)
class ClusterDef:
    name: str
    system: str  # kafka | pulsar
    compose_file: Path
    nodes: tuple[NodeDef, ...]
    versions: tuple[str, ...]
    mode: str  # zk | kraft | pulsar
    #: KRaft: ``static`` (controller.quorum.voters) or ``dynamic`` (KIP-853: voters added and
    #: removed while the cluster runs)
    quorum: str = "static"

    @property
    def controllers(self) -> tuple[NodeDef, ...]:
        """KRaft: the nodes that may be controllers (controller-only nodes, and combined
        nodes where there are no controller-only ones or the quorum is dynamic)."""
        if self.mode != "kraft":
            return ()
        only = self.nodes_of("controller")
        return only + self.nodes_of("broker") if self.quorum == "dynamic" or not only else only

    @property
    def default_version(self) -> str:
        return self.versions[0]

    def node(self, name: str) -> NodeDef:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def nodes_of(self, kind: str, *, spares: bool = False) -> tuple[NodeDef, ...]:
        """The nodes of ``kind`` the cluster starts with (and its spares with ``spares``)."""
        return tuple(n for n in self.nodes if n.kind == kind and (spares or not n.spare))

    @property
    def spares(self) -> tuple[NodeDef, ...]:
        """The nodes held in reserve until a ``join`` step."""
        return tuple(n for n in self.nodes if n.spare)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def bootstrap(self) -> str:
        """Client bootstrap address (Kafka) or service URL (Pulsar), where the harness reaches
        the nodes (loopback for containers)."""
        kind, scheme = _CLIENT_NODES[self.system]
        return scheme + ",".join(n.endpoint for n in self.nodes_of(kind))

    @property
    def admin_urls(self) -> tuple[str, ...]:
        return tuple(f"http://{n.address}:{n.admin_port}" for n in self.nodes_of("pulsar-broker"))


def _kafka_brokers(base_port: int) -> tuple[NodeDef, ...]:
    return tuple(NodeDef(f"kafka-{i}", "broker", i, host_port=base_port + i) for i in (1, 2, 3))


# Host ports stay below Linux's ephemeral range (32768-60999 by default): a port in it can
# be taken by any outgoing connection on the machine (Spark's Python workers, a client),
# and then a cluster fails to start with "bind: address already in use" (seen in CI).
CLUSTERS: dict[str, ClusterDef] = {
    "kafka-zk": ClusterDef(
        name="kafka-zk", system="kafka", mode="zk",
        compose_file=COMPOSE_DIR / "kafka-zk.yaml",
        nodes=(NodeDef("zk", "zookeeper", 0, host_port=12181),) + _kafka_brokers(19090),
        # 0.10.2.2 (before KIP-101), 0.11.0.3 (the first release line with it), 1.1.1 (the
        # last before KIP-279) and 2.0.1 for the regression library; built on demand, like
        # every image (docs/regressions.md)
        versions=("3.9.2", "0.10.2.2", "0.11.0.3", "1.1.1", "2.0.1"),
    ),
    "kafka-kraft": ClusterDef(
        name="kafka-kraft", system="kafka", mode="kraft",
        compose_file=COMPOSE_DIR / "kafka-kraft.yaml",
        nodes=_kafka_brokers(29090),
        versions=KAFKA_VERSIONS,
    ),
    "kafka-kraft-split": ClusterDef(
        name="kafka-kraft-split", system="kafka", mode="kraft",
        compose_file=COMPOSE_DIR / "kafka-kraft-split.yaml",
        nodes=(NodeDef("controller", "controller", 9),) + _kafka_brokers(29190),
        versions=KAFKA_VERSIONS,
    ),
    "kafka-kraft-dynamic": ClusterDef(
        name="kafka-kraft-dynamic", system="kafka", mode="kraft",
        compose_file=COMPOSE_DIR / "kafka-kraft-dynamic.yaml",
        # kafka-5: a broker-only spare, a new broker id when a `join` step adds it
        nodes=_kafka_brokers(17090) + (NodeDef("controller-4", "controller", 4),
                                       NodeDef("kafka-5", "broker", 5, host_port=17095, spare=True)),
        versions=("4.1.2",),  # kafka-metadata-quorum add-controller and --no-initial-controllers: 4.x
        quorum="dynamic",
    ),
    "pulsar": ClusterDef(
        name="pulsar", system="pulsar", mode="pulsar",
        compose_file=COMPOSE_DIR / "pulsar.yaml",
        nodes=(NodeDef("zk", "zookeeper", 0, host_port=22181),)
        + tuple(NodeDef(f"bookie-{i}", "bookie", i) for i in (1, 2, 3))
        + tuple(NodeDef(f"broker-{i}", "pulsar-broker", i, host_port=26650 + i,
                        admin_port=28080 + i, spare=i == 3) for i in (1, 2, 3)),
        # the regression library's versions after the two of every image (docs/regressions.md)
        versions=PULSAR_VERSIONS + ("3.3.2", "3.2.0", "3.2.2", "3.0.0", "3.0.2", "2.10.2", "2.10.3"),
    ),
}


def regression_dirs(system: str | None = None) -> list[str]:
    """The regression library's folders (``cases/<system>/regressions``): of ``system``, or of
    every system that has one."""
    systems = [system] if system else list(SYSTEMS)
    return [str(CASES_DIR / s / "regressions") for s in systems
            if system or (CASES_DIR / s / "regressions").is_dir()]


def get_cluster(name: str) -> ClusterDef:
    """The cluster called ``name``; a clear error listing the known ones otherwise."""
    from .errors import BackendError

    try:
        return CLUSTERS[name]
    except KeyError:
        known = ", ".join(sorted(CLUSTERS))
        raise BackendError(f"unknown cluster {name!r} (known: {known})") from None


def versions_of(system: str) -> tuple[str, ...]:
    """Every version some cluster of ``system`` runs, each once, in the clusters' order."""
    by_system: dict[str, dict[str, None]] = {}
    for c in CLUSTERS.values():
        by_system.setdefault(c.system, {}).update(dict.fromkeys(c.versions))
    return tuple(by_system.get(system, {}))


# Nodes files (harness/case/_nodes.py reads them; harness/backend/ssh.py reaches the hosts)

@dataclass(frozen=True)
class RemoteNode:
    """One host of a nodes file: the node of the definition it plays, and how to reach it."""

    name: str
    kind: str
    host: str
    port: int
    user: str
    key: Path
    line: int  # where the file names it (for errors found when reaching it)

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class NodesFile:
    path: Path
    cluster: ClusterDef
    version: str
    nodes: tuple[RemoteNode, ...]

    def node(self, name: str) -> RemoteNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def error(self, node: RemoteNode, message: str) -> CaseError:
        """An error about ``node`` found after loading (reaching or preparing it)."""
        from .errors import CaseError

        return CaseError(message, path=str(self.path), line=node.line, field=f"nodes.{node.name}")
