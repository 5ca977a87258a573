"""Special files and huge files in a run directory (issue 56): the report never opens a FIFO or
reads a device, never reads a file over its cap, and says what it left out, on the page and on
the console; a result.json of a schema it does not know is an error, not a page."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.errors import ResultSchemaError
from harness.report import render_index, render_run
from harness.report.inputs import MAX_HISTORY_BYTES
from harness.testing.special_files import FIFO, KIND, SPECIALS, make_special

if TYPE_CHECKING:
    from conftest import RunFactory


def _in_time(call: Callable[[], Any], fifos: list[Path], seconds: float = 20) -> Any:
    """``call()``, failing the test if it has not returned in ``seconds`` (a FIFO opened for
    reading blocks until a writer comes: one comes then, so that the thread ends)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            with open(fifo, "wb"):
                pass
        pytest.fail("the report blocked on a special file")
    assert out, "the call raised (see the thread's traceback above)"
    return out[0]


def _skipped(html: str) -> dict[tuple[str, str], int]:
    box = re.search(r'<div class="problem warn" id="skipped">(.*?)</table>', html, re.S)
    rows = re.findall(r'<tr><td class="mono">([^<]*)</td><td>([^<]*)</td><td class="num">(\d+)</td></tr>',
                      box.group(1)) if box else []
    return {(where, why): int(n) for where, why, n in rows}


def _acks_total(html: str) -> int:
    return int(re.search(r'acks/s <span class="muted">\((\d+)\)</span>', html).group(1))


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("name", ["history/consumer.jsonl", "timeline.jsonl"])
def test_a_special_history_or_timeline_is_counted_not_read(make_run: RunFactory, kind: str, name: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    run_dir = make_run()
    whole = _acks_total(render_run(run_dir).read_text())
    make_special(run_dir / name, kind)
    caplog.set_level(logging.WARNING, "harness.report")
    page = _in_time(lambda: render_run(run_dir), [run_dir / name])
    html = page.read_text()
    what = "a history file" if name.startswith("history") else "the timeline"
    why = f"not read: {KIND[kind]}, not a regular file ({what} is read only from a regular file)"
    assert _skipped(html) == {(name, why): 1}
    assert _acks_total(html) == whole  # the producer's history is all there
    assert f"are left out of the page: {name}: {why} (1)" in caplog.text


@pytest.mark.parametrize("kind", SPECIALS)
def test_a_special_result_json_is_shown_as_unusable_and_not_read(make_run: RunFactory, kind: str,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    run_dir = make_run()
    make_special(run_dir / "result.json", kind)
    caplog.set_level(logging.WARNING, "harness.report")
    html = _in_time(lambda: render_run(run_dir), [run_dir / "result.json"]).read_text()
    problem = (f"unreadable: {KIND[kind]}, not a regular file (result.json is read only from a "
               "regular file)")
    assert '<span id="verdict"><span class="verdict verdict-unknown">UNKNOWN</span>' in html
    assert "<b>Incomplete run: no usable result.json</b><pre>result.json: " + problem in html
    assert f"report: {run_dir / 'result.json'}: {problem} (the page shows the verdict unknown)" \
        in caplog.text
    index = _in_time(lambda: render_index(run_dir.parent), [run_dir / "result.json"])
    assert index is not None and "unreadable" in index.read_text()


def test_a_history_over_the_cap_is_counted_not_read(make_run: RunFactory) -> None:
    run_dir = make_run()
    with (run_dir / "history" / "huge.jsonl").open("wb") as fh:
        fh.truncate(MAX_HISTORY_BYTES + 1)  # sparse: reading it would take minutes, not disk
    html = _in_time(lambda: render_run(run_dir), []).read_text()
    assert _skipped(html) == {("history/huge.jsonl", f"not read: 32 GiB ({MAX_HISTORY_BYTES + 1} bytes), "
                               "over the cap of 32 GiB for a history file (is it the right file?)"): 1}


def test_a_fifo_index_is_not_ours_and_not_opened(make_run: RunFactory) -> None:
    run_dir = make_run()
    index = run_dir.parent / "index.html"
    make_special(index, FIFO)
    assert _in_time(lambda: render_index(run_dir.parent), [index]) is None


@pytest.mark.parametrize("schema", [3, 999, -1])
def test_a_result_of_an_unknown_schema_is_an_error_not_a_page(make_run: RunFactory, schema: int) -> None:
    run_dir = make_run(schema=schema)
    (run_dir / "report.html").write_text("the page its own harness wrote")
    with pytest.raises(ResultSchemaError, match=rf"result.json: schema {schema}: this harness reads "
                                                 "result.json of schema 1 or 2 only"):
        render_run(run_dir)
    assert (run_dir / "report.html").read_text() == "the page its own harness wrote"
    index = render_index(run_dir.parent)
    assert index is not None
    row = re.search(r"<tr[^>]*>.*?</tr>", index.read_text().split("<tbody>")[1], re.S)
    assert row and f"schema {schema}: this harness reads" in row.group(0)
    assert json.loads((run_dir / "result.json").read_text())["schema"] == schema  # left as it is
