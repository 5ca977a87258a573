"""The registry of anomalies: what the checker reports and what a case's ``expect`` may bound.

One row per anomaly: its name (Jepsen's, where Jepsen has one), its family, what it is
counted per, and whether it makes a run invalid by itself. A leaf, so that the case
validator (:mod:`harness.case`), the checker (:mod:`harness.check`), the report and the
reference checker (:mod:`harness.testing.reference_checker`) read one list without
importing each other. Each family is one module of :mod:`harness.check.anomalies`, whose
docstring defines its anomalies (the text ``docs/checker.md``'s table is checked against:
``tests/unit/check/test_registry.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANOMALIES", "FAMILIES", "INFORMATIONAL", "REGISTRY", "Anomaly", "anomaly"]


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: ``family`` is the module of :mod:`harness.check.anomalies` that defines
    and finds it; ``per`` what one of it counts (an id, a position, a poll...);
    ``invalidates``: whether it makes a run invalid by itself (an informational one is
    reported, and a case may bound it)."""

    name: str
    family: str
    per: str
    invalidates: bool = True


#: every anomaly, in report order
REGISTRY = (
    Anomaly("lost-write", "ids", "id"),
    Anomaly("unseen", "ids", "id", invalidates=False),
    Anomaly("duplicate", "ids", "id"),
    Anomaly("inconsistent-offsets", "positions", "position"),
    Anomaly("replica-divergence", "replicas", "position"),
    Anomaly("under-replicated", "bookies", "entry"),
    Anomaly("under-write-quorum", "bookies", "entry", invalidates=False),
    Anomaly("bookie-divergence", "bookies", "entry"),
    Anomaly("past-closed-end", "bookies", "id"),
    Anomaly("nonmonotonic-send", "sequences", "send"),
    Anomaly("nonmonotonic-poll", "sequences", "poll"),
    Anomaly("poll-skip", "sequences", "poll"),
    Anomaly("int-nonmonotonic-send", "sequences", "send"),
    Anomaly("int-nonmonotonic-poll", "sequences", "poll"),
    Anomaly("int-poll-skip", "sequences", "poll"),
    Anomaly("truncation-skip", "positions", "position"),
    Anomaly("silent-reread", "sequences", "poll"),
    Anomaly("key-order", "key_order", "poll"),
    Anomaly("aborted-read", "ids", "id"),
    Anomaly("torn-transaction", "transactions", "transaction"),
    Anomaly("precommitted-read", "ids", "id"),
    Anomaly("eos-duplicate", "copies", "input id"),
    Anomaly("eos-loss", "copies", "input id"),
    Anomaly("unexpected", "ids", "id"),
)

#: the anomaly names, in report order
ANOMALIES = tuple(a.name for a in REGISTRY)
#: the families, in the order of their first anomaly
FAMILIES = tuple(dict.fromkeys(a.family for a in REGISTRY))
#: anomalies that are reported but do not make a run invalid by themselves (a case observes
#: them unless it bounds them)
INFORMATIONAL = frozenset(a.name for a in REGISTRY if not a.invalidates)
_BY_NAME = {a.name: a for a in REGISTRY}


def anomaly(name: str) -> Anomaly:
    """The registry's row of ``name``; a KeyError for an unknown name."""
    return _BY_NAME[name]
