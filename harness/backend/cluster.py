"""A dockerized cluster: one compose project per cluster definition.

Containers and networks carry ``io.chaosharness.*`` labels: ``managed``,
``cluster``, ``owner`` and ``config``. The owner is ``keep`` for a cluster a
user started with ``harness cluster up`` (reused, never removed implicitly),
otherwise ``pid:<host>:<pid>`` of the harness process that started it; a
cluster whose owner process is gone is a leftover of a killed run and is
removed before the next one starts.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..clusters import BOOKIE_PREFIX, DISKS, ClusterDef, NodeDef, get_cluster
from ..errors import BackendError
from .clock import CLOCKS, CLOCKS_DIR, Clock, FakeClock, compose_override, drop_clocks
from .compose import compose
from .docker import LABEL_CLUSTER, LABEL_CONFIG, LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, Container, Engine
from .images import ensure_images, image_tag
from .lazyfs import DISKS_DIR, LazyDisk, sweep
from .process import NodeProcess
from .spare import SPARES_DIR, Gate, SpareGate, drop_gates
from .spare import compose_override as spare_override

__all__ = ["Cluster", "Node", "LABEL_CONFIG", "DISKS", "this_owner", "owner_alive", "remove_leftovers",
           "remove_disks"]

log = logging.getLogger(__name__)


def this_owner() -> str:
    return f"pid:{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """False only for an owner process on this host that no longer exists."""
    if not owner.startswith("pid:"):
        return True  # keep / manual: user-managed
    _, host, pid = owner.split(":", 2)
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


#: where a cluster's network takes its /24 (compose files give their nodes fixed addresses in it)
SUBNET_POOL = ipaddress.IPv4Network("172.28.0.0/16")


def _prefix(net: ipaddress.IPv4Network) -> str:
    """A /24's first three octets (``172.28.5``), as the compose files take them."""
    return str(net.network_address).rsplit(".", 1)[0]


def free_subnet(used: list[str], start: int = 0) -> str:
    """The first three octets of a /24 of :data:`SUBNET_POOL` that overlaps none of ``used``,
    trying from the ``start``-th on (clusters started at once then try different ones)."""
    taken = [ipaddress.IPv4Network(u, strict=False) for u in used]
    subnets = list(SUBNET_POOL.subnets(new_prefix=24))
    for i in range(len(subnets)):
        net = subnets[(start + i) % len(subnets)]
        if not any(net.overlaps(t) for t in taken):
            return _prefix(net)
    raise BackendError(f"no free /24 left in {SUBNET_POOL} for a cluster network: remove unused "
                       "docker networks (docker network prune)")


def remove_leftovers(engine: Engine) -> list[str]:
    """Removes the clusters of harness processes that died, and their lazy disks; returns
    their cluster names."""
    dead: set[tuple[str, str]] = set()
    for c in engine.containers({LABEL_MANAGED: "true"}):
        owner = c.labels.get(LABEL_OWNER, "")
        if not owner_alive(owner):
            dead.add((c.labels.get(LABEL_CLUSTER, "?"), owner))
    for cluster, owner in dead:
        engine.remove_labelled({LABEL_CLUSTER: cluster, LABEL_OWNER: owner})
    sweep(owner_alive)  # after the containers: a disk is unmounted once nothing uses it
    return sorted({c for c, _ in dead})


def remove_disks() -> int:
    """Destroys every lazy disk (``harness clean``, after the containers); returns how many."""
    homes = list(DISKS_DIR.glob("*/*/owner")) if DISKS_DIR.is_dir() else []
    for owner_file in homes:
        LazyDisk(owner_file.parent).destroy()
    return len(homes)


@dataclass
class Node:
    """One node of a cluster: its definition and its container."""

    spec: NodeDef
    #: its process: a container, or a host's supervised process (:mod:`harness.backend.process`)
    container: NodeProcess
    #: the node's lazy disk (a cluster made with ``disk="lazy"``), else None
    disk: LazyDisk | None = None
    #: the node's own wall clock (a cluster made with ``clock="fake"``), else None
    clock: Clock | None = None
    #: a spare node's gate (:mod:`harness.backend.spare`), else None
    gate: Gate | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def member(self) -> bool:
        """False for a spare whose ``join`` has not come: its process has not started."""
        return self.gate is None or self.gate.joined

    @property
    def kind(self) -> str:
        return self.spec.kind

    def __str__(self) -> str:
        return self.spec.name


