"""Helpers of the checker tests: hypothesis strategies for synthetic profiles, example ids."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from harness.testing.synthetic import INJECTABLE, Profile


def profiles(*, inject: bool) -> st.SearchStrategy[Profile]:
    """Random small profiles; with ``inject``, a random set of anomalies (1-2 of each).

    Pulsar profiles are Key_Shared subscriptions half the time (key-order can be injected
    only there); consumers write polls batches of random sizes, some as single poll lines;
    half of them acknowledge some sends without their message id (``no_mid``), and half
    have replica lines that cannot be read.
    """

    @st.composite
    def build(draw: st.DrawFn) -> Profile:
        replicas = draw(st.integers(0, 3))
        system = draw(st.sampled_from(["kafka", "pulsar"]))
        key_shared = system == "pulsar" and draw(st.booleans())
        kinds = [k for k in INJECTABLE if (replicas >= 2 or k != "replica-divergence")
                 and (key_shared or k != "key-order") and (system == "kafka" or k != "silent-reread")]
        chosen = draw(st.dictionaries(st.sampled_from(kinds), st.integers(1, 2))) if inject else {}
        return Profile(
            records=draw(st.integers(150, 400)) + 60 * sum(chosen.values()),
            system=system,
            topics=draw(st.integers(1, 2)),
            partitions=draw(st.integers(1, 4)),
            producers=draw(st.integers(1, 3)),
            consumers=draw(st.integers(1, 3)),
            replicas=replicas,
            txn=draw(st.booleans()),
            rewinds=draw(st.booleans()),
            torn=draw(st.booleans()),
            seed=draw(st.integers(0, 1 << 16)),
            inject=chosen,
            key_shared=key_shared,
            batch=draw(st.sampled_from([1, 2, 7, 300])),
            plain=draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])),
            no_mid=draw(st.sampled_from([0, 0, 1, 4])),
            torn_replicas=draw(st.booleans()),
        )

    return build()


def example_mids(example: dict[str, Any]) -> set[str]:
    """The message ids an example names (not its ``prev``)."""
    found = {example["mid"]} if "mid" in example else set()
    found |= set(example.get("mids", []))
    found |= {r["mid"] for r in example.get("replicas", [])}
    found |= {example["recovered_mid"]} if "recovered_mid" in example else set()
    return found
