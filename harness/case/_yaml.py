"""YAML text to a tree of :class:`Node` (values with line numbers), or a CaseError.

The tree is built straight from PyYAML's parser events, iteratively: no recursion, so
nesting is bounded by :data:`MAX_DEPTH` (not by the C stack or Python's recursion limit),
and aliases share one node (no blow-up). Only the core scalar types (str, int, float,
bool, null) are constructed, mapping keys are taken as written, duplicate keys and
recursive aliases are errors. Every PyYAML failure becomes a :class:`CaseError` with the
line it points at.

The events come from libyaml when PyYAML has it (``yaml.CSafeLoader``: 10 to 20 times
faster than the pure-Python parser, which takes seconds for a few hundred KB), else from
the pure-Python parser. libyaml words syntax errors differently; an error in the first
:data:`_REWORD_CHARS` of the text is worded as the pure-Python parser words it (it parses
that part again), as the documentation shows them. libyaml also accepts a few texts the
pure-Python parser rejects (a tab after a value, ``?`` keys in flow mappings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import ComposerError

from harness.errors import CaseError

__all__ = ["MAX_DEPTH", "Node", "Scalar", "parse"]

Scalar = str | int | float | bool | None

#: How deeply lists and mappings may nest (a case needs about 5 levels).
MAX_DEPTH = 100

_TAG = "tag:yaml.org,2002:"
_CORE_SCALARS = frozenset(_TAG + t for t in ("str", "int", "float", "bool", "null"))
#: Implicit YAML 1.1 types a case never means (``2024-01-01``, ``<<``, ``=``): kept as text.
_AS_TEXT = frozenset(_TAG + t for t in ("timestamp", "merge", "value"))
_LONG = 2**63
#: How much text before a libyaml syntax error is parsed again to word it as documented.
_REWORD_CHARS = 32 * 1024
#: YAML's line breaks (as both parsers count lines).
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_Loader = yaml.SafeLoader | yaml.CSafeLoader
_FAST: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)


@dataclass(frozen=True, eq=False)
class Node:
    """A YAML value and the 1-based line it starts on; mappings also keep their keys' lines."""

    value: Scalar | list[Node] | dict[str, Node]
    line: int
    key_lines: Mapping[str, int] = field(default_factory=dict)


def parse(text: str) -> Node | None:
    """The single YAML document in ``text`` (None if it is empty)."""
    try:
        _check_printable(text)
        if _FAST is None:
            return _build(yaml.SafeLoader, text)
        try:
            return _build(_FAST, text)
        except ComposerError:
            raise  # raised by _events, worded alike for both parsers
        except yaml.MarkedYAMLError as fast_error:
            raise _reworded(fast_error, text) from None
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None


def _reworded(fast_error: yaml.MarkedYAMLError, text: str) -> yaml.YAMLError:
    """The pure-Python parser's error for the text up to two lines past libyaml's error, if
    that text is short and the error is before its end; else ``fast_error``."""
    mark: Any = fast_error.problem_mark or fast_error.context_mark
    if mark is None:
        return fast_error
    end = len(text)
    for number, match in enumerate(_BREAK.finditer(text, 0, _REWORD_CHARS + 1)):
        if number == mark.line + 2:
            end = match.end()
            break
    if end > _REWORD_CHARS:
        return fast_error
    try:
        _events(yaml.SafeLoader(text[:end]))
    except yaml.YAMLError as exc:
        slow: Any = None
        if isinstance(exc, yaml.MarkedYAMLError):
            slow = exc.problem_mark or exc.context_mark
        # Near the cut, the error may be about the cut (e.g. an unexpected end of stream).
        if end == len(text) or (slow is not None and slow.line <= mark.line + 1):
            return exc
    except CaseError:  # nested too deeply: libyaml would have said so first
        pass
    return fast_error  # (only libyaml rejects the text)


def _check_printable(text: str) -> None:
    """The pure-Python reader's check, before libyaml sees text it would word differently."""
    match = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if match:
        raise yaml.reader.ReaderError("<string>", match.start(), ord(match.group()), "unicode",
                                      "special characters are not allowed")


