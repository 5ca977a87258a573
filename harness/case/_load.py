"""Loading case files: the top-level keys, and finding and validating many files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType

from harness.clusters import BOOKIE_PREFIX, CLUSTERS, DISKS, ClusterDef
from harness.errors import CaseError

from ._fields import Fields, Reader, boolean, choice, duration, error, name, show, str_map, string, unknown
from ._files import MAX_CASE_BYTES, Unreadable, os_reason, read_limited, too_large
from ._scenario import scenario_gaps
from ._specs import read_client, read_expect, read_topic
from ._steps import StepContext, read_steps
from ._yaml import Node, parse
from .model import DEFAULT_CASE_TIMEOUT_S, SYSTEMS, Case, ClientSpec, Expect, TopicSpec

__all__ = ["load_case", "load_case_text", "find_case_files", "validate_paths"]

StrPath = str | os.PathLike[str]

#: The ``path`` of text that did not come from a file.
_NO_FILE = "<string>"
_TOP_KEYS = ("name", "description", "system", "cluster", "version", "timeout", "broker_config",
             "disk", "topic", "client", "steps", "expect", "versions", "ci")
#: broker_config keys that are feature levels for ``kafka-storage format --feature`` (the
#: image's entrypoint), not broker properties
FORMAT_FEATURE = "chaos.format.feature."
_ENTRY_KEYS = ("label", "version", "cluster", "broker_config", "expect", "source", "ci")
_SUFFIXES = (".yaml", ".yml")


def load_case(path: StrPath, *, cluster: str | None = None, version: str | None = None) -> Case:
    """The validated case in the file at ``path``; a :class:`CaseError` otherwise.

    ``cluster`` / ``version`` replace the file's (``harness run --cluster``), and the
    whole case is validated against them: the same file can run on ``kafka-zk`` and
    ``kafka-kraft``, or on another Kafka version. The file must be a regular file of at
    most :data:`MAX_CASE_BYTES`.
    """
    shown = str(path)
    try:
        data = read_limited(path, MAX_CASE_BYTES, "the case file")
    except Unreadable as exc:
        raise CaseError(str(exc), path=shown) from None
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
    Like a file, the text may have at most :data:`MAX_CASE_BYTES` (as UTF-8).
    """
    shown = str(path)
    case_path = None if shown == _NO_FILE else Path(path)
    if len(text) > MAX_CASE_BYTES // 4:  # else it cannot have more bytes
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_CASE_BYTES:
            raise CaseError(too_large("the case text", f"{size} bytes", MAX_CASE_BYTES), path=shown)
    try:
        root = parse(text)
        case = _build(root, case_path, cluster, version)
        if cluster is None:  # the file as written: every entry of versions must hold
            for label in case.variants:
                if label != case.variant:
                    _build_entry(root, case_path, label)
        return case
    except CaseError as exc:
        raise CaseError(exc.reason, path=shown, line=exc.line, field=exc.field) from None


def _build_entry(root: Node | None, path: Path | None, label: str) -> Case:
    """The case as the ``versions:`` entry ``label`` runs it; an error that is not in the
    entry's own keys (a step its version lacks) says which entry it is about."""
    try:
        return _build(root, path, None, label)
    except CaseError as exc:
        if exc.field is not None and exc.field.startswith("versions"):
            raise
        raise CaseError(f"{exc.reason} (in the versions entry {label!r})", line=exc.line,
                        field=exc.field) from None


