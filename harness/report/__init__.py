"""HTML reports of chaos runs: a self-contained page per run and an index of runs."""

from __future__ import annotations

from harness.report.render import render_index, render_run

__all__ = ["render_run", "render_index"]
