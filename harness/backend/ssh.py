"""Hosts reached over SSH (paramiko): the remote side of a nodes file.

:func:`probe` answers, before anything starts on any host, whether every host of a nodes
file can play its node: it answers on its SSH port, accepts the key, and has the tools the
harness drives a node with (:data:`TOOLS`) and the runtime ``harness nodes prepare``
installs (:data:`RUNTIME`). Every failure is one :class:`CaseError` naming the file, the
node's line and field, what was tried and the fix; the connections opened so far are
closed, and nothing was started on any host.

Host keys: a host's key is accepted on first contact and not stored (as Jepsen's default
``StrictHostKeyChecking no``): the hosts are test machines the user names, and the harness
sends them no secret.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from types import ModuleType
from typing import TYPE_CHECKING

from ..clusters import NodesFile, RemoteNode
from ..errors import BackendError, FaultError

if TYPE_CHECKING:
    import paramiko

__all__ = ["SshHost", "SshProcess", "HostNet", "connect", "check_host", "hosts", "probe", "TOOLS", "RUNTIME",
           "HOME"]

#: where ``harness nodes prepare`` puts everything on a host
HOME = "/opt/chaos-harness"
#: the Java runtime the harness runs a node's JVM with (never the host's own)
RUNTIME = f"{HOME}/java/bin/java"
#: commands a host must have, and what the harness needs each for
TOOLS = {
    "tar": "unpacking what prepare sends",
    "setsid": "starting a node's process apart from the SSH session",
    "kill": "kill -9, pause (SIGSTOP) and resume",
    "iptables": "partitions",
    "tc": "rate limits",
    "bash": "the nodes' entrypoints",
}
#: commands a host of a system must have besides :data:`TOOLS`
SYSTEM_TOOLS = {"pulsar": {"nc": "the entrypoint's wait for ZooKeeper and the cluster metadata"}}
#: how long a host has to answer and to accept the key
CONNECT_TIMEOUT_S = 8.0


def _paramiko() -> ModuleType:
    import paramiko  # imported on use: only nodes files need it

    return paramiko


@dataclass
class SshHost:
    """One host of a nodes file, connected."""

    node: RemoteNode
    client: paramiko.SSHClient

    def run(self, command: str, *, timeout: float = 60.0) -> tuple[int, str]:
        """``command`` through the host's shell: its exit status and its output (stdout
        then stderr); a BackendError naming the host when the connection fails or
        ``timeout`` passes."""
        try:
            _, stdout, stderr = self.client.exec_command(command, timeout=timeout)
            out = stdout.read().decode("utf-8", "replace")
            err = stderr.read().decode("utf-8", "replace")
            return stdout.channel.recv_exit_status(), out + err
        except Exception as exc:  # paramiko's SSHException, a socket timeout, a closed transport
            raise BackendError(f"{self.node.name} on {self.node.where}: {command.split()[0]} over SSH "
                               f"failed: {exc or type(exc).__name__}") from exc

    @property
    def alive(self) -> bool:
        """Whether the connection still stands."""
        transport = self.client.get_transport()
        return transport is not None and transport.is_active()

    def close(self) -> None:
        self.client.close()


def connect(nodes: NodesFile, node: RemoteNode) -> SshHost:
    """``node``'s host, connected with its key; a CaseError naming the node otherwise."""
    paramiko = _paramiko()
    try:
        key = paramiko.PKey.from_path(str(node.key))
    except (paramiko.SSHException, OSError, ValueError) as exc:
        raise nodes.error(node, f"{node.key} is not a private key the harness can use ({exc}): give an "
                                "unencrypted OpenSSH or PEM private key") from None
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(node.host, port=node.port, username=node.user, pkey=key,
                       timeout=CONNECT_TIMEOUT_S, banner_timeout=CONNECT_TIMEOUT_S,
                       auth_timeout=CONNECT_TIMEOUT_S, look_for_keys=False, allow_agent=False)
    except paramiko.AuthenticationException:
        client.close()
        raise nodes.error(node, f"{node.where} refused the key {node.key}: check user and key (the "
                                f"key's public half must be in ~{node.user}/.ssh/authorized_keys "
                                "there)") from None
    except (paramiko.ssh_exception.NoValidConnectionsError, TimeoutError, ConnectionError,
            socket.gaierror, OSError) as exc:
        client.close()
        raise nodes.error(node, f"{node.host} port {node.port} does not answer ({_reason(exc)}): check "
                                "host and port, and that sshd runs there") from None
    except paramiko.SSHException as exc:
        client.close()
        raise nodes.error(node, f"{node.where}: SSH failed ({exc}): check that sshd runs there") from None
    return SshHost(node, client)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer in {CONNECT_TIMEOUT_S:.0f} s"
    if isinstance(exc, socket.gaierror):
        return "unknown host name"
    errors = getattr(exc, "errors", None)
    if errors:  # NoValidConnectionsError: one error per address tried
        first = next(iter(errors.values()))
        return getattr(first, "strerror", None) or str(first)
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def check_host(nodes: NodesFile, host: SshHost, *, runtime: bool = True) -> None:
    """The tools :data:`TOOLS` and (``runtime``) the prepared Java on ``host``; a CaseError
    naming the first thing missing."""
    node = host.node
    tools = {**TOOLS, **SYSTEM_TOOLS.get(nodes.cluster.system, {})}
    script = "; ".join(f"command -v {t} >/dev/null 2>&1 || echo missing:{t}" for t in tools)
    status, out = host.run(script, timeout=30)
    missing = [line.split(":", 1)[1] for line in out.split() if line.startswith("missing:")]
    if status != 0 and not missing:
        raise nodes.error(node, f"{node.where}: the tool check failed (exit {status}): {out.strip()[-200:]}")
    if missing:
        need = "; ".join(f"{t} ({tools[t]})" for t in missing)
        raise nodes.error(node, f"{node.where} lacks {need}: install it there (Debian: apt-get install "
                                f"{' '.join(_PACKAGES.get(t, t) for t in missing)})")
    if runtime:
        status, out = host.run(f"{shlex.quote(RUNTIME)} -version", timeout=60)
        if status != 0:
            raise nodes.error(node, f"{node.where} has no Java at {RUNTIME} ({_last_line(out)}): run "
                                    f"harness nodes prepare {nodes.path}")


