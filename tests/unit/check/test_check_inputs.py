"""What a check reads is validated before Spark starts (one clear CheckError naming the
path), lines that cannot be read are counted (``lines``, ``skipped``) by both checkers
alike, and a history of which no line could be read is an error, not a clean run."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.check import check_run, plan
from harness.check.inputs import first_skipped
from harness.check.result import skipped_lines
from harness.errors import CheckError
from harness.testing import reference_checker
from harness.testing.synthetic import Profile, generate

CHECKERS: dict[str, Callable[[Path], object]] = {"spark": check_run, "reference": reference_checker.check}


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting Spark fails: what raises here was found before."""

    def refuse(master: str | None = None) -> None:
        raise AssertionError("Spark started before the inputs were validated")

    monkeypatch.setattr(plan, "session_for", refuse)


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("bad", ["history-dir", "replica-dir", "fifo", "dangling-link", "replicas-file"])
def test_unreadable_inputs_are_named_before_spark_starts(tmp_path: Path, no_spark: None, checker: str,
                                                         bad: str) -> None:
    run = tmp_path / "run"
    generate(run, Profile(records=50, replicas=1))
    path = {"history-dir": run / "history" / "consumer-9.jsonl", "replica-dir": run / "replicas" / "x.jsonl",
            "fifo": run / "history" / "fifo.jsonl", "dangling-link": run / "history" / "gone.jsonl",
            "replicas-file": run / "replicas"}[bad]
    if bad in ("history-dir", "replica-dir"):
        path.mkdir()
        (path / "inside.jsonl").write_text("{}\n")
        reason = "a directory, not a file of lines"
    elif bad == "fifo":
        os.mkfifo(path)
        reason = "not a regular file"
    elif bad == "dangling-link":
        path.symlink_to(run / "no-such-file.jsonl")
        reason = "cannot be read: No such file or directory"
    else:
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
        path.write_text("")
        reason = "not a directory"
    with pytest.raises(CheckError) as err:
        CHECKERS[checker](run)
    assert f"{path}: {reason}" in str(err.value)


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_run_without_history_is_named(tmp_path: Path, no_spark: None, checker: str) -> None:
    with pytest.raises(CheckError, match="no history/ directory"):
        CHECKERS[checker](tmp_path)
    (tmp_path / "history").mkdir()
    with pytest.raises(CheckError, match=r"no history/\*\.jsonl files"):
        CHECKERS[checker](tmp_path)


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_history_of_random_bytes_is_an_error(tmp_path: Path, checker: str) -> None:
    (tmp_path / "history").mkdir()
    rng = random.Random(18)
    for name in ("producer-0", "consumer-0"):
        (tmp_path / "history" / f"{name}.jsonl").write_bytes(rng.randbytes(20_000))
    with pytest.raises(CheckError, match=r"no history line could be read: all \d+ lines were skipped"):
        CHECKERS[checker](tmp_path)


@pytest.mark.parametrize("checker", CHECKERS)
def test_an_empty_history_is_an_error(tmp_path: Path, checker: str) -> None:
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "producer-0.jsonl").write_text("\n  \n")
    with pytest.raises(CheckError, match="no history line could be read: the history files hold no lines"):
        CHECKERS[checker](tmp_path)


def test_skipped_lines_are_counted_alike(tmp_path: Path) -> None:
    """Junk lines among good ones: each is counted once, by the Spark job and the
    reference checker, and the result is otherwise the run's."""
    expected = generate(tmp_path, Profile(records=400, replicas=2, seed=18, inject={"lost-write": 1}))
    junk = ["{not json", "[1,2]", '"text"', '{"type":"fault","node":"kafka-1"}', '{"mid":"p0-1"}',
            '{"type":"polls","client":"consumer-0","partitions":[0,0],"offsets":[1],"mids":["p0-1","p0-2"]}',
            '{"type":"ok","client":"producer-0","mid":"p0-1","partition":0,"offset":"7"}',
            "\x00\x01\x02"]  # and a line of bytes that are not UTF-8
    fine = ['{"type":"stall","client":"producer-0","seconds":0.5}', "", "   "]  # read; blank lines
    with open(tmp_path / "history" / "producer-0.jsonl", "ab") as fh:
        fh.write("".join(line + "\n" for line in junk + fine).encode("utf-8") + b"\xff\xfe{\n")
    with open(tmp_path / "replicas" / "kafka-1.jsonl", "a", encoding="utf-8") as fh:
        fh.write("not a replica line\n")  # replica lines are not counted
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies
    assert expected.counts["skipped"] > 0  # the generator's torn and malformed lines
    assert result.counts == {**expected.counts, "lines": expected.counts["lines"] + len(junk) + 2,
                             "skipped": expected.counts["skipped"] + len(junk) + 1}
    assert result == reference_checker.check(tmp_path)
    assert skipped_lines(result.counts) == (f"{result.counts['skipped']} of {result.counts['lines']} history "
                                            "lines could not be read and were skipped")
    assert json.loads(json.dumps(result.to_dict()))["counts"]["skipped"] == result.counts["skipped"]


def test_no_warning_without_skipped_lines() -> None:
    assert skipped_lines({"lines": 10, "skipped": 0}) is None
    assert skipped_lines({}) is None


def test_the_first_skipped_lines_are_named(tmp_path: Path) -> None:
    """first_skipped names the file, the line (from 1) and why, in file order, up to its
    limit; nothing for a history larger than it reads."""
    history = tmp_path / "history"
    history.mkdir()
    (history / "a.jsonl").write_text('{"type":"ok","mid":"a","partition":0,"offset":1}\n\n{not json\n')
    (history / "b.jsonl").write_text('{"type":"meta","partitions":8}\r\n{"type":"fault"}\n'
                                     '{"type":"ok","mid":"b","offset":1.5}')
    assert first_skipped(tmp_path) == ["history/a.jsonl:3 (not a JSON object)",
                                       "history/b.jsonl:1 (partitions: not a list)",
                                       "history/b.jsonl:2 (type 'fault': not a client event of the history "
                                       "contract)"]
    assert first_skipped(tmp_path, limit=5)[-1] == "history/b.jsonl:3 (offset: not a 64-bit integer)"
    assert first_skipped(tmp_path, limit=1) == ["history/a.jsonl:3 (not a JSON object)"]
    assert first_skipped(tmp_path, max_bytes=10) == []
