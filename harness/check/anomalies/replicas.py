"""The replica family: what the replicas' own logs say, read after the recovery phase
(``replicas/*.jsonl``: every record each node's log holds, with its position).

- ``replica-divergence``: the replica records at one position name more than one id (a
  subset of inconsistent-offsets). Counted per position.

Judged in the position kernel's pass (:mod:`harness.check.anomalies.positions`), on the
rows tagged as replica records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.check.anomalies.arrays import TAG_REPLICA, Columns, distinct
from harness.check.anomalies.vocab import REPLICA, Details, Names, place_of
from harness.check.result import example

__all__ = ["KINDS", "LOOKUP", "divergent", "example_of"]

KINDS = ("replica-divergence",)
#: the kinds whose examples need the records at their position looked up again
LOOKUP = KINDS


def divergent(v: Columns, ok: Columns, starts: np.ndarray) -> np.ndarray:
    """Per position (rows in position order, from ``starts``): whether its replica records
    name more than one id."""
    return distinct(v["mh"], ok["mh"] & (v["tag"] == TAG_REPLICA), starts)


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row: the position and each node's id there."""
    place = place_of(ex)
    found = sorted({(r.node, r.mid) for r in details.events
                    if r.code == REPLICA and r.mid is not None
                    and (r.topic_h, r.part, r.pl, r.pe, r.pb) == place}, key=_none_first)
    return example(topic=names.topic(ex.topic), partition=ex.part, pos=(ex.pl, ex.pe, ex.pb),
                   replicas=[{"node": node, "mid": mid} for node, mid in found])


def _none_first(item: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is not None, x if x is not None else "") for x in item)
