"""Run reports: a self-contained HTML page per run, an index of runs, and a plain-text summary."""

from __future__ import annotations

from harness.report.render import render_index, render_run
from harness.report.text import format_result

__all__ = ["render_run", "render_index", "format_result"]
