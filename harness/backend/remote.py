"""A cluster whose nodes are hosts reached over SSH (a nodes file), behind the same interface
as a dockerized one (:class:`harness.backend.cluster.Cluster`), so a run drives either.

What a container gets from compose, a host gets from this module at :meth:`RemoteCluster.up`:

- the node's files: ``harness nodes prepare`` (:mod:`harness.backend.prepare`) for the run's
  version, idempotent, so a run prepares what it needs;
- its environment: the compose file's ``environment`` of that service, with the same
  variables substituted, read by the same entrypoint, plus where the harness reaches it: a
  broker advertises its host's address and its own port (Kafka 9092, Pulsar 6650 and 8080)
  to the harness's clients, instead of a loopback port published by Docker;
- names: every host resolves every node's name (and compose's aliases) to its host, in a
  marked block of ``/etc/hosts``, and a node's ``hostname`` (a shim first on its path) is its
  node name, so the configuration the entrypoints render is the containers';
- a clean start: every run kills the node's process and empties ``/data`` and ``/chaos``
  first, as a new container starts empty; the cluster is never reused between runs.

:meth:`RemoteCluster.down` kills every node's process, flushes the network rules the faults
left, empties the data directories and removes the names: nothing stays running.

The Java workloads run in a helper container on this machine's network, every node's name
in its /etc/hosts; a case with a ``clock`` step gets clocks of the nodes' own from
libfaketime, sent to the hosts. Not on hosts yet (a clear error, not a silent difference):
lazy disks (``disk: lazy``), and a degraded link's delay, jitter, duplication and
reordering (loss and a rate limit work).
"""

from __future__ import annotations

import functools
import logging
import re
import shlex
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import yaml

from ..clusters import ClusterDef, NodeDef, NodesFile
from ..errors import BackendError
from .clock import faketime_env, offset_text, parse_offset, require_libfaketime
from .cluster import Cluster, Node
from .docker import Container, Engine
from .images import image_tag
from .netns import CHAIN, QUEUE_CHAIN
from .ssh import HOME, SshHost, SshProcess, connect

__all__ = ["RemoteCluster", "fit", "node_environment", "hosts_block", "reset_script", "PORTS"]

log = logging.getLogger(__name__)

#: the port each kind of node serves the harness on, on its host: (client, admin)
PORTS: dict[str, tuple[int | None, int | None]] = {
    "zookeeper": (2181, None), "broker": (9092, None), "pulsar-broker": (6650, 8080),
    "controller": (None, None), "bookie": (None, None)}
#: a spare's gate on its host (the entrypoints' JOIN_GATE)
JOIN_FILE = f"{HOME}/join"
#: a node's clock offset (libfaketime reads it) and where the run puts libfaketime, on its host
CLOCK_FILE = f"{HOME}/clock/offset"
FAKETIME_LIB = f"{HOME}/faketime/libfaketime.so.1"
#: the marker of the lines this module adds to a host's /etc/hosts
MARK = "# chaos-harness"
_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")
#: how long ZooKeeper may take to answer before the other nodes start
_ZK_START_S = 90.0


def _substitute(value: str, env: Mapping[str, str]) -> str:
    """``${VAR:-default}`` and ``${VAR}`` as compose substitutes them."""
    return _VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


@functools.cache
def _services(compose_file: Path) -> dict[str, Any]:
    """The services of a compose file (read once: every node of a cluster asks)."""
    return dict(yaml.safe_load(compose_file.read_text())["services"])


