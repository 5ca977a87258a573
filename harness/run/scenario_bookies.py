"""The scenario facts counted from a Pulsar run's bookie evidence: the bookie dump's
``bookies/ledgers.json`` (the case topic's ledgers' metadata after the run) and the
bookies' logs (:mod:`.scenario` names them in its table)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..result import RunResult

__all__ = ["Measured", "ensemble_changes", "fenced_rereplications", "ledger_directories"]


@dataclass(frozen=True)
class Measured:
    """A fact's count (None: nothing recorded to count it) and a note: where, or why not."""

    count: int | None
    note: str = ""


def _dumped_ledgers(run_dir: Path | None) -> list[Any] | None:
    """The bookie dump's ``bookies/ledgers.json`` (the case topic's ledgers' metadata after
    the run); None without one."""
    path = run_dir / "bookies" / "ledgers.json" if run_dir is not None else None
    try:
        rows = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, ValueError):
        rows = None
    return rows if isinstance(rows, list) else None


def ledger_directories(result: RunResult, run_dir: Path | None) -> Measured:
    """Ledger directories of the bookies that hold the case topic's entries: a bookie with N
    ``ledgerDirectories`` (the case's ``bookie.ledgerDirectories``, comma-separated; one
    otherwise) keeps ledger L in directory L mod N (BookKeeper's DbLedgerStorage), counted over
    the ledgers with an entry in the bookie dump's ``ledgers.json``."""
    rows = _dumped_ledgers(run_dir)
    if rows is None:
        return Measured(None, "no bookie dump (bookies/ledgers.json)")
    dirs = len(str(result.broker_config.get("bookie.ledgerDirectories", "")).split(","))
    used = {row["ledger"]: row["ledger"] % dirs for row in rows
            if isinstance(row, dict) and isinstance(row.get("ledger"), int)
            and isinstance(row.get("last_confirmed"), int) and row["last_confirmed"] >= 0}
    if not used:
        return Measured(0, "no ledger holds an entry")
    return Measured(len(set(used.values())),
                    f"of {dirs}: " + ", ".join(f"ledger {led} in {d}" for led, d in sorted(used.items())))


def ensemble_changes(result: RunResult, run_dir: Path | None) -> Measured:
    """Ensemble changes in the case topic's ledgers: each ledger's ensembles after its first,
    from the bookie dump's ``ledgers.json`` (the ledgers' metadata after the run)."""
    rows = _dumped_ledgers(run_dir)
    if rows is None:
        return Measured(None, "no bookie dump (bookies/ledgers.json)")
    changed = {row.get("ledger"): len(row.get("ensembles") or {}) - 1 for row in rows
               if isinstance(row, dict) and len(row.get("ensembles") or {}) > 1}
    if not changed:
        return Measured(0, f"{len(rows)} ledger(s), each with one ensemble")
    return Measured(sum(changed.values()),
                    ", ".join(f"ledger {led}: {n}" for led, n in sorted(changed.items())))


#: a bookie's log line's time stamp, and the lines that say a ledger was fenced (a recovery's
#: fencing read) and that AutoRecovery began on one of its fragments
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_FENCED = re.compile(r"Ledger: (\d+)\s+fenced by")
_REPLICATING = re.compile(r"Replicating fragment Fragment\(LedgerID: (\d+), FirstEntryID: (-?\d+)")


def fenced_rereplications(result: RunResult, run_dir: Path | None) -> Measured:
    """Fragments of the case topic's ledgers (``bookies/ledgers.json``) that BookKeeper's
    AutoRecovery began to re-replicate after a bookie had fenced the ledger, copied or not:
    distinct (ledger, first entry) of the "Replicating fragment" lines in
    ``logs/bookie-*.log`` later than the ledger's first "fenced by" line in any of them."""
    rows = _dumped_ledgers(run_dir)
    logs = sorted((run_dir / "logs").glob("bookie-*.log")) if run_dir is not None else []
    if rows is None or not logs:
        return Measured(None, "no bookie dump (bookies/ledgers.json) or no bookie log")
    ours = {row.get("ledger") for row in rows if isinstance(row, dict)}
    fenced: dict[int, str] = {}
    began: list[tuple[str, int, int]] = []
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if (t := _STAMP.match(line)) and (m := _FENCED.search(line) or _REPLICATING.search(line)):
                if int(m.group(1)) not in ours:
                    continue
                if m.re is _FENCED:
                    fenced[int(m.group(1))] = min(fenced.get(int(m.group(1)), t[1]), t[1])
                else:
                    began.append((t[1], int(m.group(1)), int(m.group(2))))
    found = {(lg, e) for t, lg, e in began if lg in fenced and fenced[lg] < t}
    early = {(lg, e) for t, lg, e in began} - found
    note = ", ".join(f"ledger {lg} from entry {e}" for lg, e in sorted(found))
    if early:
        note += (", and " if note else "") + "before its fence: " + ", ".join(
            f"ledger {lg} from entry {e}" for lg, e in sorted(early))
    return Measured(len(found), note)