def _build(loader_class: type[_Loader], text: str) -> Node | None:
    """Two passes, so that errors come in the order PyYAML's composer gives them: first the
    text's syntax and structure (:func:`_events`), then its values (:class:`_Builder`)."""
    loader = loader_class(text)
    try:
        events = _events(loader)
        return None if len(events) == 2 else _Builder(loader, events).root()
    finally:
        loader.dispose()


def _events(loader: _Loader) -> list[yaml.Event]:
    """The events of the text, which must be one document nested at most :data:`MAX_DEPTH`
    deep, each anchor defined once and before its aliases."""
    events: list[yaml.Event] = []
    anchors: dict[str, Any] = {}  # where each anchor was defined
    depth = 0
    root: Any = None  # where the document's root node starts
    while True:
        event = loader.get_event()
        assert isinstance(event, yaml.Event)  # the parser ends the stream before it runs out
        events.append(event)
        if isinstance(event, yaml.StreamEndEvent):
            return events
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise ComposerError(None, None, f"found undefined alias {event.anchor!r}",
                                    _mark(event))
        elif isinstance(event, yaml.NodeEvent):
            if root is None:
                root = _mark(event)
            anchor = event.anchor
            if anchor is not None:
                if anchor in anchors:
                    raise ComposerError(f"found duplicate anchor {anchor!r}; first occurrence",
                                        anchors[anchor], "second occurrence", _mark(event))
                anchors[anchor] = _mark(event)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise CaseError(f"the YAML is nested too deeply (at most {MAX_DEPTH} "
                                    "levels)", line=_line(event))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.DocumentStartEvent) and root is not None:
            raise ComposerError("expected a single document in the stream", root,
                                "but found another document", _mark(event))


def _syntax_error(exc: yaml.YAMLError, text: str) -> CaseError:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        return CaseError(f"invalid YAML: unacceptable character {char}", line=line)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        message = f"invalid YAML: {exc.problem or exc.context}"
        if exc.context and exc.context_mark and exc.problem:
            message += f" ({exc.context} on line {exc.context_mark.line + 1})"
        return CaseError(message, line=mark.line + 1 if mark else 1)
    return CaseError(f"invalid YAML: {exc}", line=1)


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


def _mark(event: yaml.Event) -> Any:
    """Where ``event`` starts (a pure-Python or a libyaml mark: both have ``line``)."""
    return event.start_mark


def _line(event: yaml.Event) -> int:
    mark = _mark(event)
    return mark.line + 1 if mark else 1


@dataclass
class _Open:
    """A list or mapping whose end event has not come yet."""

    line: int
    anchor: str | None
    items: list[Node] | None  # a list's; None for a mapping
    values: dict[str, Node] = field(default_factory=dict)
    key_lines: dict[str, int] = field(default_factory=dict)
    key: str | None = None  # a mapping's key whose value comes next

    def add(self, node: Node) -> None:
        if self.items is not None:
            self.items.append(node)
        else:
            assert self.key is not None
            self.values[self.key] = node
            self.key = None

    def close(self) -> Node:
        if self.items is not None:
            return Node(self.items, self.line)
        return Node(self.values, self.line, self.key_lines)


@dataclass
class _Raw:
    """An anchored scalar as written (an alias may use it as a key or as a value)."""

    event: yaml.ScalarEvent
    tag: str
    node: Node | None = None  # constructed on first use as a value