def node_environment(spec: ClusterDef, node: NodeDef, address: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment of ``node``'s entrypoint on a host at ``address``: the compose
    service's (``env`` substituted), the entrypoint's path, and its external address."""
    service = _services(spec.compose_file)[node.name]
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    out = {str(k): _substitute(str(v), env) for k, v in raw.items()}
    out["ENTRYPOINT"] = f"/opt/{spec.system}/entrypoint.sh"
    if node.spare:
        out["JOIN_GATE"] = JOIN_FILE
    role = out.get("ROLE", "")
    if node.kind == "broker":  # Kafka
        out["HOST_PORT"] = "9092"
        listeners = f"EXTERNAL://{address}:9092,INTERNAL://{node.name}:9094"
        if out.get("BOOTSTRAP_CONTROLLERS") and role != "kraft-broker":
            listeners += f",CONTROLLER://{node.name}:9093"
        out["BROKER_CONFIG"] = _append(out.get("BROKER_CONFIG", ""), f"advertised.listeners={listeners}")
    elif node.kind == "pulsar-broker":
        out["HOST_PORT"], out["ADMIN_PORT"] = "6650", "8080"
        listeners = (f"internal:pulsar://{node.name}:6650,internal:http://{node.name}:8080,"
                     f"external:pulsar://{address}:6650,external:http://{address}:8080")
        out["BROKER_CONFIG"] = _append(out.get("BROKER_CONFIG", ""), f"advertisedListeners={listeners}")
    return out


def _append(pairs: str, pair: str) -> str:
    """``k=v;k=v`` with ``pair`` last (the entrypoints apply the last of a key)."""
    return f"{pairs};{pair}" if pairs.strip(";") else pair


def aliases(spec: ClusterDef) -> dict[str, list[str]]:
    """node -> the other names compose gives it on the cluster's network."""
    out: dict[str, list[str]] = {}
    for name, service in _services(spec.compose_file).items():
        nets = service.get("networks")
        if isinstance(nets, dict):
            for net in nets.values():
                out.setdefault(name, []).extend((net or {}).get("aliases", []))
    return out


def hosts_block(spec: ClusterDef, addresses: Mapping[str, str]) -> str:
    """The /etc/hosts lines that name every node (and its aliases) at its host."""
    more = aliases(spec)
    return "".join(f"{addresses[n.name]} {' '.join([n.name, *more.get(n.name, [])])} {MARK}\n"
                   for n in spec.nodes)


def reset_script(address: str, *, unname: bool = False) -> str:
    """The shell script that brings a host back to before its node ran: the process killed
    (and waited for), the faults' iptables chains flushed, unhooked and removed, the rate
    limit on the interface of ``address`` removed (only the faults' own, an HTB root with
    handle 1:), the data, the gate, the log emptied; ``unname``: the nodes' names removed
    from /etc/hosts."""
    chains = " ".join((CHAIN, QUEUE_CHAIN))
    script = (
        f"{HOME}/bin/node kill; for i in $(seq 1 20); do "
        f"[ \"$({HOME}/bin/node status)\" = exited ] && break; sleep 0.3; done; "
        f"for c in {chains}; do for h in INPUT OUTPUT; do "
        f"while iptables -w 5 -D $h -j $c 2>/dev/null; do :; done; done; "
        f"iptables -w 5 -F $c 2>/dev/null; iptables -w 5 -X $c 2>/dev/null; done; "
        f"dev=$(ip -o -4 addr show | awk -v a={shlex.quote(address)} 'index($4, a \"/\") == 1 {{print $2}}'"
        f" | cut -d@ -f1 | head -1); "
        f"if [ -n \"$dev\" ] && tc qdisc show dev \"$dev\" | grep -q '^qdisc htb 1: root'; then "
        f"tc qdisc del dev \"$dev\" root; fi; "
        f"rm -rf /data/* /chaos/* {JOIN_FILE} {HOME}/clock {HOME}/node.log {HOME}/node.pid")
    if unname:  # /etc/hosts is rewritten only from a copy that holds its other lines
        tmp = f"{HOME}/hosts.tmp"
        script += (f"; mkdir -p {HOME} && {{ grep -v {shlex.quote(MARK)} /etc/hosts > {tmp}; "
                   f"[ -s {tmp} ] && cat {tmp} > /etc/hosts; }}; rm -f {tmp}")
    return script + "; true"


def fit(case: Any, hosts: NodesFile) -> None:
    """A CaseError unless ``case`` can run on ``hosts``: the same cluster definition, and
    nothing hosts do not offer yet (lazy disks)."""
    from ..errors import CaseError

    if case.cluster != hosts.cluster.name:
        raise CaseError(f"the case runs on cluster {case.cluster}, the nodes file's hosts play "
                        f"{hosts.cluster.name}: give a nodes file of cluster {case.cluster} (harness "
                        f"nodes standin {case.cluster} writes one), or run the case with --cluster "
                        f"{hosts.cluster.name}", path=str(hosts.path), field="cluster")
    if case.disk != "plain":
        raise CaseError("disk: lazy is not available on hosts yet (a lazy disk is a FUSE file system "
                        "the harness mounts on this machine): run the case on Docker nodes",
                        path=str(hosts.path))


@dataclass(frozen=True)
class RemoteClock:
    """A node's own wall clock on its host (:class:`harness.backend.clock.Clock`): libfaketime,
    sent by the run, reads the offset file there; the harness writes it over SSH (a new file
    renamed over the old one)."""

    host: SshHost

    def offset(self) -> float:
        status, out = self.host.run(f"cat {CLOCK_FILE}", timeout=30)
        if status != 0:
            raise BackendError(f"no offset file for the fake clock of {self.host.node.name} at "
                               f"{CLOCK_FILE}: {out.strip()[-200:]}")
        return parse_offset(out, f"{CLOCK_FILE} on {self.host.node.where}")

    def set(self, offset_s: float) -> None:
        text = offset_text(offset_s).strip()
        status, out = self.host.run(f"mkdir -p {HOME}/clock && printf '%s\\n' {shlex.quote(text)} > "
                                    f"{CLOCK_FILE}.new && mv {CLOCK_FILE}.new {CLOCK_FILE}", timeout=30)
        if status != 0:
            raise BackendError(f"setting the clock of {self.host.node.name}: {out.strip()[-200:]}")


@dataclass(frozen=True)
class RemoteGate:
    """A spare's gate on its host: a file its entrypoint waits for (JOIN_GATE)."""

    host: SshHost

    def open(self) -> None:
        status, out = self.host.run(f"touch {JOIN_FILE}", timeout=30)
        if status != 0:
            raise BackendError(f"opening the gate of {self.host.node.name}: {out.strip()[-200:]}")

    @property
    def joined(self) -> bool:
        return self.host.run(f"test -e {JOIN_FILE}", timeout=30)[0] == 0


@dataclass
class RemoteCluster(Cluster):
    """The cluster definition of ``hosts`` played by its hosts, at ``version``."""

    hosts: NodesFile | None = None
    on_hosts: ClassVar[bool] = True
    _connected: dict[str, SshHost] = field(default_factory=dict, repr=False)

    @classmethod
    def from_nodes(cls, engine: Engine, hosts: NodesFile, version: str | None = None,
                   broker_config: Mapping[str, str] | None = None, owner: str | None = None,
                   clock: str = "real") -> RemoteCluster:
        """The cluster of the nodes file ``hosts`` (version: the given one, else the file's);
        ``clock="fake"``: each node's wall clock its own (libfaketime, as in containers)."""
        base = Cluster.named(engine, hosts.cluster.name, version or hosts.version, broker_config, owner,
                             clock=clock)
        by_name = {n.name: n for n in hosts.nodes}
        nodes = []
        for n in base.spec.nodes:
            client, admin = PORTS.get(n.kind, (None, None))
            nodes.append(replace(n, address=by_name[n.name].host, host_port=client, admin_port=admin))
        spec = replace(base.spec, nodes=tuple(nodes))
        return cls(engine, spec, base.version, base.broker_config, base.owner, clock=base.clock, hosts=hosts)

    @property
    def nodes_file(self) -> NodesFile:
        assert self.hosts is not None
        return self.hosts

    @property
    def project(self) -> str:
        return f"hosts-{self.spec.name}"

    # -- the hosts -----------------------------------------------------------------------
    def _host(self, name: str) -> SshHost:
        host = self._connected.get(name)
        if host is None or not host.alive:
            nodes = self.nodes_file
            host = connect(nodes, nodes.node(name))
            self._connected[name] = host
        return host

    def close(self) -> None:
        for host in self._connected.values():
            host.close()
        self._connected.clear()

    # -- the interface of Cluster --------------------------------------------------------
    def containers(self) -> list[Container]:
        return []  # no container: the hosts are not Docker's

    def state(self) -> str:
        """Always ``absent``: a cluster on hosts is made anew for every run."""
        return "absent"

    def up(self, *, reuse: bool = True) -> bool:
        """Prepares the hosts for this version, resets every node, names them, starts them
        (ZooKeeper first); never reuses (returns False). Nothing stays running on an error."""
        from .prepare import prepare

        nodes = replace(self.nodes_file, version=self.version)
        for line in prepare(self.engine, nodes):
            log.info("hosts: %s", line)
        try:  # prepare checked every host (tools, Java): each is reached here, then reset
            self._reset()
            addresses = {n.name: n.address for n in self.spec.nodes}
            block = hosts_block(self.spec, addresses)
            env = self._env()
            for n in self.spec.nodes:
                proc = SshProcess(self._host(n.name))
                self._name_host(n.name, block)
                node_env = node_environment(self.spec, n, n.address, env)
                if self.clock == "fake":
                    node_env.update(self._fake_clock(n))
                proc.configure(node_env)
            log.info("%s: starting %d nodes on hosts (%s %s)", self.spec.name, len(self.spec.nodes),
                     self.spec.system, self.version)
            first = [n for n in self.spec.nodes if n.kind == "zookeeper"]
            for n in first:
                SshProcess(self._host(n.name)).start()
            for n in first:
                self._wait_port(n, 2181)
            for n in self.spec.nodes:
                if n not in first:
                    SshProcess(self._host(n.name)).start()
        except BaseException:
            self.down()
            raise
        return False

    def _fake_clock(self, node: NodeDef) -> dict[str, str]:
        """Sends ``node``'s host this machine's libfaketime (the hosts are Debian, as the
        images are) and sets its offset to zero; the node's environment for it. The library
        is preloaded in the node's entrypoint only (``CHAOS_PRELOAD``, which the supervisor
        makes ``LD_PRELOAD`` at its exec), not in the supervisor's stamper: the log's time
        stamps stay real."""
        host = self._host(node.name)
        status, out = host.run(f"mkdir -p {HOME}/faketime {HOME}/clock", timeout=30)
        if status != 0:
            raise BackendError(f"{node.name}: cannot make {HOME}/faketime: {out.strip()[-200:]}")
        SshProcess(host).put_file(FAKETIME_LIB, require_libfaketime().read_bytes())
        RemoteClock(host).set(0.0)
        return {"CHAOS_PRELOAD": FAKETIME_LIB, **faketime_env(CLOCK_FILE)}

    def _name_host(self, name: str, block: str) -> None:
        """The node's name for itself (a ``hostname`` shim) and every node's in /etc/hosts
        (written in place: a container's /etc/hosts is a mount that cannot be renamed over)."""
        script = (f"mkdir -p {HOME}/shim && printf '#!/bin/sh\\necho %s\\n' {shlex.quote(name)} "
                  f"> {HOME}/shim/hostname && chmod +x {HOME}/shim/hostname && "
                  f"grep -v {shlex.quote(MARK)} /etc/hosts > {HOME}/hosts.tmp; "
                  f"printf %s {shlex.quote(block)} >> {HOME}/hosts.tmp && cat {HOME}/hosts.tmp > /etc/hosts "
                  f"&& rm -f {HOME}/hosts.tmp")
        status, out = self._host(name).run(script, timeout=30)
        if status != 0:
            raise BackendError(f"naming the nodes on {name}'s host failed: {out.strip()[-300:]}")

    def _wait_port(self, node: NodeDef, port: int) -> None:
        deadline = time.monotonic() + _ZK_START_S
        while True:
            try:
                with socket.create_connection((node.address, port), timeout=2.0):
                    return
            except OSError as exc:
                if time.monotonic() > deadline:
                    tail = SshProcess(self._host(node.name)).logs(tail=15)
                    raise BackendError(f"{node.name} on {node.address} does not answer on port {port} "
                                       f"{_ZK_START_S:.0f} s after its start ({exc}); its log ends:\n"
                                       f"{tail}") from exc
                time.sleep(0.5)

    def _reset(self) -> None:
        """Every node's process killed, its data, gate, log and network rules gone."""
        for n in self.spec.nodes:
            self._reset_host(n)

    def _reset_host(self, node: NodeDef, *, unname: bool = False) -> None:
        host = self._host(node.name)
        status, out = host.run(reset_script(node.address, unname=unname), timeout=120)
        if status != 0:
            raise BackendError(f"resetting {node.name} on {host.node.where} failed (exit {status}): "
                               f"{out.strip()[-300:]}")

    def down(self) -> None:
        """Kills every node's process, flushes the faults' rules, empties the data and removes
        the names (idempotent; a host that cannot be reached is logged, the others still
        cleaned)."""
        from ..errors import HarnessError

        for n in self.spec.nodes:
            try:
                self._reset_host(n, unname=True)
            except HarnessError as exc:
                log.warning("cleaning %s's host: %s", n.name, exc)
        self.close()

    def nodes(self) -> list[Node]:
        out = []
        for n in self.spec.nodes:
            host = self._host(n.name)
            out.append(Node(n, SshProcess(host), clock=RemoteClock(host) if self.clock == "fake" else None,
                            gate=RemoteGate(host) if n.spare else None))
        return out

    def run_helper(self, name: str, cmd: list[str], *, role: str, mounts: Mapping[str, str],
                   working_dir: str, version: str | None = None) -> Container:
        """A helper container (a Java workload) on this machine's network, where the harness
        itself reaches the hosts, each node's name (and compose's aliases) naming its host in
        the container's /etc/hosts: the programs reach the nodes by the names they use inside
        a cluster of containers."""
        names = {n.name: n.address for n in self.spec.nodes}
        for node, more in aliases(self.spec).items():
            names.update((alias, names[node]) for alias in more)
        return self.engine.run_container(image_tag(self.spec.system, version or self.version), cmd, name=name,
                                         labels=self.helper_labels(role), network="host", volumes=mounts,
                                         working_dir=working_dir, extra_hosts=names)
