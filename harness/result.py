"""The result of one run: what ``result.json`` holds, typed.

:class:`RunResult` is written by the run (``harness.run``), and read by the
report, the CLI and the pytest plugin; nothing else parses ``result.json``.
Its schema is documented once, in ``docs/result.md``; ``schema`` is bumped
whenever a field changes meaning or type.

Reading is tolerant of what a crashed or errored run leaves out (every field
has a default), and strict about what is there: a field of the wrong type is a
:class:`~harness.errors.ResultError` naming the file and the field, never a
traceback deep inside a renderer; a schema this harness does not know is a
:class:`~harness.errors.ResultSchemaError`, never read as one it knows. The file
itself must be a regular file of at most :data:`MAX_RESULT_BYTES` (:func:`open_input`,
which the report uses for every file it reads): a FIFO is never opened, a device
never read.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import stat
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InputError, ResultError, ResultSchemaError

__all__ = ["MAX_RESULT_BYTES", "SCHEMA", "SCHEMAS", "VERDICTS", "Expectation", "InjectionSummary",
           "Recovery", "RunResult", "StepRecord", "open_input", "size_text"]

#: The version of ``result.json``'s layout (1: the first, an untyped dict).
SCHEMA = 2
#: The layouts this harness reads (a file without ``schema`` is of schema 1).
SCHEMAS = (1, 2)
#: The largest ``result.json`` read: a run writes tens of KB (its examples, transactions and
#: latency windows are bounded), so a larger file is not one a run wrote.
MAX_RESULT_BYTES = 64 << 20
#: A run's verdict: its expectations held (pass), did not (fail), or it could not be judged.
VERDICTS = ("pass", "fail", "error")

JSON = dict[str, Any]


@dataclass
class Expectation:
    """One judged expectation: ``observed`` against ``expected``."""

    name: str
    expected: str | bool
    observed: float | bool | str  # a count, a measured figure, a flag, or a word
    ok: bool


@dataclass
class StepRecord:
    """One step of the case as it ran (``detail``: what the step returned)."""

    index: int
    action: str
    label: str
    line: int | None
    t: float
    status: str = "start"  # start | done | error
    error: str | None = None
    duration_s: float | None = None
    detail: Any = None


@dataclass
class InjectionSummary:
    """The last armed crash-timing point and whether its interleaving happened."""

    point: str
    n: int
    leader: str | None = None
    follower: str | None = None
    hit: bool = False
    node: str | None = None
    detail: dict[str, Any] | None = None  # the HIT line's fields
    kill: dict[str, Any] | None = None  # the fault that landed while it held
    meaning: str | None = None
    seed: str | None = None  # what the seed article says of this point
    expected: str | None = None
    observed: str | None = None


@dataclass
class Recovery:
    """The recovery phase: convergence time, the final read, remedies applied."""

    converged_s: float | None = None
    read: dict[str, Any] | None = None  # the recovery consumer's stats
    lock_loops: dict[str, int] = field(default_factory=dict)
    observations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # repairs the harness made, and why
    #: each repair made while the run waited on its cluster (an await, the recovery), named
    #: shortly: it may have hidden a liveness bug, so ``expect.repairs`` bounds their number
    repairs: list[str] = field(default_factory=list)
    #: each repair of a cluster that outlives runs (a reused cluster's at set-up, a lock loop's
    #: after the recovery read), named shortly: shown, never judged (it is about other runs)
    upkeep: list[str] = field(default_factory=list)
    #: nodes whose metadata session was declared lost during the run: node -> times
    sessions_lost: dict[str, int] = field(default_factory=dict)
    #: brokers a bookie refused a write because the ledger was fenced: node -> refusals
    fenced_writes: dict[str, int] = field(default_factory=dict)


@dataclass
class RunResult:
    """Everything a run decided and observed (see ``docs/result.md``)."""

    run_id: str
    case: str | None = None
    case_file: str | None = None
    description: str | None = None
    system: str | None = None
    cluster: str | None = None
    version: str | None = None
    variant: str | None = None  # the case's ``versions:`` entry this run judged by
    broker_config: dict[str, str] = field(default_factory=dict)  # the settings it ran with
    seed: int | None = None  # the run's seed, when the case has a chaos step (``--seed``)
    topic: str | None = None
    started: str | None = None  # ISO 8601, UTC
    finished: str | None = None
    duration_s: float | None = None
    verdict: str = "error"
    expected_verdict: str = "pass"
    as_expected: bool = False
    error: str | None = None
    observed: list[str] = field(default_factory=list)  # informational anomalies the case watches
    anomalies: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: what the check could not use, per file and reason (history lines, sends without a
    #: message id, replica lines: docs/checker.md); empty when it used everything
    unread: dict[str, dict[str, int]] = field(default_factory=dict)
    #: send and end-to-end latency, availability per fault (docs/result.md; None: not measured)
    latency: dict[str, Any] | None = None
    #: the transactions: counts by state and up to 200 of them (docs/result.md; None: none)
    transactions: dict[str, Any] | None = None
    expectations: list[Expectation] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    recovery: Recovery | None = None
    injection: InjectionSummary | None = None  # the last armed point
    injections: list[InjectionSummary] = field(default_factory=list)  # every armed point
    truncations: list[dict[str, Any]] = field(default_factory=list)
    #: elections a KRaft controller logged as unclean (:func:`harness.collect.parse_unclean_elections`)
    elections: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    collect_problems: list[str] = field(default_factory=list)
    story: list[str] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=lambda: {"case": "case.yaml", "logs": []})
    schema: int = SCHEMA

    @property
    def replay(self) -> str | None:
        """The command that replays a run's chaos schedule (None: the run has no seed)."""
        if self.seed is None:
            return None
        words = ["harness", "run", shlex.quote(self.case_file or self.case or "CASE"),
                 "--seed", str(self.seed)]
        if self.variant:
            words += ["--version", shlex.quote(self.variant)]
        return " ".join(words)

    @property
    def repairs(self) -> list[str]:
        """The repairs made while the run waited on its cluster (``recovery.repairs``)."""
        return list(self.recovery.repairs) if self.recovery is not None else []

    @property
    def upkeep(self) -> list[str]:
        """The repairs of a cluster that outlives runs (``recovery.upkeep``)."""
        return list(self.recovery.upkeep) if self.recovery is not None else []

    @property
    def exit_code(self) -> int:
        """0 as expected, 1 expectations not met, 2 error."""
        if self.verdict == "error":
            return 2
        return 0 if self.as_expected else 1

    @property
    def checked(self) -> bool:
        """Whether the checker's counts are in (an errored run may lack them)."""
        return bool(self.counts)

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> JSON:
        """A JSON-ready dict (``json.dumps`` of it is ``result.json``)."""
        return _plain(asdict(self))

    def write(self, run_dir: Path) -> Path:
        """Writes ``run_dir/result.json`` through a temporary file, flushed to disk and then
        renamed over it: a reader (the index of a concurrent run) never sees half of it, and
        a crash or a full disk leaves the old file or the new one, never a torn one; returns
        its path."""
        path = Path(run_dir) / "result.json"
        text = json.dumps(self.to_json(), indent=2, default=str)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per writer
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_json(cls, raw: Any, *, source: str = "result.json") -> RunResult:
        """A result from its JSON form; missing keys take their defaults, a key of the wrong
        type is a :class:`ResultError` naming ``source`` and the key. A file without
        ``schema`` is of schema 1 (the first layout had none; every later writer writes it); one
        whose ``schema`` is an integer not in :data:`SCHEMAS` is a :class:`ResultSchemaError`,
        whatever else it holds (its fields may mean something else)."""
        if not isinstance(raw, dict):
            raise ResultError(f"{source}: not a JSON object")
        _known_schema(raw.get("schema"), source)
        if not isinstance(raw.get("run_id"), str) or not raw["run_id"]:
            raise ResultError(f"{source}: run_id: missing or not a string")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in raw or raw[f.name] is None and f.name in _NOT_NULL:
                continue
            kwargs[f.name] = _read_field(f.name, raw[f.name], source)
        kwargs.setdefault("schema", 1)
        return cls(**kwargs)

    @classmethod
    def read(cls, run_dir: Path) -> RunResult:
        """``run_dir/result.json``; :class:`ResultError` when it is missing, unreadable (not a
        regular file, over :data:`MAX_RESULT_BYTES`) or malformed, :class:`ResultSchemaError`
        when it is of a schema this harness does not read."""
        path = Path(run_dir) / "result.json"
        return cls.from_json(read_json(path), source=str(path))


