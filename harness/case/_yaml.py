"""YAML text to a tree of :class:`Node` (values with line numbers), or a CaseError.

PyYAML composes the text into nodes that keep their marks; only the core
scalar types (str, int, float, bool, null) are constructed, mapping keys are
taken as written, duplicate keys and recursive aliases are errors. Every
PyYAML failure becomes a :class:`CaseError` with the line it points at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from harness.errors import CaseError

__all__ = ["Node", "Scalar", "parse"]

Scalar = str | int | float | bool | None

_TAG = "tag:yaml.org,2002:"
_CORE_SCALARS = frozenset(_TAG + t for t in ("str", "int", "float", "bool", "null"))
#: Implicit YAML 1.1 types a case never means (``2024-01-01``, ``<<``, ``=``): kept as text.
_AS_TEXT = frozenset(_TAG + t for t in ("timestamp", "merge", "value"))
_LONG = 2**63


@dataclass(frozen=True, eq=False)
class Node:
    """A YAML value and the 1-based line it starts on; mappings also keep their keys' lines."""

    value: Scalar | list[Node] | dict[str, Node]
    line: int
    key_lines: Mapping[str, int] = field(default_factory=dict)


def parse(text: str) -> Node | None:
    """The single YAML document in ``text`` (None if it is empty)."""
    try:
        return _compose(text)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None


def _compose(text: str) -> Node | None:
    loader = yaml.SafeLoader(text)  # raises ReaderError already on unprintable characters
    try:
        root = loader.get_single_node()
        return None if root is None else _Converter(loader).convert(root)
    except RecursionError:
        raise CaseError("the YAML is nested too deeply", line=loader.line + 1) from None
    finally:
        loader.dispose()


def _syntax_error(exc: yaml.YAMLError, text: str) -> CaseError:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return CaseError(f"invalid YAML: unacceptable character #x{exc.character:04x}", line=line)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        message = f"invalid YAML: {exc.problem or exc.context}"
        if exc.context and exc.context_mark and exc.problem:
            message += f" ({exc.context} on line {exc.context_mark.line + 1})"
        return CaseError(message, line=mark.line + 1 if mark else 1)
    return CaseError(f"invalid YAML: {exc}", line=1)


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


class _Converter:
    """Converts composed nodes; aliases share one converted node (no blow-up)."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self._loader = loader
        self._done: dict[int, Node] = {}
        self._open: set[int] = set()

    def convert(self, raw: yaml.Node) -> Node:
        key = id(raw)
        if key in self._done:
            return self._done[key]
        line = raw.start_mark.line + 1
        if key in self._open:
            raise CaseError("recursive YAML alias", line=line)
        self._open.add(key)
        if isinstance(raw, yaml.ScalarNode):
            node = Node(self._scalar(raw, line), line)
        elif isinstance(raw, yaml.SequenceNode):
            self._check_tag(raw, "seq", line)
            node = Node([self.convert(item) for item in raw.value], line)
        else:
            self._check_tag(raw, "map", line)
            node = self._mapping(raw, line)
        self._open.discard(key)
        self._done[key] = node
        return node

    def _mapping(self, raw: yaml.Node, line: int) -> Node:
        values: dict[str, Node] = {}
        key_lines: dict[str, int] = {}
        for key_node, value_node in raw.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise CaseError("mapping keys must be plain names, not lists or mappings",
                                line=key_line)
            key = key_node.value
            if key_node.tag == _TAG + "merge":
                raise CaseError("YAML merge keys (<<) are not supported", line=key_line)
            if key in key_lines:
                raise CaseError(f"duplicate key {key!r} (first on line {key_lines[key]})",
                                line=key_line)
            key_lines[key] = key_line
            values[key] = self.convert(value_node)
        return Node(values, line, key_lines)

    def _scalar(self, raw: yaml.ScalarNode, line: int) -> Scalar:
        if raw.tag in _AS_TEXT:
            return str(raw.value)
        if raw.tag not in _CORE_SCALARS:
            raise CaseError(f"unsupported YAML tag {_short(raw.tag)}", line=line)
        try:
            value: Scalar = self._loader.construct_object(raw)
        # PyYAML's scalar constructors fail with assorted built-in errors on
        # explicitly tagged nonsense (``!!int ""``, ``!!bool maybe``).
        except Exception:
            raise CaseError(f"invalid {_short(raw.tag)} value {raw.value[:40]!r}",
                            line=line) from None
        if isinstance(value, int) and not -_LONG <= value < _LONG:
            raise CaseError("integer out of range (must fit a 64-bit long)", line=line)
        return value

    @staticmethod
    def _check_tag(raw: yaml.Node, kind: str, line: int) -> None:
        if raw.tag != _TAG + kind:
            raise CaseError(f"unsupported YAML tag {_short(raw.tag)}", line=line)
