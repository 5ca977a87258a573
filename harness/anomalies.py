"""The anomaly names: what the checker reports and what a case's ``expect`` may bound.

A leaf, so that the case validator (:mod:`harness.case`) and the checker
(:mod:`harness.check`) read one list without importing each other. The
definitions are in ``docs/checker.md``.
"""

from __future__ import annotations

__all__ = ["ANOMALIES", "INFORMATIONAL"]

#: Anomaly names (Jepsen's), in report order.
ANOMALIES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "replica-divergence",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "int-nonmonotonic-send",
    "int-nonmonotonic-poll",
    "int-poll-skip",
    "truncation-skip",
    "silent-reread",
    "key-order",
    "aborted-read",
    "torn-transaction",
    "precommitted-read",
    "eos-duplicate",
    "eos-loss",
    "unexpected",
)

#: Anomalies that are reported but do not make a run invalid by themselves (a case observes
#: them unless it bounds them).
INFORMATIONAL = frozenset({"unseen"})
