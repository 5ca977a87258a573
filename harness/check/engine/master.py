"""Where a check runs (``--spark-master``, ``$HARNESS_SPARK_MASTER``), checked before any
work: a value Spark would refuse, or a cluster nobody answers on, is one clear error at
the start of ``harness run`` or ``harness check``, not a Java stack trace after a minute (or
minutes of Spark Connect's retries) after the run.

Accepted: ``local-connect`` (:data:`DEFAULT_MASTER`, the shared local Spark Connect server),
``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` and ``local[*,F]`` (Spark in the
checking process), ``spark://HOST:PORT`` (a standalone cluster; several ``HOST:PORT``
joined by commas for its standby masters), ``sc://HOST[:PORT][/;PARAMS]`` (a Spark Connect
server; port 15002 by default), and ``yarn`` and ``k8s://URL`` as Spark takes them (not
tried here). :func:`require_reachable` connects once to a ``spark://`` or ``sc://``
address (any one of a standalone cluster's masters will do).
"""

from __future__ import annotations

import os
import re
import socket

from harness.errors import CheckError

__all__ = ["DEFAULT_MASTER", "FORMS", "master_of", "require_reachable", "source_of", "validate"]

DEFAULT_MASTER = "local-connect"
#: what the errors list as the accepted values
FORMS = "local-connect, local[*], local[N], spark://HOST:PORT, sc://HOST:PORT, yarn or k8s://URL"
_ENV = "HARNESS_SPARK_MASTER"
_CONNECT_PORT = 15002
_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:(?P<port>[0-9]{1,5}))?")


def master_of(master: str | None) -> str:
    """The master a check runs on: ``master``, else ``$HARNESS_SPARK_MASTER``, else
    :data:`DEFAULT_MASTER` (the shared local Spark Connect server)."""
    return master or os.environ.get(_ENV) or DEFAULT_MASTER


def source_of(master: str | None, option: str = "--spark-master") -> str:
    """Where :func:`master_of` took its value from, for an error message."""
    return option if master else f"${_ENV}" if os.environ.get(_ENV) else "the default"


def validate(master: str | None, option: str = "--spark-master") -> str:
    """The master :func:`master_of` gives, if Spark would take it; else a CheckError that
    names the value, where it came from and the accepted forms."""
    value = master_of(master)
    if value == DEFAULT_MASTER or _LOCAL.fullmatch(value) or value == "yarn" \
            or (value.startswith("k8s://") and len(value) > len("k8s://")):
        return value
    try:
        _addresses(value)
    except ValueError as exc:
        raise CheckError(f"{source_of(master, option)} {value!r}: {exc}; give {FORMS}") from None
    return value


def _addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` or ``sc://`` master; ValueError for
    anything else."""
    if master.startswith("spark://"):
        rest, default = master[len("spark://"):], None
        parts = rest.split(",")
    elif master.startswith("sc://"):
        rest, default = master[len("sc://"):], _CONNECT_PORT
        parts = [rest.split("/", 1)[0]]
    else:
        raise ValueError("not a Spark master")
    out = []
    for part in parts:
        m = _HOST_PORT.fullmatch(part)
        port = m and (m["port"] or default)
        if not m or port is None:
            raise ValueError(f"{part!r} is not HOST:PORT" if part else "no HOST:PORT")
        if not 0 < int(port) < 65536:
            raise ValueError(f"port {port} is out of range")
        out.append((m["host"].strip("[]"), int(port)))
    return out


def require_reachable(master: str | None, option: str = "--spark-master", timeout_s: float = 5.0) -> None:
    """For a ``spark://`` or ``sc://`` master (after :func:`validate`), a CheckError unless
    one of its addresses accepts a TCP connection within ``timeout_s``; other masters start
    with the check (nothing to reach). And a CheckError when a setting of the driver that the
    check would start is bad: ``$HARNESS_SPARK_DRIVER_MEMORY`` unless the driver is a
    remote Spark Connect server, and the shared server's (:func:`server.check_settings`)."""
    value = validate(master, option)
    if not value.startswith("sc://"):
        from harness.check.engine.conf import driver_memory

        driver_memory()
    if value == DEFAULT_MASTER:
        from harness.check.engine import server

        server.check_settings()
        return
    if not value.startswith(("spark://", "sc://")):
        return
    failures = []
    for host, port in _addresses(value):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
            failures.append(f"{host}:{port}: {reason}")
    raise CheckError(f"cannot reach the Spark master {value} ({source_of(master, option)}): "
                     f"{'; '.join(failures)}")
