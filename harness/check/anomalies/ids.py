"""The id family: what happened to one message id, judged from its per-id row (its
flags, :mod:`harness.check.anomalies.vocab`, and its transaction's state).

*Committed* (the ids that must be in the recovery read): an id outside a transaction
whose outcome is ok and not written by an aborted transaction, or whose outcome is info
or unacked and that a run-phase poll read; an id of a committed or seen-committed
transaction.

- ``lost-write``: committed and absent from the recovery read.
- ``unseen``: committed, in the recovery read, in no run-phase poll. Informational: does
  not make ``valid`` false.
- ``duplicate``: the id is bound to more than one (topic, partition, position); bindings
  are its acks and all its polls, both phases.
- ``aborted-read``: (G1a) an id written by an aborted transaction and polled by a
  read_committed client; or an id outside a transaction whose outcome is fail (a definite
  failure) and that any client polled (either phase).
- ``precommitted-read``: an id of a transaction that is not aborted, polled by a
  read_committed client (either phase) at a ``t`` more than 1 ms before the transaction's
  commit time, or in a transaction without one.
- ``unexpected``: an id (not null) polled but never invoked.

Also the outcome counts (not anomalies): ids by outcome and by whether the recovery read
has them (docs/checker.md, "Counts").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F

from harness.check.anomalies.columns import any_of, explode_kinds, has, lacks, sums, uniform
from harness.check.anomalies.vocab import (
    F_ABORTED,
    F_DUP,
    F_FAIL,
    F_INFO,
    F_INV,
    F_OK,
    F_RC_READ,
    F_REC,
    F_RU_READ,
    F_RUN,
    FLAG_VALUES,
    POLL,
    PRECOMMIT_SLACK_S,
    TS_ABORTED,
    TS_COMMITTED,
    TS_NAMES,
    TS_NONE,
    TS_SEEN,
    TS_UNKNOWN,
    Details,
    Names,
    pos_of,
)
from harness.check.result import MAX_EXAMPLES, example

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["KINDS", "LOOKUP", "count_rows", "example_of", "loud_flags", "rows"]

KINDS = ("lost-write", "unseen", "duplicate", "aborted-read", "precommitted-read", "unexpected")
#: the kinds whose examples need the id's polls and acks looked up again
LOOKUP = ("duplicate", "unexpected", "aborted-read", "precommitted-read")


def aborted() -> Column:
    """The id was written by an aborted transaction (its own, or ``"txn": "aborted"``)."""
    return has("f", F_ABORTED) | (F.col("ts") == TS_ABORTED)


def conditions() -> tuple[dict[str, Column], Column]:
    """Each kind's condition on a per-id row with its transaction's state (``ts``, ``tx``,
    ``commit_t``), and the aborted-read condition that only read_committed polls meet (its
    example's ``n``)."""
    ts = F.col("ts")
    outside = ts == TS_NONE
    committed = ((outside & ((has("f", F_OK) & lacks("f", F_ABORTED))
                             | (lacks("f", F_OK | F_FAIL) & has("f", F_INFO | F_INV) & has("f", F_RUN))))
                 | ts.isin(TS_COMMITTED, TS_SEEN))
    rc_aborted = aborted() & has("f", F_RC_READ)
    failed_read = (outside & lacks("f", F_ABORTED | F_OK) & has("f", F_FAIL) & has("f", F_RUN | F_REC))
    commit_t = F.col("commit_t")
    precommitted = (ts.isin(TS_COMMITTED, TS_SEEN, TS_UNKNOWN) & has("f", F_RC_READ)
                    & (commit_t.isNull() | (F.col("rc_t") < commit_t - PRECOMMIT_SLACK_S)))
    return {
        "lost-write": committed & lacks("f", F_REC),
        "unseen": committed & lacks("f", F_RUN) & has("f", F_REC),
        "duplicate": has("f", F_DUP),
        "unexpected": has("f", F_RUN | F_REC) & lacks("f", F_INV),
        "aborted-read": rc_aborted | failed_read,
        "precommitted-read": precommitted,
    }, rc_aborted


def rows(mids: DataFrame) -> DataFrame:
    """The anomaly rows of the per-id rows ``mids`` (with their transaction's state)."""
    found_conditions, rc_aborted = conditions()
    found = explode_kinds(mids, found_conditions)
    ack = {c: F.col(f"ack_{c}") for c in ("client", "topic", "part", "pl", "pe", "pb")}
    kind = F.col("kind")
    return found.select(*uniform(kind, {"s": F.col("mid")}, {
        "mid": F.col("mid"), **ack,
        # aborted-read: 1 when only read_committed polls count (an aborted transaction's id)
        "n": F.when(kind == "aborted-read", F.when(rc_aborted, 1).otherwise(0)),
        "tx": F.when(kind == "precommitted-read", F.col("tx")),
        "t2": F.when(kind == "precommitted-read", F.col("commit_t"))}))


def loud_flags(spark: SparkSession) -> tuple[bytes, bytes]:
    """The flag values that can make an id anomalous (for an id sent without a transaction,
    and for one with), worked out by :func:`conditions` themselves over every flag value,
    every transaction state (only ``TS_NONE`` for an id sent without a transaction) and
    every order of the read and commit times, both known or not. A condition over another
    column fails here, not in silence."""
    # (read, commit) times: neither, one, both in each order, far apart (any slack)
    times = [(None, None), (0.0, 1e9), (1e9, 0.0), (None, 0.0), (0.0, None)]
    cases = [(False, TS_NONE, rc_t, commit_t) for rc_t, commit_t in times]
    cases += [(True, ts, rc_t, commit_t) for ts in (TS_NONE, *TS_NAMES) for rc_t, commit_t in times]
    grid = (spark.range(FLAG_VALUES).select(F.col("id").cast("int").alias("f"))
            .crossJoin(spark.createDataFrame(cases, "tx boolean, ts int, rc_t double, commit_t double")))
    # at most 53k rows, as Arrow: no shuffle (a distinct's), no Row objects
    found = grid.where(any_of(conditions()[0])).select("tx", "f").toArrow()
    tx = found["tx"].to_numpy(zero_copy_only=False)
    f = found["f"].to_numpy(zero_copy_only=False)
    flags = [np.zeros(FLAG_VALUES, np.bool_) for _ in range(2)]
    for loud, at in zip(flags, (f[~tx], f[tx]), strict=True):
        loud[at] = True
    return flags[0].tobytes(), flags[1].tobytes()


def count_rows(counts: DataFrame) -> DataFrame:
    """The outcome counts, over the flag counts (with their transactions' states): each
    row counts as ``n`` ids."""
    outcomes = {
        "fail": has("f", F_FAIL) & lacks("f", F_OK),
        "info": has("f", F_INFO) & lacks("f", F_OK | F_FAIL),
        "unacked": has("f", F_INV) & lacks("f", F_OK | F_FAIL | F_INFO),
    }
    counted = {"invoked": has("f", F_INV), "ok": has("f", F_OK), "fail": has("f", F_FAIL),
               "info": has("f", F_INFO), "polled": has("f", F_RUN), "recovered": has("f", F_REC)}
    for outcome, cond in outcomes.items():
        counted[f"{outcome}-present"] = cond & has("f", F_REC)
        counted[f"{outcome}-absent"] = cond & lacks("f", F_REC)
    counted["aborted-uncommitted-read"] = aborted() & has("f", F_RU_READ)
    return sums(counts, counted, weight="n")


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row of this family (docs/checker.md names its fields)."""
    return _EXAMPLES[kind](kind, ex, names, details)


def _acked(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """lost-write, unseen: the id and its acknowledged position."""
    return example(mid=ex.mid, client=names.client(ex.client), topic=names.topic(ex.topic), partition=ex.part,
                   pos=pos_of(ex))


def _bindings(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """duplicate: the id's positions (its polls' and its ack's)."""
    bound = {(r.topic, r.part, pos_of(r)) for r in details.events
             if r.mid == ex.mid and r.code == POLL and r.pl is not None and r.topic is not None}
    bound |= {(names.topics[a.ack_topic], a.ack_part, pos_of(a, "ack_p")) for a in details.acks
              if a.mid == ex.mid and a.ack_pl is not None and a.ack_topic is not None}
    return example(mid=ex.mid, positions=[example(topic=t, partition=p, pos=pos)
                                          for t, p, pos in sorted(bound)[:MAX_EXAMPLES]])


def _first_read(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """unexpected, aborted-read, precommitted-read: the id's first such poll."""
    rc_only = kind == "precommitted-read" or (kind == "aborted-read" and ex.n == 1)
    reads = [r for r in details.events if r.mid == ex.mid and r.code == POLL
             and (not rc_only or r.client_h in names.rc_clients)
             and (kind != "precommitted-read" or ex.t2 is None
                  or (r.t is not None and r.t < ex.t2 - PRECOMMIT_SLACK_S))]
    first = min(reads, key=lambda r: r.seq)
    where = {"client": first.client, "phase": first.phase, "topic": first.topic, "partition": first.part,
             "pos": pos_of(first)}
    if kind == "precommitted-read":
        return example(mid=ex.mid, tx=ex.tx, **where, t=first.t, commit_t=ex.t2)
    return example(mid=ex.mid, **where)


_EXAMPLES: Mapping[str, Callable[[str, Any, Names, Details], dict[str, Any]]] = {
    "lost-write": _acked, "unseen": _acked, "duplicate": _bindings, "unexpected": _first_read,
    "aborted-read": _first_read, "precommitted-read": _first_read}
