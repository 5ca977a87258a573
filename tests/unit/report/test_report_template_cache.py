"""The report's compiled templates are kept between processes, and a cache that cannot be
written only makes the report slower."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jinja2.bccache import bc_magic

from harness.report import render, render_run

if TYPE_CHECKING:
    from collections.abc import Callable

    RunFactory = Callable[..., Path]

# A new process renders a run page and says whether Jinja compiled the run template or
# loaded it from the cache (``Environment.compile`` runs only for a template it compiles).
RENDER = """
import sys
from jinja2 import Environment
from harness.report import render_run
compiled = []
original = Environment.compile
def compile(self, source, name=None, *args, **kwargs):
    compiled.append(name)
    return original(self, source, name, *args, **kwargs)
Environment.compile = compile
render_run(sys.argv[1])
print("compiled" if "run.html.j2" in compiled else "cached")
"""


def _render(run: Path, cache_home: Path) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    proc = subprocess.run([sys.executable, "-c", RENDER, str(run)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (run / "report.html").stat().st_size > 0
    return proc.stdout.strip()


def test_a_second_process_loads_the_compiled_templates(make_run: RunFactory, tmp_path: Path) -> None:
    run, home = make_run(), tmp_path / "cache"
    assert _render(run, home) == "compiled"
    assert list((home / "harness" / "templates").iterdir())
    assert _render(run, home) == "cached"


@pytest.mark.parametrize("damage", ["garbage", "truncated checksum"])
def test_a_damaged_cache_entry_is_compiled_again(make_run: RunFactory, tmp_path: Path, damage: str) -> None:
    run, home = make_run(), tmp_path / "cache"
    _render(run, home)
    for entry in (home / "harness" / "templates").iterdir():
        # Jinja's own header, then a checksum cut short: its pickle cannot be read
        entry.write_bytes(b"not a template's code" if damage == "garbage" else bc_magic + b"\x80\x02X")
    assert _render(run, home) == "compiled"
    assert _render(run, home) == "cached"  # and written again


def test_a_cache_that_cannot_be_written_still_renders(make_run: RunFactory, tmp_path: Path) -> None:
    run, home = make_run(), tmp_path / "cache"
    _render(run, home)
    entries = list((home / "harness" / "templates").iterdir())
    for entry in entries:  # a directory where each entry goes: neither read nor replaced
        entry.unlink()
        entry.mkdir()
    assert _render(run, home) == "compiled"
    assert all(entry.is_dir() for entry in entries)


def test_a_cache_home_that_is_a_file_still_renders(make_run: RunFactory, tmp_path: Path) -> None:
    run, home = make_run(), tmp_path / "cache"
    home.write_text("a file where the cache's directory would be")
    assert _render(run, home) == "compiled"
    assert _render(run, home) == "compiled"


def test_a_cache_directory_removed_under_the_report_still_renders(
        make_run: RunFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, home = make_run(), tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    render._env.cache_clear()
    try:
        render._env()  # the cache's directory is made with the environment
        shutil.rmtree(home)  # then removed: no compiled template can be written
        render_run(run)
        assert (run / "report.html").stat().st_size > 0
        assert not home.exists()
    finally:
        render._env.cache_clear()
