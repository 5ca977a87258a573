"""What the check could not use reaches result.json (``unread``) and the story: read back
as it was written, refused with the field named when malformed, and a run with
acknowledged writes the check could not judge never reads "No acknowledged record was
lost." without saying so."""

from __future__ import annotations

import pytest

from harness.errors import ResultError
from harness.result import RunResult
from harness.run.story import loss_sentence


def test_unread_is_written_and_read_back() -> None:
    result = RunResult(run_id="r", case="c", unread={"history/p.jsonl": {"ok without a message id": 147}})
    again = RunResult.from_json(result.to_json())
    assert again.unread == {"history/p.jsonl": {"ok without a message id": 147}}
    assert RunResult.from_json({"schema": 2, "run_id": "r", "case": "c"}).unread == {}  # older files: none


def test_a_malformed_unread_names_the_field() -> None:
    with pytest.raises(ResultError, match="unread"):
        RunResult.from_json({"schema": 2, "run_id": "r", "case": "c", "unread": {"f": {"r": "many"}}})


def test_the_story_says_when_acknowledged_writes_could_not_be_judged() -> None:
    judged = RunResult(run_id="r", case="c", anomalies={"lost-write": 0}, counts={"unjudged-ok": 0})
    assert loss_sentence(judged) == "No acknowledged record was lost."
    unjudged = RunResult(run_id="r", case="c", anomalies={"lost-write": 0}, counts={"unjudged-ok": 3})
    assert loss_sentence(unjudged) == ("No judged acknowledged record was lost; 3 acknowledged write(s) had "
                                       "no message id and could not be judged.")
