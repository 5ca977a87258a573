"""Loading case files: the top-level keys, and finding and validating many files."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType

from harness.clusters import CLUSTERS, ClusterDef
from harness.errors import CaseError

from ._fields import Fields, Reader, choice, duration, error, name, show, str_map, string, unknown
from ._specs import read_client, read_expect, read_topic
from ._steps import StepContext, read_steps
from ._yaml import Node, parse
from .model import DEFAULT_CASE_TIMEOUT_S, SYSTEMS, Case, ClientSpec, Expect, TopicSpec

__all__ = ["load_case", "load_case_text", "find_case_files", "validate_paths"]

StrPath = str | os.PathLike[str]

#: The ``path`` of text that did not come from a file.
_NO_FILE = "<string>"
_TOP_KEYS = ("name", "description", "system", "cluster", "version", "timeout", "broker_config",
             "topic", "client", "steps", "expect")
_SUFFIXES = (".yaml", ".yml")


def load_case(path: StrPath, *, cluster: str | None = None, version: str | None = None) -> Case:
    """The validated case in the file at ``path``; a :class:`CaseError` otherwise.

    ``cluster`` / ``version`` replace the file's (``harness run --cluster``), and the
    whole case is validated against them: the same file can run on ``kafka-zk`` and
    ``kafka-kraft``, or on another Kafka version.
    """
    shown = str(path)
    try:
        data = Path(path).read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise CaseError(f"cannot read the case file: {reason}", path=shown) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError("the case file is not UTF-8 text", path=shown,
                        line=data.count(b"\n", 0, exc.start) + 1) from None
    return load_case_text(text, path, cluster=cluster, version=version)


def load_case_text(text: str, path: StrPath = _NO_FILE, *, cluster: str | None = None,
                   version: str | None = None) -> Case:
    """The validated case in ``text``; ``path`` names it in errors.

    Rule files are looked up relative to ``path``'s directory; with the
    default ``path``, relative to the working directory, and ``Case.path`` is None.
    """
    shown = str(path)
    case_path = None if shown == _NO_FILE else Path(path)
    try:
        return _build(parse(text), case_path, cluster, version)
    except CaseError as exc:
        raise CaseError(exc.reason, path=shown, line=exc.line, field=exc.field) from None


def find_case_files(paths: Iterable[StrPath]) -> list[Path]:
    """The case files among ``paths``, each once.

    A directory gives its ``*.yaml``/``*.yml`` files, recursively and sorted,
    except those whose name starts with ``_``; any other path is taken as is
    (loading it reports it if it is missing).
    """
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            found.update(dict.fromkeys(sorted(
                p for p in path.rglob("*")
                if p.suffix in _SUFFIXES and not p.name.startswith("_") and p.is_file())))
        else:
            found[path] = None
    return list(found)


def validate_paths(paths: Iterable[StrPath]) -> list[CaseError]:
    """Loads every case file of :func:`find_case_files`; one error per invalid file."""
    errors = []
    for path in find_case_files(paths):
        try:
            load_case(path)
        except CaseError as exc:
            errors.append(exc)
    return errors


def _build(root: Node | None, path: Path | None, cluster_override: str | None = None,
           version_override: str | None = None) -> Case:
    if root is None:
        raise CaseError("the case file is empty", line=1)
    if not isinstance(root.value, dict):
        raise error(root, "", f"a case is a mapping of keys ({', '.join(_TOP_KEYS)}), "
                              f"got {show(root.value)}")
    f = Fields(root, "", _TOP_KEYS)  # read in the order of _TOP_KEYS, as files usually are
    case_name = f.get("name", name, path.stem if path else "case")
    description = f.get("description", string, "")
    system = f.need("system", choice(*SYSTEMS, kind="system"))
    cluster = f.need("cluster", _cluster)
    if cluster_override is not None:
        if cluster_override not in CLUSTERS:
            raise error(f.at("cluster"), "cluster (override)", f"unknown cluster "
                        f"{cluster_override!r} (known: {', '.join(sorted(CLUSTERS))})")
        cluster = CLUSTERS[cluster_override]
    if cluster.system != system:
        raise error(f.at("cluster"), "cluster",
                    f"{cluster.name} is a {cluster.system} cluster, but system is {system}")
    version = f.get("version", _version(cluster), cluster.default_version) \
        if version_override is None and (cluster_override is None or f.has("version")) \
        else (version_override or cluster.default_version)
    if version not in cluster.versions:
        raise error(f.at("version") if f.has("version") else f.at("cluster"), "version",
                    f"{version!r} is not a version of cluster {cluster.name} "
                    f"(known: {', '.join(cluster.versions)})")
    timeout_s = f.get("timeout", duration, DEFAULT_CASE_TIMEOUT_S)
    broker_config = f.get("broker_config", str_map, MappingProxyType({}))
    topic = f.get("topic", lambda n, _: read_topic(n, system, cluster), TopicSpec())
    client = f.get("client", lambda n, _: read_client(n, system), ClientSpec())
    ctx = StepContext(system=system, cluster=cluster, version=version,
                      partitions=topic.partitions, replication_factor=topic.replication_factor,
                      base_dir=path.absolute().parent if path else Path.cwd(),
                      case_timeout_s=timeout_s)
    steps = f.need("steps", lambda n, _: read_steps(n, ctx))
    expect = f.get("expect", lambda n, _: read_expect(n, bool(ctx.armed)), Expect())
    return Case(name=case_name, path=path, description=description, system=system,
                cluster=cluster.name, version=version, broker_config=broker_config, topic=topic,
                client=client, steps=steps, expect=expect, timeout_s=timeout_s)


def _cluster(node: Node, field: str) -> ClusterDef:
    text = string(node, field)
    if text not in CLUSTERS:
        raise error(node, field, unknown("cluster", text, tuple(CLUSTERS)))
    return CLUSTERS[text]


def _version(cluster: ClusterDef) -> Reader[str]:
    def read(node: Node, field: str) -> str:
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            raise error(node, field, f"write the version as a quoted string "
                                     f"(version: \"{node.value}\")")
        text = string(node, field)
        if text not in cluster.versions:
            raise error(node, field, f"version {text!r} not available for cluster {cluster.name} "
                                     f"(available: {', '.join(cluster.versions)})")
        return text
    return read
