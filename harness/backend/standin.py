"""Stand-in hosts: containers that run sshd and nothing the harness does not install itself,
one per node of a cluster definition, and the nodes file that names them.

They let the SSH backend be tried and tested on one machine, as Jepsen's Docker set-up
stands in for its SSH hosts. Each is a Debian root filesystem with sshd, iptables and the
basic tools (:func:`harness.backend.images.ensure_host_image`; no Java: ``harness nodes
prepare`` installs the harness's), on a network the harness creates, reached by the
harness on its address there. Their labels name the owner as a cluster's do, so a run that
dies leaves nothing behind for long (the leftover sweep), and ``harness clean`` removes
them.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from ..clusters import ClusterDef
from ..errors import BackendError
from .docker import LABEL_CLUSTER, LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, Engine
from .images import ensure_host_image

__all__ = ["StandinHosts"]

#: what each stand-in runs: the harness's public key authorised for root, host keys made
#: on first start, sshd in the foreground
_SSHD = ("mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh && "
         "printf '%s\\n' \"$AUTHORIZED_KEY\" > /root/.ssh/authorized_keys && "
         "chmod 600 /root/.ssh/authorized_keys && ssh-keygen -A >/dev/null && "
         "exec /usr/sbin/sshd -D -e")
_START_S = 30.0


class StandinHosts:
    """One stand-in host per node of ``cluster``; :meth:`up` writes the nodes file."""

    def __init__(self, engine: Engine, cluster: ClusterDef, folder: Path, *, owner: str,
                 version: str | None = None) -> None:
        self.engine = engine
        self.cluster = cluster
        self.version = version or cluster.default_version
        self.folder = Path(folder)
        self.owner = owner
        self.group = f"standin-{cluster.name}"
        self.labels = {LABEL_MANAGED: "true", LABEL_CLUSTER: self.group, LABEL_OWNER: owner}
        self.key = self.folder / "id_standin"
        self.nodes_file = self.folder / "nodes.yaml"
        self.network = f"chaos-{self.group}"
        self.addresses: dict[str, str] = {}

    def up(self) -> Path:
        """Starts the hosts (any of an earlier ``up`` by this owner removed first), waits until
        each sshd answers, writes and returns the nodes file."""
        image = ensure_host_image(self.engine)
        self.down()
        self.folder.mkdir(parents=True, exist_ok=True)
        public = self._key()
        client = self.engine.client
        try:
            client.networks.create(self.network, driver="bridge", labels=self.labels)
            for node in self.cluster.nodes:
                box = client.containers.run(
                    image, ["sh", "-c", _SSHD], name=f"{self.network}-{node.name}", hostname=node.name,
                    labels={**self.labels, LABEL_ROLE: "host"}, detach=True, network=self.network,
                    environment={"AUTHORIZED_KEY": public}, cap_add=["NET_ADMIN"],
                    init=True)  # an init as PID 1 reaps the node processes, as a host's does
                box.reload()
                networks = box.attrs["NetworkSettings"]["Networks"]
                self.addresses[node.name] = networks[self.network]["IPAddress"]
        except Exception as exc:
            self.down()
            raise BackendError(f"starting the stand-in hosts failed: {exc}") from exc
        self._wait_for_sshd()
        lines = [f"# stand-in hosts (containers running sshd) for cluster {self.cluster.name}",
                 f"cluster: {self.cluster.name}", f'version: "{self.version}"', "user: root",
                 f"key: {self.key}", "nodes:"]
        lines += [f"  {node.name}: {{host: {self.addresses[node.name]}, role: {node.kind}}}"
                  for node in self.cluster.nodes]
        self.nodes_file.write_text("\n".join(lines) + "\n")
        return self.nodes_file

    def down(self) -> None:
        """Removes this owner's stand-ins of this cluster and their network."""
        self.engine.remove_labelled(self.labels)

    def container(self, node: str) -> Any:
        """The Docker container standing in for ``node``'s host (tests change it)."""
        return self.engine.client.containers.get(f"{self.network}-{node}")

    def _key(self) -> str:
        """A new key pair for these hosts; the public half as authorized_keys takes it."""
        import paramiko

        key = paramiko.RSAKey.generate(3072)
        self.key.unlink(missing_ok=True)
        key.write_private_key_file(str(self.key))
        os.chmod(self.key, 0o600)
        return f"{key.get_name()} {key.get_base64()} chaos-harness-standin"

    def _wait_for_sshd(self) -> None:
        deadline = time.monotonic() + _START_S
        waiting = dict(self.addresses)
        while waiting:
            for name, ip in list(waiting.items()):
                try:
                    with socket.create_connection((ip, 22), timeout=1.0) as sock:
                        if sock.recv(4).startswith(b"SSH-"):
                            del waiting[name]
                except OSError:
                    pass
            if waiting and time.monotonic() > deadline:
                self.down()
                raise BackendError(f"the stand-in hosts {', '.join(waiting)} did not start sshd in "
                                   f"{_START_S:.0f} s")
            if waiting:
                time.sleep(0.3)