#: the Debian package of a tool, for the fix an error names
_PACKAGES = {"setsid": "util-linux", "kill": "procps", "tc": "iproute2", "nc": "netcat-openbsd"}


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:160] if lines else "no output"


@contextmanager
def hosts(nodes: NodesFile, *, runtime: bool = True) -> Iterator[dict[str, SshHost]]:
    """Every host of ``nodes``, connected and checked (:func:`check_host`), by node name; all
    closed on leaving, and on the first failure (a CaseError)."""
    opened: dict[str, SshHost] = {}
    try:
        for node in nodes.nodes:
            host = connect(nodes, node)
            opened[node.name] = host
            check_host(nodes, host, runtime=runtime)
        yield opened
    finally:
        for host in opened.values():
            host.close()


def probe(nodes: NodesFile, *, runtime: bool = True) -> list[str]:
    """Checks every host of ``nodes`` (:func:`hosts`); one line per host on success."""
    lines = []
    with hosts(nodes, runtime=runtime) as connected:
        for name, host in connected.items():
            _, out = host.run("uname -srm", timeout=30)
            lines.append(f"{name}: {host.node.where} ({host.node.kind}) answers: {out.strip()}")
    return lines



#: the supervisor ``harness nodes prepare`` installs (harness.backend.prepare.SUPERVISOR)
SUPERVISOR_PATH = f"{HOME}/bin/node"
#: the node's environment, one ``NAME=value`` a line, read by the supervisor's ``start``
ENV_PATH = f"{HOME}/node.env"
#: the node's output (the entrypoint's stdout and stderr)
LOG_PATH = f"{HOME}/node.log"


