"""The report in a real headless browser: loads offline, logs nothing to the console.

Needs Debian's ``chromium`` package. The screenshot goes to
``$REPORT_SCREENSHOT_DIR`` when set (CI keeps it), else to the test's tmp dir.
"""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.report import render_index, render_run

if TYPE_CHECKING:
    from conftest import RunFactory

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0")
PAGE_IDS = ("summary", "verdict", "expectations", "anomalies", "injection", "chart", "timeline-chart",
            "partition-charts", "timeline", "steps", "replicas", "truncations", "files")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="/usr/bin/chromium is absent (Debian package: apt-get install -y chromium)"),
]


def _chromium(tmp_path: Path, url: str, *args: str) -> tuple[str, list[str]]:
    """Run headless chromium on ``url``; its stdout and the console lines it logged."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    proc = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def _screenshot(tmp_path: Path, url: str, name: str) -> Path:
    shots = Path(os.environ.get("REPORT_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / name
    _, console = _chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1400,2000",
                           "--hide-scrollbars")
    assert console == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    return shot


def test_report_renders_in_chromium_without_console_errors(make_run: RunFactory, tmp_path: Path) -> None:
    url = render_run(make_run()).as_uri()
    _screenshot(tmp_path, url, "report.png")
    dom, console = _chromium(tmp_path, url, "--dump-dom")
    assert console == []
    for element_id in PAGE_IDS:
        assert f'id="{element_id}"' in dom
    assert dom.count("<svg") == 4 and "kill9 kafka-1" in dom  # main chart + three partitions


def test_index_renders_in_chromium(make_run: RunFactory, tmp_path: Path) -> None:
    render_run(make_run())
    dropped: dict[str, Any] = dict.fromkeys(
        ("anomalies", "counts", "expectations", "finished", "duration_s"), ...)
    make_run("20261122-023000-errored", history=False, at=make_run.start + timedelta(hours=1),
             verdict="error", error="WaitTimeout: kafka-2 did not become ready in 120 s", **dropped)
    url = render_index(make_run.root).as_uri()
    _screenshot(tmp_path, url, "index.png")
    dom, console = _chromium(tmp_path, url, "--dump-dom")
    assert console == [] and dom.count('class="run"') == 2


def test_hostile_strings_stay_text(make_run: RunFactory, tmp_path: Path) -> None:
    evil = "<script>console.error('escaped-not')</script><img src=x onerror=console.error('escaped-not')>"
    run_dir = make_run("evil", error=evil, examples={"duplicate": [{"mid": evil}]},
                       truncations=[{"node": "kafka-1", "line": evil}])
    dom, console = _chromium(tmp_path, render_run(run_dir).as_uri(), "--dump-dom")
    assert console == []
    assert "&lt;script&gt;console.error" in dom


def test_console_capture_sees_errors(tmp_path: Path) -> None:
    """The console checks above are not vacuous: an erroring page is caught."""
    page = tmp_path / "noisy.html"
    page.write_text("<!DOCTYPE html><title>noisy</title><script>console.error('noisy-marker')</script>")
    _, console = _chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert any("noisy-marker" in line for line in console)