def read_json(path: Path) -> Any:
    """The JSON value of a ``result.json`` at ``path``, read as :meth:`RunResult.read` reads it
    (the report's salvage of a malformed one reads it the same way); a :class:`ResultError`
    naming the file when it cannot be read or is not JSON."""
    try:
        with open_input(path, MAX_RESULT_BYTES, "result.json") as fh:
            data = fh.read(MAX_RESULT_BYTES + 1)
    except FileNotFoundError:
        raise ResultError(f"{path}: missing (the run did not finish writing its result)") from None
    except InputError as exc:
        raise ResultError(f"{path}: unreadable: {exc.reason}") from None
    except OSError as exc:
        raise ResultError(f"{path}: unreadable: {exc.strerror or exc}") from None
    if len(data) > MAX_RESULT_BYTES:  # it grew after it was looked at
        raise ResultError(f"{path}: unreadable: {_too_large(len(data), MAX_RESULT_BYTES, 'result.json')}")
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:  # ValueError: also an integer of 5000 digits
        raise ResultError(f"{path}: not JSON: {exc}") from None


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))


def size_text(n: int) -> str:
    """``n`` bytes for a reader: ``812 bytes``, ``64 MiB``, ``3.7 GiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def _too_large(size: int, limit: int, what: str) -> str:
    return (f"{size_text(size)} ({size} bytes), over the cap of {size_text(limit)} for {what} "
            "(is it the right file?)")


def _refusal(info: os.stat_result, limit: int, what: str) -> str | None:
    """Why a file of this ``stat`` is not read as ``what``, or None."""
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        return f"{kind}, not a regular file ({what} is read only from a regular file)"
    if info.st_size > limit:
        return _too_large(info.st_size, limit, what)
    return None


def open_input(path: Path, limit: int, what: str) -> BinaryIO:
    """``path`` open for reading in binary, when it is a regular file of at most ``limit``
    bytes; else an :class:`InputError` naming the file and why (its kind; or its size and the
    cap). ``what`` names the kind of file in the message (``result.json``, ``a history``).

    The type and size are looked at with ``stat`` before the file is opened, so a FIFO is
    never opened and a device never read (``/dev/zero`` would never end), and again with
    ``fstat`` on what was opened (without blocking: it may have been swapped since). A
    missing or unreadable file is the ``OSError`` of ``stat`` or ``open``.
    """
    why = _refusal(os.stat(path), limit, what)
    if why is not None:
        raise InputError(str(path), why)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        why = _refusal(os.fstat(fd), limit, what)
        if why is not None:
            raise InputError(str(path), why)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _known_schema(schema: Any, source: str) -> None:
    """A :class:`ResultSchemaError` when ``schema`` is an integer this harness does not read."""
    if _is_int(schema) and int(schema) not in SCHEMAS:
        raise ResultSchemaError(
            f"{source}: schema {int(schema)}: this harness reads result.json of schema "
            f"{' or '.join(map(str, SCHEMAS))} only, and neither shows nor rewrites another "
            "(a newer harness wrote it, or something else did): use the harness that wrote it")


_NOT_NULL = frozenset({"injections", "broker_config", "observed", "anomalies", "examples", "counts",
                       "expectations", "steps", "truncations", "elections", "replicas", "collect_problems",
                       "story", "files", "verdict", "expected_verdict", "as_expected", "schema"})


def _plain(value: Any) -> Any:
    """JSON-safe: non-finite floats become None (``json`` would write NaN, which is not JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _is_number(v: Any) -> bool:
    """A finite JSON number (an integer too large for a float is not one: it cannot be shown)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _is_int(v: Any) -> bool:
    """An integral JSON number (``3`` or ``3.0``)."""
    return _is_number(v) and float(v).is_integer()


def _expect(ok: bool, source: str, key: str, want: str) -> None:
    if not ok:
        raise ResultError(f"{source}: {key}: expected {want}")


def _str_list(v: Any, source: str, key: str) -> list[str]:
    _expect(isinstance(v, list) and all(isinstance(x, str) for x in v), source, key,
            "a list of strings")
    return list(v)


def _dict_list(v: Any, source: str, key: str) -> list[dict[str, Any]]:
    _expect(isinstance(v, list) and all(isinstance(x, dict) for x in v), source, key,
            "a list of objects")
    return [dict(x) for x in v]


def _int_map(v: Any, source: str, key: str) -> dict[str, int]:
    _expect(isinstance(v, dict) and all(_is_int(x) for x in v.values()), source, key,
            "an object of integers")
    return {str(k): int(x) for k, x in v.items()}


def _opt(v: Any, kind: type | tuple[type, ...], source: str, key: str, want: str) -> Any:
    if v is None:
        return None
    _expect(isinstance(v, kind) and not (isinstance(v, bool) and bool not in _tuple(kind)),
            source, key, want)
    if isinstance(v, float):
        _expect(math.isfinite(v), source, key, want)
    return v


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _record(cls: type, v: Any, source: str, key: str) -> Any:
    """A nested dataclass from its dict: known keys only, each type-checked by its annotation."""
    _expect(isinstance(v, dict), source, key, "an object")
    kwargs = {}
    for f in fields(cls):
        if f.name in v:
            kwargs[f.name] = _typed(str(f.type), v[f.name], source, f"{key}.{f.name}")
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ResultError(f"{source}: {key}.{f.name}: missing")
    return cls(**kwargs)


def _typed(annotation: str, v: Any, source: str, key: str) -> Any:
    """Checks ``v`` against one of the simple annotations used by the nested records."""
    if annotation == "Any":
        return v
    optional = annotation.endswith("| None")
    base = annotation.removesuffix(" | None")
    if v is None:
        _expect(optional, source, key, base)
        return None
    if base == "str":
        return _opt(v, str, source, key, "a string")
    if base in ("int",):
        _expect(_is_int(v), source, key, "an integer")
        return int(v)
    if base == "float":
        _expect(_is_number(v), source, key, "a number")
        return float(v)
    if base == "bool":
        return _opt(v, bool, source, key, "true or false")
    if base == "str | bool":
        return _opt(v, (str, bool), source, key, "a string or a boolean")
    if base == "float | bool | str":
        _expect(isinstance(v, (str, bool)) or _is_number(v), source, key,
                "a number, a string or a boolean")
        return v
    if base == "list[str]":
        return _str_list(v, source, key)
    if base == "dict[str, int]":
        return _int_map(v, source, key)
    if base == "dict[str, Any]":
        return _opt(v, dict, source, key, "an object")
    return v  # Any


def _read_field(name: str, v: Any, source: str) -> Any:
    """One top-level field of ``result.json``, type-checked."""
    if name == "expectations":
        _expect(isinstance(v, list), source, name, "a list")
        return [_record(Expectation, x, source, f"{name}[{i}]") for i, x in enumerate(v)]
    if name == "steps":
        _expect(isinstance(v, list), source, name, "a list")
        return [_record(StepRecord, x, source, f"{name}[{i}]") for i, x in enumerate(v)]
    if name == "recovery":
        return None if v is None else _record(Recovery, v, source, name)
    if name == "injection":
        return None if v is None else _record(InjectionSummary, v, source, name)
    if name == "injections":
        _expect(isinstance(v, list), source, name, "a list")
        return [_record(InjectionSummary, x, source, f"{name}[{i}]") for i, x in enumerate(v)]
    if name == "broker_config":
        _expect(isinstance(v, dict) and all(isinstance(x, str) for x in v.values()), source, name,
                "an object of strings")
        return {str(k): x for k, x in v.items()}
    if name == "examples":
        _expect(isinstance(v, dict), source, name, "an object")
        return {str(k): _dict_list(x, source, f"{name}.{k}") for k, x in v.items()}
    if name in ("truncations", "elections", "replicas"):
        return _dict_list(v, source, name)
    if name == "unread":
        _expect(isinstance(v, dict) and all(
            isinstance(x, dict) and all(isinstance(n, int) and not isinstance(n, bool) for n in x.values())
            for x in v.values()), source, name, "an object of objects of counts")
        return {str(k): {str(r): n for r, n in x.items()} for k, x in v.items()}
    if name in ("files", "latency", "transactions"):
        return _opt(v, dict, source, name, "an object")
    if name == "verdict":
        _expect(v in VERDICTS, source, name, " or ".join(VERDICTS))
        return v
    if name == "expected_verdict":
        _expect(v in ("pass", "fail"), source, name, "pass or fail")
        return v
    annotation = {f.name: str(f.type) for f in fields(RunResult)}[name]
    return _typed(annotation, v, source, name)
