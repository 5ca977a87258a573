"""Helpers of the mutation fuzz tests (case files, run directories)."""

from __future__ import annotations

from typing import Any

__all__ = ["slots"]


def slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in the JSON-like ``doc``, outermost first."""
    found: list[tuple[Any, Any]] = []
    keys = doc.keys() if isinstance(doc, dict) else range(len(doc)) if isinstance(doc, list) else ()
    for key in list(keys):
        found.append((doc, key))
        found.extend(slots(doc[key]))
    return found