def find_case_files(paths: Iterable[StrPath]) -> list[Path]:
    """The case files among ``paths``, each once; a :class:`CaseError` if a path is missing.

    A directory gives its ``*.yaml``/``*.yml`` files, recursively and sorted,
    except those whose name starts with ``_`` (and it must give at least one); any
    other path is taken as is (loading it reports it if it is not a regular file).
    """
    found: dict[Path, None] = {}
    for raw in paths:
        shown = os.fspath(raw)
        if not shown:
            raise CaseError("an empty path was given (name a case file or a directory of them)")
        path = Path(shown)
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise CaseError(os_reason(exc), path=shown) from None
        if stat.S_ISDIR(mode):
            files = _case_files_in(path)
            if not files:
                raise CaseError("no case files in this directory (case files are *.yaml or "
                                "*.yml, not starting with '_')", path=shown)
            found.update(dict.fromkeys(files))
        else:
            found[path] = None
    return list(found)


def _case_files_in(directory: Path) -> list[Path]:
    """The case files below ``directory``, sorted; symbolic links to directories are not
    followed, an unreadable directory is a CaseError."""
    def fail(exc: OSError) -> None:
        raise CaseError(f"cannot read the directory: {os_reason(exc, 'the directory')}",
                        path=exc.filename or str(directory))

    files = []
    for parent, _, entries in os.walk(directory, onerror=fail):
        for entry in entries:
            path = Path(parent, entry)
            if path.suffix in _SUFFIXES and not entry.startswith("_") and _is_file(path):
                files.append(path)
    return sorted(files)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file; if that cannot be told (no permission), loading
    it will say why."""
    try:
        return path.is_file()
    except OSError:
        return True


def validate_paths(paths: Iterable[StrPath]) -> list[CaseError]:
    """Loads every case file of :func:`find_case_files`; one error per invalid file (a
    path that names no case file raises, as there)."""
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
    entries = f.get("versions", _entries, [])
    if entries and f.has("version"):
        raise error(f.at("version"), "version", "a case with versions: runs the version of each "
                    "entry (expected no top-level version: give it to the entries)")
    if version_override is not None and not version_override.strip():
        raise CaseError("an empty version was given (expected a label of the case's versions: "
                        "entries or a version of its cluster; leave it out for the default)",
                        field="version (override)")
    entry = _select(entries, version_override, f.at("versions")) if entries else None
    cluster_node, cluster_field = f.at("cluster"), "cluster"
    cluster = f.need("cluster", _cluster)
    if entry is not None and entry.has("cluster"):
        cluster_node, cluster_field = entry.at("cluster"), entry.sub("cluster")
        cluster = entry.need("cluster", _cluster)
    if cluster_override is not None:
        if cluster_override not in CLUSTERS:
            raise error(cluster_node, "cluster (override)", f"unknown cluster "
                        f"{cluster_override!r} (known: {', '.join(sorted(CLUSTERS))})")
        cluster = CLUSTERS[cluster_override]
    if cluster.system != system:
        raise error(cluster_node, cluster_field,
                    f"{cluster.name} is a {cluster.system} cluster, but system is {system}")
    if entry is not None:
        version = entry.need("version", _version(cluster))
        version_node = entry.at("version")
    else:
        version = f.get("version", _version(cluster), cluster.default_version) \
            if version_override is None and (cluster_override is None or f.has("version")) \
            else (version_override or cluster.default_version)
        version_node = f.at("version") if f.has("version") else cluster_node
    if version not in cluster.versions:
        raise error(version_node, "version",
                    f"{version!r} is not a version of cluster {cluster.name} "
                    f"(known: {', '.join(cluster.versions)})")
    timeout_s = f.get("timeout", duration, DEFAULT_CASE_TIMEOUT_S)
    broker_config = f.get("broker_config", str_map, MappingProxyType({}))
    if entry is not None and entry.has("broker_config"):
        broker_config = MappingProxyType({**broker_config,
                                          **entry.need("broker_config", str_map)})
    features = [k for k in broker_config if k.startswith(FORMAT_FEATURE)]
    bookie_keys = [k for k in broker_config if k.startswith(BOOKIE_PREFIX)]
    if (features and cluster.mode != "kraft") or (bookie_keys and system != "pulsar"):
        node = entry.at("broker_config") if entry is not None and entry.has("broker_config") \
            else f.at("broker_config")
        if features and cluster.mode != "kraft":
            raise error(node, "broker_config", f"{features[0]}: a feature level is set when a KRaft "
                        f"cluster formats its storage; {cluster.name} is not a KRaft cluster")
        raise error(node, "broker_config", f"{bookie_keys[0]}: a bookie's setting; {system} has no "
                    "bookies")
    disk = f.get("disk", choice(*DISKS, kind="disk"), "plain")
    topic = f.get("topic", lambda n, _: read_topic(n, system, cluster), TopicSpec())
    client = f.get("client", lambda n, _: read_client(n, system), ClientSpec())
    ctx = StepContext(system=system, cluster=cluster, version=version,
                      partitions=topic.partitions, replication_factor=topic.replication_factor,
                      base_dir=path.absolute().parent if path else Path.cwd(),
                      case_timeout_s=timeout_s, isolation_level=client.isolation_level, disk=disk)
    steps = f.need("steps", lambda n, _: read_steps(n, ctx))
    gaps = scenario_gaps(steps, system, client.isolation_level, disk)
    expect = f.get("expect", lambda n, fld: read_expect(n, bool(ctx.armed), fld, gaps), Expect())
    if entry is not None and entry.has("expect"):
        expect = entry.need("expect", lambda n, fld: read_expect(n, bool(ctx.armed), fld, gaps))
    elif entries and not f.has("expect"):
        raise error(entry.node if entry is not None else root, "expect",
                    "each entry of versions needs an expect, or the case one for all")
    return Case(name=case_name, path=path, description=description, system=system,
                cluster=cluster.name, version=version, broker_config=broker_config, disk=disk, topic=topic,
                client=client, steps=steps, expect=expect, timeout_s=timeout_s,
                variant=_label(entry) if entry is not None else None,
                variants=tuple(_label(e) for e in entries),
                source=entry.get("source", string, "") if entry is not None else "",
                outside_ci=frozenset(_label(e) for e in entries if not e.get("ci", boolean, True)),
                in_ci=f.get("ci", boolean, True))


def _entries(node: Node, field: str) -> list[Fields]:
    """The ``versions`` list: mappings of :data:`_ENTRY_KEYS`, each with a version, labels
    unique."""
    if not isinstance(node.value, list) or not node.value:
        raise error(node, field, f"expected a non-empty list of versions (each a mapping with "
                                 f"version and expect), got {show(node.value)}")
    entries: list[Fields] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(node.value):
        entry = Fields(item, f"{field}[{i}]", _ENTRY_KEYS)
        if not entry.has("version"):
            raise error(item, entry.sub("version"), "missing required key")
        label = _label(entry)
        if label in seen:
            raise error(item, entry.sub("label"), f"label {label!r} is also entry "
                        f"{seen[label]}'s: give each entry of one version its own label")
        seen[label] = i
        entries.append(entry)
    return entries


def _label(entry: Fields) -> str:
    """An entry's label: its ``label``, else its version."""
    if entry.has("label"):
        return name(entry.at("label"), entry.sub("label"))
    raw = entry.at("version").value
    return str(raw) if isinstance(raw, str) else name(entry.at("version"), entry.sub("version"))


def _select(entries: list[Fields], wanted: str | None, at: Node) -> Fields:
    """The entry ``wanted`` names (a label, or a version only one entry has); the first
    entry when nothing is wanted."""
    if wanted is None:
        return entries[0]
    labels = [_label(e) for e in entries]
    if wanted in labels:
        return entries[labels.index(wanted)]
    same = [e for e in entries if e.at("version").value == wanted]
    if len(same) == 1:
        return same[0]
    if same:
        raise error(at, "versions", f"{len(same)} entries run version {wanted}: name one by its "
                                    f"label ({', '.join(_label(e) for e in same)})")
    raise error(at, "versions", f"no entry for {wanted!r} (labels: {', '.join(labels)})")


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
