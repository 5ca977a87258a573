"""The harness's exception tree.

Every error a user can cause or meet is one of these; the CLI prints its
message and exits 2, never a traceback. Third-party exceptions are translated
at the boundary (``raise BackendError(...) from exc``).

::

    HarnessError
    ├── CaseError          a case file is malformed (names file, line, field)
    ├── BackendError       Docker engine, images, compose, containers
    │   └── ImageError     an image or its inputs (Maven coordinates) cannot be built
    ├── AdminError         a Kafka/Pulsar admin call failed or a role cannot be resolved
    ├── FaultError         a fault could not be applied or healed
    ├── InjectError        a crash-timing point could not be armed, submitted or awaited
    ├── WorkloadError      a client workload failed or did not stop
    ├── WaitTimeout        a condition was not met in time (says what, shows logs)
    ├── CheckError         the checker could not read or judge a history
    ├── ResultError        a run's result.json is missing, not JSON or has a field of the wrong type
    │   └── ResultSchemaError  its schema is one this harness does not read (a newer one)
    └── InputError         a file to read is not a regular file (a FIFO, a device) or is over its cap
"""

from __future__ import annotations

__all__ = [
    "HarnessError",
    "CaseError",
    "BackendError",
    "ImageError",
    "AdminError",
    "FaultError",
    "InjectError",
    "WorkloadError",
    "WaitTimeout",
    "CheckError",
    "ResultError",
    "ResultSchemaError",
    "InputError",
]


class HarnessError(Exception):
    """Base of every error the harness reports to a user."""

    #: Process exit code the CLI uses for this error.
    exit_code = 2


class CaseError(HarnessError):
    """A case file failed to load or validate.

    ``str(err)`` reads ``cases/kafka/c1.yaml:14: steps[3].kill9: unknown role ...``.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = message
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        if field:
            where += f"{field}: "
        super().__init__(where + message)


class BackendError(HarnessError):
    """The container backend (Docker engine, compose, a container) failed."""


class ImageError(BackendError):
    """An image could not be built, or its inputs could not be resolved."""


class AdminError(HarnessError):
    """A Kafka or Pulsar admin operation failed, or a role could not be resolved."""


class FaultError(HarnessError):
    """A fault could not be applied or healed."""


class InjectError(HarnessError):
    """A crash-timing point could not be armed (no rule, Byteman refused it), or was not armed
    when awaited."""


class WorkloadError(HarnessError):
    """A client workload failed, or did not stop when asked."""


class WaitTimeout(HarnessError):
    """A condition was not met in time; the message says what was awaited."""


class CheckError(HarnessError):
    """A history could not be read or checked."""


class ResultError(HarnessError):
    """A run directory's ``result.json`` is missing, unreadable or malformed (names the field)."""


class ResultSchemaError(ResultError):
    """A ``result.json`` of a schema this harness does not read: it is neither shown as one it
    knows nor rewritten (the fields it does not know would be lost)."""


class InputError(HarnessError):
    """A file the harness reads is refused before it is read: not a regular file (a FIFO, a
    device, a directory), or larger than the cap for its kind. ``str(err)`` reads
    ``<path>: <reason>``; the reason gives the size and the cap when it is too large."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
