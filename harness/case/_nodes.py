"""A nodes file: the hosts, reached over SSH, that play a cluster definition's nodes.

::

    cluster: kafka-zk          # the cluster definition whose nodes the hosts play
    version: "3.9.2"           # optional: the definition's default
    user: root                 # defaults for every node (each node may set its own)
    key: ~/.ssh/chaos_ed25519  # a private key file (no passphrase)
    port: 22
    nodes:
      zk:      {host: 10.0.0.11, role: zookeeper}
      kafka-1: {host: 10.0.0.12, role: broker}
      kafka-2: {host: 10.0.0.13}
      kafka-3: {host: 10.0.0.14, port: 2222, user: chaos}

Every node of the definition is named once; its ``role`` is the definition's (written, it
must agree: the file then says what each host runs). The file is checked as a case is:
every error names the file, line and field. Reaching the hosts is the backend's
(:mod:`harness.backend.ssh`), not this module's.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.clusters import NodesFile, RemoteNode
from harness.errors import CaseError

from ._fields import Fields, Reader, error, integer, show, string, unknown
from ._load import _cluster, _version
from ._yaml import Node, parse

__all__ = ["load_nodes"]

_TOP = ("cluster", "version", "user", "key", "port", "nodes")
_NODE = ("host", "port", "user", "key", "role")
_PORT = integer(1)


def _port(node: Node, field: str) -> int:
    port = _PORT(node, field)
    if port > 65535:
        raise error(node, field, f"port {port} is not a TCP port (1 to 65535)")
    return port


def _key(base: Path) -> Reader[Path]:
    def read(node: Node, field: str) -> Path:
        path = Path(os.path.expanduser(string(node, field)))
        if not path.is_absolute():
            path = base / path
        if not path.is_file():
            raise error(node, field, f"no key file at {path} (a private key the hosts accept; "
                                     "ssh-keygen -t ed25519 -N '' -f FILE makes one)")
        return path
    return read


def load_nodes(path: str | os.PathLike[str]) -> NodesFile:
    """The nodes file at ``path``, checked; a CaseError naming file, line and field if not."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseError("no such nodes file", path=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"cannot read the nodes file: {exc}", path=str(file)) from None
    try:
        return _build(parse(text), file)
    except CaseError as exc:
        if exc.path is None:
            raise CaseError(exc.reason, path=str(file), line=exc.line, field=exc.field) from None
        raise


def _build(root: Node | None, file: Path) -> NodesFile:
    if root is None:
        raise CaseError("the nodes file is empty: it needs cluster and nodes", line=1)
    top = Fields(root, "", _TOP)
    cluster = top.need("cluster", _cluster)
    version = top.get("version", _version(cluster), cluster.default_version)
    read_key = _key(file.parent)
    user = top.get("user", string, None)
    key = top.get("key", read_key, None)
    port = top.get("port", _port, 22)
    listed = top.need("nodes", lambda n, f: n)
    if not isinstance(listed.value, dict):
        raise error(listed, "nodes", f"expected a mapping of node names to hosts, got {show(listed.value)}")
    nodes: list[RemoteNode] = []
    hosts: dict[tuple[str, int], str] = {}
    for name, entry in listed.value.items():
        line = listed.key_lines.get(name, entry.line)
        if name not in cluster.node_names:
            raise CaseError(unknown(f"node of cluster {cluster.name}", name, cluster.node_names),
                            line=line, field="nodes")
        field = f"nodes.{name}"
        fields = Fields(entry, field, _NODE)
        kind = cluster.node(name).kind
        role = fields.get("role", string, kind)
        if role != kind:
            raise error(fields.at("role"), fields.sub("role"),
                        f"{name} is a {kind} in cluster {cluster.name}, not a {role}")
        host = fields.need("host", string).strip()
        node_user = fields.get("user", string, user)
        node_key = fields.get("key", read_key, key)
        if node_user is None:
            raise error(entry, fields.sub("user"), "missing: set user here or at the top of the file")
        if node_key is None:
            raise error(entry, fields.sub("key"), "missing: set key here or at the top of the file")
        node_port = fields.get("port", _port, port)
        if (host, node_port) in hosts:
            raise error(fields.at("host"), fields.sub("host"),
                        f"{host}:{node_port} already plays {hosts[host, node_port]}: one host per node")
        hosts[host, node_port] = name
        nodes.append(RemoteNode(name, kind, host, node_port, node_user, node_key, line))
    missing = [n for n in cluster.node_names if n not in listed.value]
    if missing:
        raise CaseError(f"cluster {cluster.name} also needs {', '.join(missing)}",
                        line=root.key_lines.get("nodes", listed.line), field="nodes")
    order = {n: i for i, n in enumerate(cluster.node_names)}
    return NodesFile(file, cluster, version, tuple(sorted(nodes, key=lambda n: order[n.name])))
