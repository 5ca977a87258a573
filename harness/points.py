"""The crash-timing points table: which points exist, where, and which versions have rules.

A leaf, so that the case validator (which offers the points a case may arm)
and the injector (which arms them) both read one table without importing each
other. The rule files stay in ``harness/inject/rules/<system>-<major>.<minor>.btm``
(package data); this module only reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PointSpec", "POINTS", "RULES_DIR", "available_points", "rule_blocks", "rule_file"]

RULES_DIR = Path(__file__).resolve().parent / "inject" / "rules"


@dataclass(frozen=True)
class PointSpec:
    """Where a point lives and what a hit must look like (offsets relative to N)."""

    #: the nodes hosting the rule: leader | follower | followers (every current one) on Kafka;
    #: owner (the broker that owns the topic) | new-owner (every other running broker: the
    #: next owner) | bookie (one bookie of the entry's write set) on Pulsar
    role: str
    leader_leo: int | None  # expected leader LEO at the kill, minus N (None: see below)
    follower_leo: int | None  # expected follower LEO at the kill, minus N
    hw: int | None  # expected high watermark in the HIT line (leader HW, or response HW), minus N
    hw_field: str  # which HIT field holds it
    meaning: str
    seed: str = ("The seed defines this point but reports no run of it; with leader-epoch "
                 "truncation (KIP-101) no acknowledged record may be lost.")
    #: every follower of the partition (not only the first) must have ``follower_leo``
    every_follower: bool = False
    #: a hold on a follower's fetch wherever that follower stands (``leader_leo`` is None):
    #: hit when the HIT line's ``fetch_offset`` is the fetching follower's log end offset,
    #: read from its files
    fetch_hold: bool = False
    #: a hold on a follower at its truncation on becoming a follower (``leader_leo`` is None):
    #: hit when the HIT line's ``leo`` is the holding follower's log end offset read from its
    #: files (before the truncation: what it holds; after: what it kept)
    truncate_hold: bool = False
    #: the system whose rule files hold the point
    system: str = "kafka"


_TRUNCATE_SEED = ("Seed 003 watches exactly this call (Log.truncateTo); seed 001: before 0.11 the "
                  "follower truncates to its HW, which may drop an acknowledged record.")

POINTS: dict[str, PointSpec] = {
    "C1": PointSpec("leader", 1, 0, 0, "hw", "L appended N; its first fetch response carrying N "
                    "to R is not sent",
                    "The seed (003, case 1) saw the same: node2 took over as leader, the producer "
                    "re-sent the in-flight message to it, and node0 restarted as a follower and "
                    "truncated its unreplicated tail (to 518 from LEO 524 there)."),
    "C2": PointSpec("follower", 1, 0, 0, "response_hw", "R received the response carrying N "
                    "but has not processed it"),
    "C3": PointSpec("follower", 1, 1, 0, "response_hw", "R appended N; its second fetch "
                    "(offset N+1) is not sent"),
    "C4": PointSpec("leader", 1, 1, 0, "hw", "L has not processed R's second fetch (HW still N)"),
    "C5": PointSpec("leader", 1, 1, 1, "hw", "L processed the second fetch (HW N+1); its "
                    "response has not reached R"),
    "HW-LEADER-ONLY": PointSpec(
        "leader", 1, 1, 1, "hw", "every follower appended N and fetched at N+1, so the "
        "leader's HW is N+1 (N acknowledged), but no response telling them has been sent: "
        "the followers' HW is still N", every_follower=True,
        seed="Seed 001's pre-0.11 loss scenario needs exactly this state: a follower that "
             "truncates to its HW on becoming a follower drops N although N was acknowledged."),
    "NEW-LEADER-FETCH": PointSpec(
        "followers", None, None, None, "fetch_offset", "whichever follower (at arm time) next "
        "leads holds its handling of the first fetch a follower sends it, wherever that "
        "follower's log ends", fetch_hold=True,
        seed="Seed 001: before 0.11 a follower truncated to its HW before fetching from a new "
             "leader (KIP-101); the held fetch shows the offset it truncated to."),
    "TRUNCATE-BEFORE": PointSpec(
        "followers", None, None, None, "leo", "a follower told of a new leader is about to "
        "truncate its log (0.10: to its high watermark; 0.11: to the end offset of its last "
        "epoch on the leader); it has not cut anything yet", truncate_hold=True,
        seed=_TRUNCATE_SEED),
    "TRUNCATE-AFTER": PointSpec(
        "followers", None, None, None, "leo", "a follower told of a new leader has truncated "
        "its log (the HIT line's leo_before and leo: what it had and what it kept); its first "
        "fetch from the new leader is not sent", truncate_hold=True,
        seed=_TRUNCATE_SEED),
}

_BK_SEED = ("Seed 000 (Pulsar at scale): an entry is durable once the ack quorum of bookies has "
            "it; the broker answers the producer only then. Nothing acknowledged may be lost.")

#: Pulsar and BookKeeper points: N is the next entry id of the partition's current ledger;
#: a rule fires on the first entry at or after N of that ledger (the HIT line names it)
POINTS.update({
    "BK-JOURNALED": PointSpec(
        "bookie", None, None, None, "entry", "a bookie of entry N's write set wrote N to its "
        "journal and forced it to disk; its answer to the broker's add is not sent, so the "
        "broker has no ack quorum for N (with ack quorum = write quorum)", seed=_BK_SEED,
        system="pulsar"),
    "BK-ACK-QUORUM": PointSpec(
        "owner", None, None, None, "entry", "the owner's ledger handle has the ack quorum for "
        "entry N (the bookies answered); it has not completed the add, so the managed ledger "
        "has not confirmed N and the producer has no receipt", seed=_BK_SEED, system="pulsar"),
    "ENSEMBLE-CHANGE": PointSpec(
        "owner", None, None, None, "entry", "a bookie of the ledger's ensemble failed (an add "
        "to it failed); the owner's ledger handle chose a new ensemble from the first unconfirmed "
        "entry on and has not written it to the ledger's metadata, so the pending adds are not "
        "resent and the metadata store still names the failed bookie",
        seed="Seed 000: a bookie failure makes the writer replace it (an ensemble change) and "
             "go on writing; entries acknowledged before stay where they were. Nothing "
             "acknowledged may be lost.", system="pulsar"),
    "LEDGER-RECOVERY": PointSpec(
        "new-owner", None, None, None, "entry", "a new owner opens the partition's last ledger "
        "with recovery: the metadata is IN_RECOVERY and the bookies fenced (the old owner can "
        "add nothing more); its recovery reads past the last add confirmed have not started and "
        "the ledger is not closed",
        seed="Seed 000: on a broker failure the new owner fences the last ledger and closes it "
             "at the last entry an ack quorum may have stored; every acknowledged entry is "
             "below that close point.", system="pulsar"),
    "BUNDLE-ACQUIRED": PointSpec(
        "new-owner", None, None, None, "entry", "a new owner holds the ownership lock of the "
        "topic's namespace bundle and is loading the topic; it has not begun to open the "
        "partition's managed ledger, so the last ledger is neither fenced nor recovered",
        seed="Seed 000: a broker owns topics by namespace bundle; when one fails another "
             "acquires its bundles and loads their topics from BookKeeper. Nothing "
             "acknowledged may be lost.", system="pulsar"),
    "CURSOR-UNPERSISTED": PointSpec(
        "owner", None, None, None, "entry", "a subscription's mark-delete position moved in the "
        "owner's memory to entry N or later (its consumer acknowledged the messages); the new "
        "position is not yet written to the cursor's ledger",
        seed="Seed 000: a subscription's acknowledgements are persisted in batches, so a broker "
             "failure redelivers what was acknowledged since the last write (at-least-once); "
             "nothing may be skipped.", system="pulsar"),
})


#: major.minor lines whose brokers take another line's rule file unchanged: every class,
#: method and accessor the rules name has the same name and signature (javap of both jars)
SAME_RULES = {"kafka-1.1": "kafka-2.0", "pulsar-4.2": "pulsar-4.0"}


def rule_file(system: str, version: str) -> Path:
    """The rule library file for ``system`` ``version`` (one per major.minor, or the line
    :data:`SAME_RULES` names; may not exist)."""
    line = f"{system}-{'.'.join(version.split('.')[:2])}"
    return RULES_DIR / f"{SAME_RULES.get(line, line)}.btm"


def rule_blocks(text: str) -> dict[str, str]:
    """``RULE <point> ...`` blocks of a rule file, by point name (a block named
    ``<point>.<suffix>`` is a companion rule, armed with ``<point>``)."""
    blocks = {}
    for m in re.finditer(r"^RULE (\S+).*?^ENDRULE\s*$", text, re.M | re.S):
        blocks[m.group(1)] = m.group(0)
    return blocks


def available_points(system: str, version: str) -> frozenset[str]:
    """The built-in points the rule library has for ``system`` ``version``."""
    path = rule_file(system, version)
    if not path.exists():
        return frozenset()
    return frozenset(p for p in rule_blocks(path.read_text()) if p in POINTS)