class _Builder:
    """Builds the tree of one document from its checked events, without recursion."""

    def __init__(self, loader: _Loader, events: list[yaml.Event]) -> None:
        self._loader = loader  # resolves tags and constructs scalars
        self._events = iter(events[2:])  # after the stream and the document start
        self._anchors: dict[str, Node | _Raw] = {}  # completed nodes and anchored scalars
        self._open: set[str] = set()  # anchors of lists and mappings not yet complete

    def root(self) -> Node:
        stack: list[_Open] = []
        for event in self._events:
            if isinstance(event, yaml.CollectionEndEvent):
                frame = stack.pop()
                node = frame.close()
                if frame.anchor is not None:
                    self._open.discard(frame.anchor)
                    self._anchors[frame.anchor] = node
            elif stack and stack[-1].items is None and stack[-1].key is None:
                self._key(stack[-1], event)
                continue
            elif isinstance(event, yaml.AliasEvent):
                node = self._alias(event)
            elif isinstance(event, yaml.ScalarEvent):
                tag = self._resolve(event, yaml.ScalarNode, event.value)
                node = self._scalar(event, tag)
                if event.anchor is not None:
                    self._anchors[event.anchor] = _Raw(event, tag, node)
            else:
                assert isinstance(event, yaml.CollectionStartEvent)
                stack.append(self._start(event))
                continue
            if not stack:
                return node
            stack[-1].add(node)
        raise AssertionError("the events end inside the document")  # _events checked them

    def _start(self, event: yaml.CollectionStartEvent) -> _Open:
        line = _line(event)
        is_list = isinstance(event, yaml.SequenceStartEvent)
        kind = "seq" if is_list else "map"
        tag = self._resolve(event, yaml.SequenceNode if is_list else yaml.MappingNode, None)
        if tag != _TAG + kind:
            raise CaseError(f"unsupported YAML tag {_short(tag)}", line=line)
        if event.anchor is not None:
            self._open.add(event.anchor)
        return _Open(line, event.anchor, [] if is_list else None)

    def _key(self, frame: _Open, event: yaml.Event) -> None:
        line = _line(event)
        if isinstance(event, yaml.AliasEvent):
            raw = self._anchors.get(str(event.anchor))
            if not isinstance(raw, _Raw):
                raise CaseError("mapping keys must be plain names, not lists or mappings", line=line)
            key, tag = raw.event.value, raw.tag
        elif isinstance(event, yaml.ScalarEvent):
            key, tag = event.value, self._resolve(event, yaml.ScalarNode, event.value)
            if event.anchor is not None:
                self._anchors[event.anchor] = _Raw(event, tag)
        else:
            raise CaseError("mapping keys must be plain names, not lists or mappings", line=line)
        if tag == _TAG + "merge":
            raise CaseError("YAML merge keys (<<) are not supported", line=line)
        if key in frame.key_lines:
            raise CaseError(f"duplicate key {key!r} (first on line {frame.key_lines[key]})",
                            line=line)
        frame.key_lines[key] = line
        frame.key = key

    def _alias(self, event: yaml.AliasEvent) -> Node:
        found = self._anchors.get(str(event.anchor))
        if found is None:  # _events checked that the anchor came before: it is still open
            raise CaseError("recursive YAML alias", line=_line(event))
        if isinstance(found, Node):
            return found
        if found.node is None:
            found.node = self._scalar(found.event, found.tag)
        return found.node

    def _resolve(self, event: yaml.ScalarEvent | yaml.CollectionStartEvent,
                 kind: type[yaml.Node], value: str | None) -> str:
        tag: str | None = event.tag
        if tag is None or tag == "!":
            tag = self._loader.resolve(kind, value, event.implicit)
        return str(tag)

    def _scalar(self, event: yaml.ScalarEvent, tag: str) -> Node:
        line = _line(event)
        if tag in _AS_TEXT:
            return Node(str(event.value), line)
        if tag not in _CORE_SCALARS:
            raise CaseError(f"unsupported YAML tag {_short(tag)}", line=line)
        raw = yaml.ScalarNode(tag, event.value, _mark(event), style=event.style)
        try:
            value: Scalar = self._loader.construct_object(raw)
        # PyYAML's scalar constructors fail with assorted built-in errors on
        # explicitly tagged nonsense (``!!int ""``, ``!!bool maybe``).
        except Exception:
            raise CaseError(f"invalid {_short(tag)} value {event.value[:40]!r}",
                            line=line) from None
        if isinstance(value, int) and not -_LONG <= value < _LONG:
            raise CaseError("integer out of range (must fit a 64-bit long)", line=line)
        return Node(value, line)