class SshProcess:
    """The node process on a prepared host, driven through its supervisor: the verbs a
    container offers (start, stop, kill, pause, unpause, exec, logs, files in and out), so
    the code that drives a node does not know which it has. A method that fails raises
    BackendError naming the node and the host."""

    def __init__(self, host: SshHost) -> None:
        self.host = host
        self.name = host.node.name

    def _node(self, *args: str, timeout: float = 60.0) -> str:
        status, out = self.host.run(" ".join([SUPERVISOR_PATH, *map(shlex.quote, args)]), timeout=timeout)
        if status != 0:
            raise BackendError(f"node {args[0]} of {self.name} on {self.host.node.where} failed "
                               f"(exit {status}): {out.strip()[-300:]}")
        return out.strip()

    def configure(self, env: dict[str, str]) -> None:
        """Writes the node's environment (its entrypoint is ``ENTRYPOINT``)."""
        self.put_file(ENV_PATH, "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()).encode())

    @property
    def status(self) -> str:
        """running, paused or exited (as a container's)."""
        return self._node("status")

    @property
    def pid(self) -> int:
        out = self._node("pid")
        if not out.isdigit():
            raise BackendError(f"{self.name} on {self.host.node.where} has no process (is it running?)")
        return int(out)

    #: a host's network outlives the node's process: a partition's rules stay until flushed
    net_persists = True

    def netns(self) -> HostNet:
        return HostNet(self.host)

    def ip(self) -> str:
        return self.host.node.host

    def start(self) -> None:
        self._node("start")

    def kill(self, signal: str = "KILL") -> None:
        if signal in ("KILL", "9", "SIGKILL"):
            self._node("kill")
        else:
            self._node("signal", signal.removeprefix("SIG"))

    def stop(self, timeout: int = 30) -> None:
        self._node("stop", str(timeout), timeout=timeout + 30)

    def pause(self) -> None:
        self._node("pause")

    def unpause(self) -> None:
        self._node("resume")

    def exec(self, cmd: list[str], *, timeout_hint: str = "") -> tuple[int, str]:
        """``cmd`` on the host, with the node's Java first on the path; (exit code, output)."""
        line = f"PATH={HOME}/java/bin:$PATH " + " ".join(map(shlex.quote, cmd))
        return self.host.run(line, timeout=600)

    def logs(self, tail: int | str = "all", since: float | None = None, timestamps: bool = False) -> str:
        """The node's output, every start's appended (as a container's): the supervisor stamps
        each line with the host's time, which ``since`` (Unix seconds) filters on and
        ``timestamps`` shows as Docker does (RFC 3339, UTC). The hosts' clocks are taken to
        agree with this machine's (NTP), as Jepsen takes them."""
        keep = "1" if since is None else f"$1 + 0 >= {since:.6f}"
        count = "+1" if tail == "all" else str(int(tail))
        _, out = self.host.run(f"awk '{keep}' {LOG_PATH} 2>/dev/null | tail -n {count}", timeout=120)
        return "".join(_restamp(line, timestamps) for line in out.splitlines(keepends=True))

    def get_files(self, path: str) -> Iterator[tuple[str, bytes]]:
        """(member name, content) of each regular file under ``path``, as a container's
        archive names them (from the last part of ``path``)."""
        from .docker import tar_files

        parent, _, base = path.rstrip("/").rpartition("/")
        command = f"tar -C {shlex.quote(parent or '/')} -cf - {shlex.quote(base)}"
        _, stdout, stderr = self.host.client.exec_command(command, timeout=600)
        data = stdout.read()
        if stdout.channel.recv_exit_status() != 0:
            raise BackendError(f"copying {path} from {self.name} on {self.host.node.where} failed: "
                               f"{stderr.read().decode('utf-8', 'replace').strip()[-300:]}")
        yield from tar_files(data)

    def put_file(self, path: str, content: bytes) -> None:
        """Writes one file on the host (its directory must exist)."""
        try:
            with self.host.client.open_sftp() as sftp, sftp.open(path, "wb") as fh:
                fh.write(content)
        except OSError as exc:
            raise BackendError(f"writing {path} on {self.host.node.where} failed: {exc}") from exc


def _restamp(line: str, timestamps: bool) -> str:
    """A log line as the supervisor wrote it (``<unix seconds> <text>``), with Docker's time
    stamp or none."""
    stamp, sep, text = line.partition(" ")
    try:
        t = float(stamp)
    except ValueError:
        return line  # not stamped (a line of an older supervisor)
    if not timestamps:
        return text if sep else "\n"
    when = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return f"{when}000Z {text}"


class HostNet:
    """A host's own network (:class:`harness.backend.netns.NetNs`): iptables and tc run there,
    over SSH, as root."""

    pid: int | None = None
    persists = True

    def __init__(self, host: SshHost) -> None:
        self.host = host

    def run(self, tool: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        line = " ".join(map(shlex.quote, tool))
        try:
            status, out = self.host.run(line, timeout=30)
        except BackendError as exc:
            raise FaultError(str(exc)) from exc
        if check and status != 0:
            raise FaultError(f"{line} on {self.host.node.where} failed (exit {status}): {out.strip()[:300]}")
        return subprocess.CompletedProcess(tool, status, out, "")

    def __repr__(self) -> str:
        return f"network of {self.host.node.where}"
