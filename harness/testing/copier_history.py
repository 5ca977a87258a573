"""Synthetic copier histories (docs/checker.md "Exactly once") with a known answer.

``generate(run_dir, seed, inputs=300, duplicates=2, losses=3)`` writes the history of a
copier run as the harness's clients write it, and returns the anomaly and count figures
a correct checker reports for it.

The model. A producer ``input`` sends ``inputs`` records to three partitions of topic
``in`` (all acknowledged, in ``invokes``/``oks`` lines). A copier reads them in order
(``copier-in``: read_committed ``polls`` lines, a ``rebalance`` reset at the start) and
copies each batch of up to ``size`` records into topic ``out`` (same partition) in one
transaction: its sends carry ``srcs``; each transaction ends one of these ways:

* committed (its commit returned; some after a first commit call that timed out: a retry);
* aborted (an abort returned): the copier rewinds to its committed offsets (a ``rewind``
  reset per partition) and copies the records again;
* unknown and never seen (a commit that timed out and a restart: the broker aborted it):
  a rewind and a copy again, as after an abort;
* unknown and seen (a commit that timed out, but the transaction committed: a
  read_committed reader saw it): the copier's committed offsets include it, so no copy again.

Each transaction also takes a marker offset in each output partition it wrote. A
read_committed reader ``reader`` reads both topics (run phase) and the read_committed
recovery reader ``recovery`` reads every committed record of both.

Injections: ``duplicates`` input records copied a second time in a committed transaction
(each one ``eos-duplicate``); ``losses`` input records the copier skips (never copied)
below records it copies later in the same partition (each one ``eos-loss``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["generate"]

_PARTITIONS = 3


class _Writer:
    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}
        self.t = 1_000.0

    def line(self, client: str, type_: str, **fields: Any) -> None:
        self.t += 0.001
        event = {"type": type_, "client": client, "t": round(self.t, 6), "m": round(self.t, 6), **fields}
        self.files.setdefault(client, []).append(json.dumps(event, separators=(",", ":")) + "\n")


def generate(run_dir: str | Path, seed: int, *, inputs: int = 300, size: int = 10,
             duplicates: int = 0, losses: int = 0) -> dict[str, Any]:
    """Writes ``run_dir/history``; returns ``{"anomalies": {...}, "counts": {...}}`` with
    the non-zero anomalies and the ``eos-copied``, ``txn-*`` counts."""
    rng = random.Random(seed)
    w = _Writer()
    # the input: ids in0..in{n-1}, each to a random partition, acknowledged in order
    log_in: list[list[str]] = [[] for _ in range(_PARTITIONS)]
    ids = [f"in{i}" for i in range(inputs)]
    for lo in range(0, inputs, 50):
        batch = ids[lo:lo + 50]
        parts = [rng.randrange(_PARTITIONS) for _ in batch]
        w.line("input", "invokes", topic="in", mids=batch, keys=None, partitions=None)
        offsets = []
        for mid, p in zip(batch, parts, strict=True):
            offsets.append(len(log_in[p]))
            log_in[p].append(mid)
        w.line("input", "oks", topic="in", mids=batch, partitions=parts, offsets=offsets)
    # inputs the copier skips: not the last record of a partition (a later one is copied)
    candidates = [log[i] for log in log_in for i in range(1, len(log) - 1)]
    skipped = set(rng.sample(candidates, losses))
    # the copier reads the partitions in turn, a batch of up to `size` at a time
    w.line("copier-in", "reset", phase="run", topic="in", partition=None, reason="rebalance")
    log_out: list[list[str | None]] = [[] for _ in range(_PARTITIONS)]  # None: a marker
    committed_at = [0] * _PARTITIONS  # the copier's committed offset per input partition
    position = [0] * _PARTITIONS
    states = {"committed": 0, "aborted": 0, "unknown": 0, "seen": 0}
    copied: dict[str, int] = {}  # input id -> visible copies
    visible: list[tuple[str, int, int]] = []  # (copy id, partition, offset) of committed copies
    dup_left = duplicates
    tx_n = seq = 0
    turn = 0
    while any(position[p] < len(log_in[p]) for p in range(_PARTITIONS)):
        p = turn % _PARTITIONS
        turn += 1
        if position[p] >= len(log_in[p]):
            continue
        take = log_in[p][position[p]:position[p] + rng.randint(1, size)]
        w.line("copier-in", "polls", phase="run", topic="in", isolation="read_committed",
               partitions=[p] * len(take), offsets=list(range(position[p], position[p] + len(take))),
               mids=take, tss=[0] * len(take), keys=None)
        position[p] += len(take)
        srcs = [m for m in take if m not in skipped]
        extra = None
        if dup_left and copied and rng.random() < 0.3:  # a committed input copied once more
            extra = rng.choice(sorted(m for m in copied if m not in srcs))
            srcs.append(extra)
        if not srcs:
            committed_at[p] = position[p]
            continue
        tx_n += 1
        tx = f"copier.t{tx_n}"
        end = rng.choices(["committed", "aborted", "unknown", "seen", "retried"], [6, 2, 1, 1, 1])[0]
        if extra is not None:
            end = "committed"  # an injected duplicate is a visible one
        copies = [f"copier-{seq + i + 1}" for i in range(len(srcs))]
        seq += len(copies)
        w.line("copier", "txn", tx=tx, action="begin", status="ok")
        w.line("copier", "invokes", topic="out", tx=tx, mids=copies, keys=None,
               partitions=None, srcs=srcs)
        out_offsets = []
        for _ in copies:
            out_offsets.append(len(log_out[p]))
            log_out[p].append(None)  # filled below once the outcome is known
        w.line("copier", "oks", topic="out", mids=copies, partitions=[p] * len(copies), offsets=out_offsets)
        log_out[p].append(None)  # the transaction's marker
        if end in ("committed", "seen", "retried"):
            if end == "retried":
                w.line("copier", "txn", tx=tx, action="commit", status="invoke")
                w.line("copier", "txn", tx=tx, action="commit", status="info", error="_TIMED_OUT")
            w.line("copier", "txn", tx=tx, action="commit", status="invoke")
            status = "info" if end == "seen" else "ok"
            w.line("copier", "txn", tx=tx, action="commit", status=status,
                   **({"error": "_TIMED_OUT"} if status == "info" else {}))
            if end == "seen":
                w.line("copier", "meta", restart=f"after {tx}")
            states["seen" if end == "seen" else "committed"] += 1
            for copy, src, off in zip(copies, srcs, out_offsets, strict=True):
                log_out[p][off] = copy
                visible.append((copy, p, off))
                copied[src] = copied.get(src, 0) + 1
            committed_at[p] = position[p]
            if extra is not None:
                dup_left -= 1
            continue
        if end == "aborted":
            w.line("copier", "txn", tx=tx, action="abort", status="invoke")
            w.line("copier", "txn", tx=tx, action="abort", status="ok")
            states["aborted"] += 1
        else:  # unknown, never seen: the broker aborted it
            w.line("copier", "txn", tx=tx, action="commit", status="invoke")
            w.line("copier", "txn", tx=tx, action="commit", status="info", error="_FENCED")
            w.line("copier", "meta", restart=f"after {tx}")
            states["unknown"] += 1
        for q in range(_PARTITIONS):  # back to the committed offsets: copied again later
            w.line("copier-in", "reset", phase="run", topic="in", partition=q, reason="rewind",
                   to=committed_at[q])
        position[p] = committed_at[p]
    # readers: the run reader and the recovery read, both read_committed, both topics
    for client, phase in (("reader", "run"), ("recovery", "recovery")):
        w.line(client, "meta", isolation="read_committed")
        both: list[tuple[str, list[list[str | None]]]] = [("in", [list(x) for x in log_in]), ("out", log_out)]
        for topic, logs in both:
            for p, log in enumerate(logs):
                at = [(i, m) for i, m in enumerate(log) if m is not None]
                if at:
                    w.line(client, "polls", phase=phase, topic=topic, isolation="read_committed",
                           partitions=[p] * len(at), offsets=[i for i, _ in at], mids=[m for _, m in at],
                           tss=[0] * len(at), keys=None)
    history = Path(run_dir) / "history"
    history.mkdir(parents=True, exist_ok=True)
    for client, lines in w.files.items():
        (history / f"{client}.jsonl").write_text("".join(lines), encoding="utf-8")
    losses_found = len(skipped)
    anomalies = {k: v for k, v in (("eos-duplicate", sum(1 for n in copied.values() if n > 1)),
                                   ("eos-loss", losses_found)) if v}
    return {"anomalies": anomalies,
            "counts": {"eos-copied": len(copied), "txn-committed": states["committed"],
                       "txn-aborted": states["aborted"], "txn-unknown": states["unknown"] + states["seen"],
                       "txn-seen-committed": states["seen"]},
            "duplicates": duplicates - dup_left}