@dataclass
class Cluster:
    """A cluster definition bound to a version, broker settings and an owner.

    ``broker_config``: the brokers' settings; on Pulsar a key ``bookie.K`` sets the bookies'
    setting ``K`` instead. ``disk``: what each node's ``/data`` lies on (:data:`DISKS`).
    ``clock``: ``fake`` gives each node a wall clock of its own (:mod:`harness.backend.clock`)."""

    engine: Engine
    spec: ClusterDef
    version: str
    broker_config: Mapping[str, str] = field(default_factory=dict)
    owner: str = field(default_factory=this_owner)
    disk: str = "plain"
    clock: str = "real"

    @classmethod
    def named(cls, engine: Engine, name: str, version: str | None = None,
              broker_config: Mapping[str, str] | None = None, owner: str | None = None,
              disk: str = "plain", clock: str = "real") -> Cluster:
        spec = get_cluster(name)
        version = version or spec.default_version
        if version not in spec.versions:
            raise BackendError(f"cluster {name} does not support version {version!r} "
                               f"(supported: {', '.join(spec.versions)})")
        if disk not in DISKS:
            raise BackendError(f"unknown disk {disk!r} (disks: {', '.join(DISKS)})")
        if clock not in CLOCKS:
            raise BackendError(f"unknown clock {clock!r} (clocks: {', '.join(CLOCKS)})")
        return cls(engine, spec, version, dict(broker_config or {}), owner or this_owner(), disk, clock)

    @property
    def project(self) -> str:
        return f"chaos-{self.spec.name}"

    #: whether the nodes are hosts reached over SSH (:mod:`harness.backend.remote`)
    on_hosts: ClassVar[bool] = False

    @property
    def config_key(self) -> str:
        conf: dict[str, object] = {"v": self.version, "cfg": sorted(self.broker_config.items())}
        if self.disk != "plain":
            conf["disk"] = self.disk
        if self.clock != "real":
            conf["clock"] = self.clock
        return hashlib.sha256(json.dumps(conf).encode()).hexdigest()[:12]

    def _disk_home(self, node: str) -> Path:
        return DISKS_DIR / self.project / node

    def _disks(self) -> list[Path]:
        """Lazy disks: makes each node's (kept ones are reused) and the compose file that
        binds them to ``/data``; returns the extra compose files (none on a plain disk)."""
        if self.disk != "lazy":
            return []
        binds = {}
        for n in self.spec.nodes:
            disk = LazyDisk.create(self._disk_home(n.name), self.owner)
            binds[n.name] = {"volumes": [f"{disk.mount}:/data"]}
        override = DISKS_DIR / self.project / "compose.disks.json"
        override.write_text(json.dumps({"services": binds}, indent=1))  # JSON is YAML
        return [override]

    def _drop_disks(self) -> None:
        for n in self.spec.nodes:
            LazyDisk(self._disk_home(n.name)).destroy()
        override = DISKS_DIR / self.project / "compose.disks.json"
        override.unlink(missing_ok=True)
        try:
            override.parent.rmdir()
        except OSError:
            pass  # absent, or another node's disk is still there

    def _env(self) -> dict[str, str]:
        # a key "bookie.K" (pulsar) sets the bookies' K; every other key is the brokers'
        brokers = {k: v for k, v in self.broker_config.items() if not k.startswith(BOOKIE_PREFIX)}
        bookies = {k[len(BOOKIE_PREFIX):]: v for k, v in self.broker_config.items()
                   if k.startswith(BOOKIE_PREFIX)}
        env = {"CHAOS_OWNER": self.owner, "CHAOS_CONFIG": self.config_key,
               "CHAOS_BROKER_CONFIG": ";".join(f"{k}={v}" for k, v in brokers.items()),
               "CHAOS_BOOKIE_CONFIG": ";".join(f"{k}={v}" for k, v in bookies.items()),
               f"{self.spec.system.upper()}_VERSION": self.version, "CHAOS_SUBNET": self._subnet()}
        return env

    def _subnet(self) -> str:
        """The /24 of the cluster's network (the one it has, else a free one). Its nodes keep
        their addresses across restarts, as hosts do: KRaft resolves its voters' addresses
        once, so a controller started again on another container's old address is never
        found again (its peers' requests reach the other node)."""
        mine = self.engine.subnets({LABEL_CLUSTER: self.spec.name})
        if mine:
            return _prefix(ipaddress.IPv4Network(mine[0], strict=False))
        start = int(hashlib.sha256(self.project.encode()).hexdigest(), 16) % 256
        return free_subnet(self.engine.subnets(), start)

    def containers(self) -> list[Container]:
        return self.engine.containers({LABEL_CLUSTER: self.spec.name})

    def state(self) -> str:
        """absent | reusable | mismatch (exists with another config/owner) | stale (owner dead)."""
        found = self.containers()
        if not found:
            return "absent"
        owners = {c.labels.get(LABEL_OWNER, "") for c in found}
        if any(not owner_alive(o) for o in owners):
            return "stale"
        configs = {c.labels.get(LABEL_CONFIG, "") for c in found}
        if configs != {self.config_key} or len(found) != len(self.spec.nodes):
            return "mismatch"
        if self.disk == "lazy" and not all(LazyDisk(self._disk_home(n.name)).alive()
                                           for n in self.spec.nodes):
            return "mismatch"  # a disk's process is gone: its node has no /data
        if self.clock == "fake" and not all(FakeClock(CLOCKS_DIR / self.project / n.name).path.is_file()
                                            for n in self.spec.nodes):
            return "mismatch"  # an offset file is gone: its node's clock cannot be moved
        gates = [SpareGate(self._gate_home(n.name)) for n in self.spec.spares]
        if any(g.joined or not g.home.is_dir() for g in gates):
            # a spare joined (another case would start from a cluster it did not state), or
            # its gate is gone (nothing holds it back)
            return "mismatch"
        return "reusable"

    def up(self, *, reuse: bool = True) -> bool:
        """Creates the cluster's containers (building images first); True if it reused them."""
        state = self.state()
        if state == "reusable" and reuse:
            log.info("%s: reusing the running cluster", self.spec.name)
            for c in self.containers():
                if c.status == "paused":
                    c.unpause()
                if c.status != "running":
                    c.start()
            return True
        if state != "absent":
            log.info("%s: removing the existing cluster (%s)", self.spec.name, state)
            self.down()
        ensure_images(self.engine, self.spec.system, self.version)
        log.info("%s: starting %d containers (%s %s)", self.spec.name, len(self.spec.nodes),
                 self.spec.system, self.version)
        try:
            overrides = self._disks()
            if self.clock == "fake":
                overrides.append(compose_override(CLOCKS_DIR / self.project, self.spec.node_names))
            if self.spec.spares:
                spares = [n.name for n in self.spec.spares]
                overrides.append(spare_override(SPARES_DIR / self.project, spares))
            compose(self.project, self.spec.compose_file, ["up", "-d", "--no-color"], self._env(),
                    overrides=overrides)
        except BackendError:
            self.down()
            raise
        return False

    def down(self) -> None:
        """Removes every container and network of this cluster (idempotent)."""
        try:
            compose(self.project, self.spec.compose_file,
                    ["down", "-v", "--remove-orphans", "-t", "0"], self._env(), timeout=180)
        except BackendError:
            pass  # the label sweep below is the guarantee
        self.engine.remove_labelled({LABEL_CLUSTER: self.spec.name})
        self._drop_disks()  # idempotent; a plain cluster has none
        drop_clocks(CLOCKS_DIR / self.project)
        drop_gates(SPARES_DIR / self.project)

    def nodes(self) -> list[Node]:
        by_service = {c.service: c for c in self.containers()}
        missing = [n.name for n in self.spec.nodes if n.name not in by_service]
        if missing:
            raise BackendError(f"cluster {self.spec.name} is not up: no container for "
                               f"{', '.join(missing)} (harness cluster up {self.spec.name})")
        lazy, fake = self.disk == "lazy", self.clock == "fake"
        return [Node(n, by_service[n.name], LazyDisk(self._disk_home(n.name)) if lazy else None,
                     FakeClock(CLOCKS_DIR / self.project / n.name) if fake else None,
                     SpareGate(self._gate_home(n.name)) if n.spare else None)
                for n in self.spec.nodes]

    def _gate_home(self, node: str) -> Path:
        return SPARES_DIR / self.project / node

    def node(self, name: str) -> Node:
        if name not in self.spec.node_names:
            raise BackendError(f"no node {name!r} in cluster {self.spec.name} "
                               f"(nodes: {', '.join(self.spec.node_names)})")
        return next(n for n in self.nodes() if n.name == name)

    def run_helper(self, name: str, cmd: list[str], *, role: str, mounts: Mapping[str, str],
                   working_dir: str, version: str | None = None) -> Container:
        """Starts ``cmd`` detached in a helper container beside the nodes (e.g. a Java workload).

        It runs the cluster's own image (or that of ``version`` of the same system, e.g. a
        newer client) on the cluster's network, with ``mounts`` (host path -> container
        path, read-write). Labelled ``managed``, ``cluster`` and ``role``; its
        owner is this process, not the cluster's, so that a helper a killed run left behind
        is swept as a leftover even beside a kept cluster. The caller removes it.
        """
        nets = self.engine.networks({LABEL_CLUSTER: self.spec.name})
        if not nets:
            raise BackendError(f"cluster {self.spec.name} has no network (is it up?)")
        return self.engine.run_container(image_tag(self.spec.system, version or self.version), cmd, name=name,
                                         labels=self.helper_labels(role), network=nets[0].name,
                                         volumes=mounts, working_dir=working_dir)

    def helper_labels(self, role: str) -> dict[str, str]:
        """A helper container's labels: this cluster's, and this process as its owner."""
        return {LABEL_MANAGED: "true", LABEL_CLUSTER: self.spec.name, LABEL_OWNER: this_owner(),
                LABEL_ROLE: role}

    def node_logs(self, names: list[str] | None = None, tail: int = 20) -> list[tuple[str, str]]:
        """(node, last log lines) for the timeout messages of waits."""
        out = []
        for n in self.nodes():
            if names is None or n.name in names:
                try:
                    out.append((n.name, n.container.logs(tail=tail)))
                except BackendError as exc:
                    out.append((n.name, f"<no logs: {exc}>"))
        return out
