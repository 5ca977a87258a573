"""Typed readers of YAML nodes: each checks one value, and names its field and line on error.

A *reader* is ``(node, field) -> value``; :class:`Fields` reads a mapping
whose keys were checked against the ones allowed. Explicit ``null`` counts
as absent (the default applies).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

from harness.errors import CaseError

from ._yaml import Node, Scalar

__all__ = [
    "Reader", "Fields", "error", "clip", "listing", "show", "suggest", "unknown", "string",
    "boolean",
    "integer", "POSITIVE", "NON_NEGATIVE", "number", "duration", "choice", "name", "str_map",
]

T = TypeVar("T")
D = TypeVar("D")
Reader = Callable[[Node, str], T]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_MAX_NUMBER = 1e9


def error(node: Node, field: str, message: str) -> CaseError:
    """A CaseError about ``node`` (the file's path is added by the loader)."""
    return CaseError(message, line=node.line, field=field or None)


def clip(text: str) -> str:
    """``text``, cut to 40 characters for an error message."""
    return text if len(text) <= 40 else text[:37] + "..."


def listing(names: Sequence[str], limit: int = 12) -> str:
    """``a, b, c``: at most ``limit`` names, each clipped, and how many more there are."""
    shown = ", ".join(clip(n) for n in names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def show(value: object) -> str:
    """A value as an error message quotes it (type and a bounded excerpt)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {clip(value)!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"{type(value).__name__} {value!r}"


def suggest(value: str, choices: Sequence[str]) -> str:
    """``; did you mean 'leader'?`` if a choice is close to ``value``, else ``""``."""
    close = difflib.get_close_matches(value, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown(kind: str, value: str, choices: Sequence[str]) -> str:
    """``unknown role 'leadr' (expected one of: ...); did you mean 'leader'?``."""
    return (f"unknown {kind} {clip(value)!r} (expected one of: {listing(choices, 50)})"
            + suggest(value, choices))


class Fields:
    """A mapping node whose keys are all among ``allowed`` (else: unknown ``kind``)."""

    def __init__(self, node: Node, field: str, allowed: Sequence[str], *,
                 kind: str = "key") -> None:
        if not isinstance(node.value, dict):
            raise error(node, field, f"expected a mapping, got {show(node.value)}")
        for key, line in node.key_lines.items():
            if key not in allowed:
                raise CaseError(unknown(kind, key, allowed), line=line, field=field or None)
        self.node = node
        self.field = field
        self._values: dict[str, Node] = node.value

    def __contains__(self, key: str) -> bool:
        """Whether ``key`` is written (even as null)."""
        return key in self._values

    def has(self, key: str) -> bool:
        """Whether ``key`` has a non-null value."""
        return key in self._values and self._values[key].value is not None

    def sub(self, key: str) -> str:
        """The field name of ``key``: ``topic.partitions``."""
        return f"{self.field}.{key}" if self.field else key

    def at(self, key: str) -> Node:
        """The node of ``key`` if written, else the mapping itself (for error lines)."""
        return self._values.get(key, self.node)

    def get(self, key: str, read: Reader[T], default: D) -> T | D:
        """``key`` read with ``read``, or ``default`` if absent or null."""
        return read(self._values[key], self.sub(key)) if self.has(key) else default

    def need(self, key: str, read: Reader[T]) -> T:
        """``key`` read with ``read``; an error if absent or null."""
        if not self.has(key):
            raise error(self.node, self.sub(key), "missing required key")
        return read(self._values[key], self.sub(key))


def string(node: Node, field: str) -> str:
    """A non-empty string."""
    if not isinstance(node.value, str):
        raise error(node, field, f"expected a string, got {show(node.value)}")
    if not node.value.strip():
        raise error(node, field, "must not be empty")
    return node.value


def boolean(node: Node, field: str) -> bool:
    """``true`` or ``false``."""
    if not isinstance(node.value, bool):
        raise error(node, field, f"expected true or false, got {show(node.value)}")
    return node.value


def integer(minimum: int) -> Reader[int]:
    """A reader of integers >= ``minimum`` (a boolean or a float is not an integer)."""
    def read(node: Node, field: str) -> int:
        value = node.value
        if not isinstance(value, int) or isinstance(value, bool):
            raise error(node, field, f"expected an integer, got {show(value)}")
        if value < minimum:
            raise error(node, field, f"must be at least {minimum}, got {value}")
        return value
    return read


POSITIVE = integer(1)
NON_NEGATIVE = integer(0)


def _bounded(node: Node, field: str, value: float, shown: str) -> float:
    if not 0 < value < _MAX_NUMBER:  # also false for nan
        raise error(node, field, f"must be positive and below {_MAX_NUMBER:g}, got {shown}")
    return float(value)


def number(node: Node, field: str) -> float:
    """A number > 0 (and below a billion: no case waits or sends for 30 years)."""
    value = node.value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise error(node, field, f"expected a number, got {show(value)}")
    return _bounded(node, field, value, repr(value))


def duration(node: Node, field: str) -> float:
    """Seconds > 0: ``500ms``, ``30s``, ``2m``, ``1h`` or a number of seconds."""
    if not isinstance(node.value, str):
        return number(node, field)
    match = _DURATION.fullmatch(node.value)
    if match is None:
        raise error(node, field, f"invalid duration {show(node.value)} "
                                 "(use e.g. 500ms, 30s, 2m, 1h or a number of seconds)")
    return _bounded(node, field, float(match[1]) * _UNIT_S[match[2]], repr(node.value))


def choice(*options: str, kind: str = "value") -> Reader[str]:
    """A reader of one of ``options`` (integers are compared as text: ``acks: 1``)."""
    def read(node: Node, field: str) -> str:
        value = node.value
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise error(node, field, f"expected one of {', '.join(options)}, got {show(value)}")
        if str(value) not in options:
            raise error(node, field, unknown(kind, str(value), options))
        return str(value)
    return read


def name(node: Node, field: str) -> str:
    """A name usable in file names: letters, digits, ``.``, ``_``, ``-``."""
    value = string(node, field)
    if not _NAME.fullmatch(value):
        raise error(node, field, f"invalid name {clip(value)!r} (use letters, digits, '.', "
                                 "'_', '-'; start with a letter or digit)")
    return value


def _text(value: Scalar) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def str_map(node: Node, field: str) -> Mapping[str, str]:
    """A mapping of names to scalar values, the values as text (``true``, ``5000``)."""
    if not isinstance(node.value, dict):
        raise error(node, field, f"expected a mapping, got {show(node.value)}")
    result: dict[str, str] = {}
    for key, item in node.value.items():
        if item.value is None or isinstance(item.value, (list, dict)):
            raise error(item, f"{field}.{key}", f"expected a value, got {show(item.value)}")
        result[key] = _text(item.value)
    return MappingProxyType(result)
