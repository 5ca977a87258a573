"""What a check returns: anomaly counts, a few examples of each, outcome counts, and what
it could not use (lines skipped, sends without a message id), per file and reason.

Shared by the Spark job and the reference checker (:mod:`harness.testing.reference_checker`)
so both render results identically: the anomaly names, the count names, the
shape of an example and the position fields in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.anomalies import ANOMALIES, INFORMATIONAL

__all__ = [
    "ANOMALIES",
    "COUNTS",
    "INFORMATIONAL",
    "MAX_EXAMPLES",
    "MAX_TRANSACTIONS",
    "UNUSED",
    "CheckResult",
    "example",
    "make_result",
    "position_fields",
    "skipped_lines",
]

#: What a check could not use (:meth:`harness.check.lines.FileTally.counts`): the history
#: lines (not blank), those of them that could not be read and were skipped, the sends
#: without a message id (not judged) and the acknowledged ones among them (``ok``), the
#: replica lines (not blank) and those of them skipped.
UNUSED = ("lines", "skipped", "unjudged", "unjudged-ok", "replica-lines", "replica-skipped")
#: Outcome counts (not anomalies), in report order; then :data:`UNUSED`.
COUNTS = (
    "invoked",
    "ok",
    "fail",
    "info",
    "polled",
    "recovered",
    "fail-present",
    "fail-absent",
    "info-present",
    "info-absent",
    "unacked-present",
    "unacked-absent",
    "txn-committed",
    "txn-aborted",
    "txn-unknown",
    "txn-seen-committed",
    "aborted-uncommitted-read",
    "eos-copied",
    *UNUSED,
)

#: Examples kept per anomaly.
MAX_EXAMPLES = 5
#: Transactions listed in a result (the counts cover them all).
MAX_TRANSACTIONS = 200

Position = tuple[int, int, int]


@dataclass(frozen=True)
class CheckResult:
    """Anomaly counts, up to :data:`MAX_EXAMPLES` examples per anomaly, outcome counts."""

    anomalies: dict[str, int]
    examples: dict[str, list[dict[str, Any]]]
    counts: dict[str, int]
    #: latency and availability (:mod:`harness.check.latency`; None: no timed invoke). Not
    #: part of equality: the reference checker, an oracle of the anomalies, has none.
    latency: dict[str, Any] | None = field(default=None, compare=False)
    #: the run's transactions (None: it has none): ``{"total": n, "shown": [...]}``, up to
    #: :data:`MAX_TRANSACTIONS` of them, those with an anomaly first. Not part of equality.
    transactions: dict[str, Any] | None = field(default=None, compare=False)
    #: what the check could not use, per file and reason (:class:`harness.check.lines.FileTally`):
    #: ``{"history/producer-0.jsonl": {"not a JSON object": 2, "ok without a message id": 147}}``;
    #: files with nothing to report are left out (a result of before it: empty)
    unread: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when no anomaly other than the informational ones was found."""
        return not any(n for kind, n in self.anomalies.items() if kind not in INFORMATIONAL)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "valid": self.valid,
            "anomalies": dict(self.anomalies),
            "examples": {kind: [dict(e) for e in exs] for kind, exs in self.examples.items()},
            "counts": dict(self.counts),
            "latency": self.latency,
            "transactions": self.transactions,
            "unread": {name: dict(reasons) for name, reasons in self.unread.items()},
        }


def make_result(anomalies: Mapping[str, int], examples: Mapping[str, list[dict[str, Any]]],
                counts: Mapping[str, int],
                unread: Mapping[str, Mapping[str, int]] | None = None) -> CheckResult:
    """A result with every anomaly and count name present (zero / empty when not found), and
    what each file could not give (``unread``: :meth:`harness.check.lines.FileTally.by_file`)."""
    return CheckResult(
        anomalies={kind: int(anomalies.get(kind, 0)) for kind in ANOMALIES},
        examples={kind: list(examples.get(kind, []))[:MAX_EXAMPLES] for kind in ANOMALIES},
        counts={name: int(counts.get(name, 0)) for name in COUNTS},
        unread={name: dict(reasons) for name, reasons in (unread or {}).items()},
    )


def skipped_lines(counts: Mapping[str, int], first: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """The warning that the check could not use some lines (from a check's ``counts``):
    history lines skipped, sends without a message id (not judged; the acknowledged ones
    among them named), replica lines skipped; or None when it used them all. ``first``:
    where the first of each are, by count name (``skipped``, ``unjudged``,
    ``replica-skipped``; :func:`harness.check.inputs.first_unread`)."""
    first = first or {}
    n = {name: int(counts.get(name, 0)) for name in UNUSED}
    parts = []
    if n["skipped"]:
        parts.append(("skipped", f"{n['skipped']} of {n['lines']} history lines could not be read and were "
                                 "skipped"))
    if n["unjudged"]:
        parts.append(("unjudged", f"{n['unjudged']} sends (invoke, ok, fail, info) have no message id and "
                                  f"were not judged, {n['unjudged-ok'] or 'none'} of them acknowledged "
                                  "writes"))
    if n["replica-skipped"]:
        parts.append(("replica-skipped", f"{n['replica-skipped']} of {n['replica-lines']} replica lines "
                                         "could not be read and were skipped"))
    if not parts:
        return None
    return ". ".join(text + (f"; the first: {', '.join(first[name])}" if first.get(name) else "")
                     for name, text in parts)


def position_fields(pos: Position) -> dict[str, int]:
    """A position key (see ``harness.history.position_key``) as event fields.

    Kafka keys are ``(-1, offset, -1)``; Pulsar keys are ``(ledger, entry, batch)``.
    """
    first, second, third = pos
    if first == -1:
        return {"offset": second}
    return {"ledger": first, "entry": second, "batch": third}


def example(**fields: Any) -> dict[str, Any]:
    """An example dict: None values dropped, ``pos`` spread into position fields, nested dicts too."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key == "pos":
            out.update(position_fields(value))
        elif isinstance(value, dict):
            out[key] = example(**value)
        else:
            out[key] = value
    return out
