"""The Docker engine boundary: the only module that imports the docker SDK.

Everything else talks to :class:`Engine` and :class:`Container`; every SDK or
API exception is translated into :class:`~harness.errors.BackendError` here,
with a message that says what to do.
"""

from __future__ import annotations

import io
import logging
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import BackendError, ImageError
from .netns import LocalNetns

__all__ = ["Engine", "Container", "tar_files", "LABEL_MANAGED", "LABEL_OWNER", "LABEL_CLUSTER",
           "LABEL_CONFIG", "LABEL_INPUTS", "LABEL_ROLE"]

# Every label the harness puts on containers, networks and images (compose/*.yaml spell the
# first four too).
LABEL_MANAGED = "io.chaosharness.managed"
LABEL_OWNER = "io.chaosharness.owner"
LABEL_CLUSTER = "io.chaosharness.cluster"
LABEL_CONFIG = "io.chaosharness.config"
LABEL_INPUTS = "io.chaosharness.inputs"
LABEL_ROLE = "io.chaosharness.role"  # of a helper container (a workload) beside a cluster's nodes

_DAEMON_HINT = ("the Docker engine is not reachable ({err}); start it with `bin/setup` "
                "(installs docker.io and runs dockerd in the background), or `dockerd &`")

log = logging.getLogger(__name__)


def _sdk() -> Any:
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a broken install
        raise BackendError("the docker SDK is missing: pip install -e . (or bin/setup)") from exc
    return docker


