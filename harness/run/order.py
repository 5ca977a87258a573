"""The order to run cases in: cases that need the same cluster, one after another.

A kept cluster is recreated when a case needs another version or other broker settings
(:meth:`~harness.backend.cluster.Cluster.state`), which costs 25 to 60 s. Running the
cases in file order recreates it at every change of settings; :func:`by_cluster` puts the
cases of one setting together, so each cluster name is created once per setting.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from ..case import Case

__all__ = ["by_cluster", "cluster_setting", "is_default_setting"]

T = TypeVar("T")


def cluster_setting(case: Case) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """What decides whether a kept cluster serves ``case``: its name, version and broker
    settings (what :attr:`~harness.backend.cluster.Cluster.config_key` digests)."""
    return case.cluster, case.version, tuple(sorted(case.broker_config.items()))


def is_default_setting(case: Case) -> bool:
    """Whether ``case`` runs on its cluster's default version with no broker settings (what
    the test fixtures and a plain ``harness run`` start)."""
    return not case.broker_config and case.version == case.cluster_def.default_version


def by_cluster(items: Sequence[T], setting: Callable[[T], Hashable | None],
               is_default: Callable[[T], bool] = lambda item: False) -> list[T]:
    """``items`` with those of one setting together; a stable reorder.

    Settings run in the order of their first item, except that default ones (``is_default``:
    a cluster's default version and no broker settings, what test fixtures start) go first,
    since the cluster may already run that way. An item whose setting is None (it has no
    case, or an invalid one) keeps its place ahead of the groups that follow it.
    """
    first: dict[Hashable, int] = {}
    default: dict[Hashable, bool] = {}
    keys: list[Hashable | None] = []
    for index, item in enumerate(items):
        key = setting(item)
        keys.append(key)
        if key is not None and key not in first:
            first[key] = index
            default[key] = is_default(item)

    def rank(index: int) -> tuple[int, int, int]:
        key = keys[index]
        if key is None:
            return (1, index, index)
        return (0 if default[key] else 1, first[key], index)

    return [items[i] for i in sorted(range(len(items)), key=rank)]
