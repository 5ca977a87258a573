"""What a node's process offers the code that drives it, whichever backend runs it.

A Docker node is a container (:class:`harness.backend.docker.Container`); a node on a host
reached over SSH is its supervisor's process (:class:`harness.backend.ssh.SshProcess`).
The faults, the injection, the systems and the evidence readers use only these verbs, so
they do not know which they have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from .netns import NetNs

__all__ = ["NodeProcess"]


class NodeProcess(Protocol):
    """A node's process: its state, the signals and starts of the faults, commands and
    files beside it, its output, its network. Methods raise BackendError."""

    @property
    def name(self) -> str: ...

    @property
    def net_persists(self) -> bool:
        """Whether the node's network (and its rules) outlives its process."""
        ...

    @property
    def status(self) -> str:
        """running, paused, exited (or created: never started)."""
        ...

    @property
    def pid(self) -> int: ...

    def ip(self) -> str:
        """The node's address on the cluster's network."""
        ...

    def netns(self) -> NetNs: ...

    def kill(self, signal: str = "KILL") -> None: ...

    def stop(self, timeout: int = 30) -> None: ...

    def start(self) -> None: ...

    def pause(self) -> None: ...

    def unpause(self) -> None: ...

    def exec(self, cmd: list[str], *, timeout_hint: str = "") -> tuple[int, str]:
        """``cmd`` beside the node (in its container, or on its host with its Java first on
        the path): (exit code, output)."""
        ...

    def logs(self, tail: int | str = "all", since: float | None = None,
             timestamps: bool = False) -> str:
        """The node's output; ``since`` (Unix seconds) keeps the lines logged from then on,
        ``timestamps`` prefixes each with its RFC 3339 time, as Docker's logs do."""
        ...

    def get_files(self, path: str) -> Iterator[tuple[str, bytes]]: ...

    def put_file(self, path: str, content: bytes) -> None: ...
