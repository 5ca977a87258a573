"""Judging a stored run again (``harness check RUN``): its history is checked anew and
judged against the expectations of the case copy in the run directory, as the run
judged it (:func:`.judge.apply_check`); ``result.json`` and the report are rewritten.

Only what the check decides changes: anomalies, examples, counts, expectations, the
verdict and whether it was expected (and the story's sentences on the scenario and on lost records).
What the run recorded (steps, injection, recovery, evidence, story) stays as the run
wrote it. A run that failed after its recovery read keeps its error and its verdict
``error``, with fresh counts; one that failed before it has no history to judge and is
left as it is.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ..case import Case, load_case, load_case_text
from ..errors import CaseError, CheckError
from ..result import RunResult
from .judge import CHECK_FAILED, apply_check
from .story import loss_sentence, scenario_sentence

__all__ = ["recheck"]

log = logging.getLogger(__name__)

CASE_COPY = "case.yaml"
_RETOLD = re.compile(r"No acknowledged record was lost\.|\d+ acknowledged record\(s\) were lost\."
                     r"|Scenario did not happen: .*\.")


def recheck(run_dir: Path, *, spark_master: str | None = None) -> RunResult:
    """Checks and judges the run in ``run_dir`` again; writes its ``result.json`` (atomically)
    and its report (and the index of the directory above), and returns the new result.

    A :class:`~harness.errors.HarnessError`, with nothing written, when the run directory, its
    ``result.json`` or its case copy cannot be read, when the directory cannot be written
    (found before the check), or when the check fails (CheckError).
    A run that failed before its recovery read comes back unchanged (verdict ``error``).
    """
    from ..check import check_run
    from ..report.load import is_run_dir, not_a_run_dir

    run_dir = Path(run_dir)
    try:
        is_dir = run_dir.is_dir()
    except OSError as exc:  # a name over 255 bytes, a loop of links
        raise CheckError(f"{run_dir}: unreadable: {exc.strerror}") from None
    if not is_dir:
        raise CheckError(f"{run_dir}: not a run directory")
    if not is_run_dir(run_dir):  # a reports directory, say: result.json's absence would mislead
        raise CheckError(not_a_run_dir(run_dir))
    if not os.access(run_dir, os.W_OK | os.X_OK):  # before the check, not after it
        raise CheckError(f"{run_dir}: cannot write there (a read-only file system, or no permission), "
                         "and checking a run rewrites its result.json and report: copy the run "
                         "directory somewhere writable and check the copy")
    result = RunResult.read(run_dir)
    case = _case(run_dir, result)
    run_failed = result.verdict == "error" and not (result.error or "").startswith(CHECK_FAILED)
    if run_failed and not _recovered(result):
        log.error("the run failed before its recovery read, so its history cannot be judged (loss is "
                  "judged only after recovery): result.json is left as it is, verdict error")
        return result
    log.info("checking the history (Spark)")
    check = check_run(run_dir, spark_master=spark_master).to_dict()
    if not run_failed:
        result.error = None
    result.expected_verdict = case.expect.verdict
    result.observed = sorted(case.expect.observe)
    apply_check(case, result, check, after_error=run_failed, run_dir=run_dir)
    if run_failed:
        log.info("the run failed after its recovery read: counts updated, verdict stays error")
    _retell(result)
    result.write(run_dir)
    log.info("wrote %s", run_dir / "result.json")
    try:
        from ..report import render_index, render_run

        render_run(run_dir)
        render_index(run_dir.resolve().parent)
    except Exception as exc:  # a report failure must not hide the result (written above)
        log.error("report rendering failed: %s", exc)
    return result


def _recovered(result: RunResult) -> bool:
    """Whether the run got as far as its recovery read (then its history can be judged)."""
    return result.checked or (result.recovery is not None and result.recovery.read is not None)


def _case(run_dir: Path, result: RunResult) -> Case:
    """The run's case, from its copy, validated as the run validated it (on the run's
    cluster and version). Rule files are looked up next to the copy, else next to the
    case file the run read (``case_file``), where the run found them."""
    copy = run_dir / CASE_COPY
    if not copy.is_file():
        raise CaseError("missing: the run directory holds no copy of its case, whose expectations "
                        "judge the run", path=str(copy))
    try:
        return load_case(copy, cluster=result.cluster, version=result.variant or result.version)
    except CaseError as exc:
        original = Path(result.case_file) if result.case_file else None
        if original is not None and original.parent.is_dir():
            try:
                return load_case_text(copy.read_bytes().decode("utf-8"), original, cluster=result.cluster,
                                      version=result.variant or result.version)
            except (CaseError, OSError, UnicodeDecodeError):
                pass
        raise CaseError(f"cannot judge the run: its case copy is invalid: {exc}") from None


def _retell(result: RunResult) -> None:
    """The story's sentences on the scenario and on lost records (:func:`.story.scenario_sentence`,
    :func:`.story.loss_sentence`), told again from the new judgement: in place of the old
    ones, else last."""
    after = [s for s in (scenario_sentence(result), loss_sentence(result)) if s is not None]
    story = list(result.story)
    told = [i for i, line in enumerate(story) if _RETOLD.fullmatch(line)]
    at = told[0] if told else len(story)
    story = [line for line in story if not _RETOLD.fullmatch(line)]
    story[at:at] = after
    result.story = story