@dataclass(frozen=True)
class Container:
    """A handle on one container; methods raise BackendError."""

    engine: Engine
    id: str
    name: str
    labels: Mapping[str, str]

    def _obj(self) -> Any:
        try:
            return self.engine.client.containers.get(self.id)
        except Exception as exc:
            raise BackendError(f"container {self.name} is gone: {exc}") from exc

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise BackendError(f"{what} {self.name} failed: {exc}") from exc

    @property
    def service(self) -> str:
        return self.labels.get("com.docker.compose.service", self.name)

    def attrs(self) -> dict[str, Any]:
        obj = self._obj()
        self._call("inspect", obj.reload)
        return dict(obj.attrs)

    @property
    def status(self) -> str:
        """running, paused, exited, created, ..."""
        return str(self.attrs()["State"]["Status"])

    @property
    def pid(self) -> int:
        pid = int(self.attrs()["State"]["Pid"])
        if pid <= 0:
            raise BackendError(f"container {self.name} has no process (is it running?)")
        return pid

    #: a container's network namespace dies with its process (:mod:`harness.backend.netns`)
    net_persists: ClassVar[bool] = False

    def netns(self) -> LocalNetns:
        """The container's network namespace, while its process runs."""
        return LocalNetns(self.pid)

    def ip(self) -> str:
        nets = self.attrs()["NetworkSettings"]["Networks"]
        for net in nets.values():
            if net.get("IPAddress"):
                return str(net["IPAddress"])
        raise BackendError(f"container {self.name} has no IP address (is it running?)")

    def kill(self, signal: str = "KILL") -> None:
        self._call(f"kill -s {signal}", self._obj().kill, signal=signal)

    def stop(self, timeout: int = 30) -> None:
        self._call("stop", self._obj().stop, timeout=timeout)

    def start(self) -> None:
        self._call("start", self._obj().start)

    def pause(self) -> None:
        self._call("pause", self._obj().pause)

    def unpause(self) -> None:
        self._call("unpause", self._obj().unpause)

    def remove(self) -> None:
        self._call("remove", self._obj().remove, force=True, v=True)

    def exec(self, cmd: list[str], *, timeout_hint: str = "") -> tuple[int, str]:
        """Run ``cmd`` inside; returns (exit code, combined output)."""
        res = self._call(f"exec {cmd[0]} in", self._obj().exec_run, cmd, demux=False)
        out = res.output.decode("utf-8", "replace") if res.output else ""
        return int(res.exit_code if res.exit_code is not None else -1), out

    def logs(self, tail: int | str = "all", since: float | None = None,
             timestamps: bool = False) -> str:
        """The container's output; ``timestamps`` prefixes each line with Docker's RFC 3339 time."""
        kwargs: dict[str, Any] = {"tail": tail, "timestamps": timestamps}
        if since is not None:
            kwargs["since"] = since
        raw = self._call("read logs of", self._obj().logs, **kwargs)
        return raw.decode("utf-8", "replace")

    def stream_logs_to(self, fh: io.BufferedWriter) -> None:
        for chunk in self._call("read logs of", self._obj().logs, stream=True, follow=False):
            fh.write(chunk)

    def get_files(self, path: str) -> Iterator[tuple[str, bytes]]:
        """(member name, content) of each regular file under ``path``; works on a stopped container."""
        stream, _ = self._call("copy files from", self._obj().get_archive, path)
        yield from tar_files(b"".join(stream))

    def put_file(self, path: str, content: bytes) -> None:
        """Writes one file into the container (its directory must exist)."""
        directory, _, name = path.rpartition("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        ok = self._call("copy a file into", self._obj().put_archive, directory or "/", buf.getvalue())
        if not ok:
            raise BackendError(f"copying {path} into {self.name} failed")

    def stats(self) -> dict[str, Any]:
        return dict(self._call("stats of", self._obj().stats, stream=False))


def tar_files(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(member name, content) of each regular file of a tar archive."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile():
                fh = tar.extractfile(member)
                if fh is not None:
                    yield member.name, fh.read()


class Engine:
    """A connection to the local Docker engine."""

    def __init__(self) -> None:
        docker = _sdk()
        try:
            self.client = docker.from_env(timeout=120)
            self.client.ping()
        except Exception as exc:
            raise BackendError(_DAEMON_HINT.format(err=_short(exc))) from exc

    def containers(self, labels: Mapping[str, str] | None = None, *,
                   all_: bool = True) -> list[Container]:
        filters = {"label": [f"{k}={v}" if v else k for k, v in (labels or {}).items()]}
        try:
            found = self.client.containers.list(all=all_, filters=filters)
        except Exception as exc:
            raise BackendError(f"listing containers failed: {_short(exc)}") from exc
        return [Container(self, c.id, c.name, dict(c.labels or {})) for c in found]

    def run_container(self, image: str, cmd: list[str], *, name: str, labels: Mapping[str, str],
                      network: str, volumes: Mapping[str, str], working_dir: str,
                      extra_hosts: Mapping[str, str] | None = None) -> Container:
        """Starts ``cmd`` detached in a new container of ``image`` (its entrypoint cleared).

        ``volumes`` maps a host path to the path it is bound to, read-write; ``network`` is a
        network's name, or ``host`` (this machine's); ``extra_hosts`` names addresses in the
        container's /etc/hosts. The caller removes the container (:meth:`Container.remove`).
        """
        binds = {host: {"bind": path, "mode": "rw"} for host, path in volumes.items()}
        net: dict[str, Any] = {"network_mode": "host"} if network == "host" else {"network": network}
        if extra_hosts:
            net["extra_hosts"] = dict(extra_hosts)
        try:
            box = self.client.containers.run(image, cmd, entrypoint=[], name=name,
                                             labels=dict(labels), detach=True, volumes=binds,
                                             working_dir=working_dir, **net)
        except Exception as exc:
            raise BackendError(f"starting container {name} failed: {exc}") from exc
        return Container(self, box.id, box.name, dict(box.labels or {}))

    def networks(self, labels: Mapping[str, str]) -> list[Any]:
        filters = {"label": [f"{k}={v}" if v else k for k, v in labels.items()]}
        try:
            return list(self.client.networks.list(filters=filters))
        except Exception as exc:
            raise BackendError(f"listing networks failed: {_short(exc)}") from exc

    def subnets(self, labels: Mapping[str, str] | None = None) -> list[str]:
        """The IPv4 subnets of every network (those carrying ``labels``), as ``a.b.c.d/n``."""
        nets = self.networks(labels or {})
        configs = [cfg for net in nets for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []]
        return [str(cfg["Subnet"]) for cfg in configs if ":" not in str(cfg.get("Subnet") or ":")]

    def remove_labelled(self, labels: Mapping[str, str]) -> tuple[int, int]:
        """Force-remove every container and network carrying ``labels``; (containers, networks)."""
        containers = self.containers(labels)
        for c in containers:
            try:
                c.remove()
            except BackendError:
                pass  # already gone
        nets = self.networks(labels)
        for net in nets:
            try:
                net.remove()
            except Exception:
                pass  # removed concurrently
        return len(containers), len(nets)

    def image_labels(self, tag: str) -> dict[str, str] | None:
        """The labels of image ``tag``, or None when it does not exist."""
        docker = _sdk()
        try:
            img = self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            return None
        except Exception as exc:
            raise BackendError(f"inspecting image {tag} failed: {_short(exc)}") from exc
        return dict(img.labels or {})

    def pull(self, ref: str) -> bool:
        """Try to pull ``ref``; False (never an error) when no registry answers."""
        try:
            self.client.images.pull(ref)
            return True
        except Exception:
            return False

    def import_rootfs(self, tar_path: str, tag: str, changes: list[str]) -> None:
        repo, _, ver = tag.partition(":")
        try:
            with open(tar_path, "rb") as fh:
                self.client.api.import_image_from_data(fh.read(), repository=repo, tag=ver or "latest",
                                                       changes=changes)
        except Exception as exc:
            raise ImageError(f"docker import of {tar_path} as {tag} failed: {_short(exc)}") from exc

    def build(self, context: str, tag: str, buildargs: Mapping[str, str],
              labels: Mapping[str, str]) -> None:
        """``docker build`` of ``context`` (its output at debug level)."""
        try:
            for chunk in self.client.api.build(path=context, tag=tag, buildargs=dict(buildargs),
                                               labels=dict(labels), rm=True, forcerm=True,
                                               decode=True, pull=False):
                if "error" in chunk:
                    raise ImageError(f"docker build of {tag} failed: {chunk['error'].strip()}")
                if chunk.get("stream", "").strip():
                    log.debug("%s", chunk["stream"].strip())
        except ImageError:
            raise
        except Exception as exc:
            raise ImageError(f"docker build of {tag} failed: {_short(exc)}") from exc

    def remove_image(self, tag: str) -> None:
        try:
            self.client.images.remove(tag, force=True)
        except Exception:
            pass  # absent is the goal


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
