"""check_run's contract: errors, paths, the Spark master, the result object."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest

from harness.check import ANOMALIES, COUNTS, check_run, plan
from harness.check.engine import conf, master, session
from harness.check.result import make_result, position_fields
from harness.errors import CheckError
from harness.testing.synthetic import Profile, generate


def test_result_is_complete_json_and_judged() -> None:
    result = make_result({"unseen": 3}, {"unseen": [{"mid": "m"}] * 7}, {"ok": 2})
    assert list(result.anomalies) == list(ANOMALIES) and list(result.counts) == list(COUNTS)
    assert len(result.examples["unseen"]) == 5
    assert result.valid  # unseen alone does not fail a run
    assert json.loads(json.dumps(result.to_dict()))["counts"]["ok"] == 2
    assert not make_result({"duplicate": 1}, {}, {}).valid
    with pytest.raises(AttributeError):
        result.anomalies = {}  # type: ignore[misc]


def test_positions_render_per_system() -> None:
    assert position_fields((-1, 7, -1)) == {"offset": 7}
    assert position_fields((3, 7, -1)) == {"ledger": 3, "entry": 7, "batch": -1}


def test_unreadable_runs_raise_check_error(tmp_path: Path) -> None:
    with pytest.raises(CheckError, match="not a run directory"):
        check_run(tmp_path / "missing")
    with pytest.raises(CheckError, match="no history"):
        check_run(tmp_path)


def test_missing_pyspark_is_a_check_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(CheckError, match="pip install"):
        session._start("local[1]")


def test_awkward_paths_and_files(tmp_path: Path) -> None:
    """':' and glob characters in paths, an empty file, a file of garbage."""
    run = tmp_path / "run: [1] {a,b} *?"
    expected = generate(run, Profile(records=300, inject={"lost-write": 1, "unexpected": 1}))
    (run / "history" / "empty.jsonl").write_text("")
    (run / "history" / "garbage.jsonl").write_text("\x00\xff{{{\n[1,2]\n\"x\"\n{\"type\":\n")
    result = check_run(run)
    assert result.anomalies == expected.anomalies
    # the garbage's four lines are skipped
    lines, skipped = expected.counts["lines"] + 4, expected.counts["skipped"] + 4
    assert result.counts == {**expected.counts, "lines": lines, "skipped": skipped}


def test_spark_master_runs_the_same_job(tmp_path: Path) -> None:
    generate(tmp_path, Profile(records=300, replicas=2, inject={"replica-divergence": 1}))
    on_one_core = check_run(tmp_path, spark_master="local[1]")
    assert plan.session_for("local[1]").sparkContext.defaultParallelism == 1
    assert on_one_core.anomalies["replica-divergence"] == 1
    assert on_one_core == check_run(tmp_path)  # on the shared server (the default)
    assert master.master_of(None) == master.DEFAULT_MASTER


def test_a_big_check_says_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    """A check of more than ``PROGRESS_BYTES`` of input logs each step with the time so far
    (``harness run`` and ``harness check`` show it); a smaller one logs nothing."""
    generate(tmp_path, Profile(records=300, inject={"lost-write": 1}))
    caplog.set_level(logging.INFO, logger="harness")
    check_run(tmp_path)
    assert not [r for r in caplog.records if r.getMessage().startswith("check:")]
    monkeypatch.setattr(plan, "PROGRESS_BYTES", 0)
    result = check_run(tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("check:")]
    assert [re.sub(r" \(\d+ s\)$", "", line) for line in lines] == [
        f"check: reading 0.0 GB of history ({len(list((tmp_path / 'history').glob('*.jsonl')))} files)",
        f"check: {result.counts['lines']:,} lines read; per message id (1 bucket)",
        "check: anomalies", "check: examples, latency and transactions", "check: done"]
    assert result.anomalies["lost-write"] == 1


#: what PySpark's Connect client raised when a Python worker's Parquet write found its disk
#: full (HARNESS_CHECK_SCRATCH on a 512-kB tmpfs; the traceback shortened)
_WORKER_ENOSPC = """
  An exception was thrown from the Python worker. Please see the stack trace below.
[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):
  File "/work/main/harness/check/ingest.py", line 306, in __exit__
    writer.close()
  File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status
OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device
 SQLSTATE: 38000"""


def test_a_spark_failure_is_told_by_its_own_line() -> None:
    """A Python worker's exception by its last line, not PySpark's "see the stack trace below"
    (which the one-line error leaves out); anything else by its first line."""
    assert session._reason(Exception(_WORKER_ENOSPC)) == (
        "OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device")
    same_line = _WORKER_ENOSPC.replace("\n SQLSTATE: 38000", " SQLSTATE: 38000")
    assert session._reason(Exception(same_line)) == session._reason(Exception(_WORKER_ENOSPC))
    assert session._reason(Exception("[TABLE_OR_VIEW_NOT_FOUND] x\nmore")) == "[TABLE_OR_VIEW_NOT_FOUND] x"
    assert session._reason(RuntimeError("")) == "RuntimeError"


@pytest.mark.parametrize("given", ["6g", "4096", "512m", "2GB", " 8G "])
def test_a_driver_memory_spark_takes_is_passed_on(monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv("HARNESS_SPARK_DRIVER_MEMORY", given)
    assert conf.driver_memory() == given.strip()


@pytest.mark.parametrize(("given", "mib"), [("6g", 6144), ("4096", 4096), ("512m", 512), ("2GB", 2048),
                                           (" 8G ", 8192), ("2048k", 2), ("1t", 1 << 20),
                                           ("1073741824b", 1024)])
def test_a_driver_memory_is_read_in_mib_as_spark_reads_it(given: str, mib: int) -> None:
    assert conf.mib(given) == mib


def test_the_young_generation_is_capped_per_core_and_by_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conf.os, "cpu_count", lambda: 2)
    assert conf.young_generation_mib(7168) == 384
    assert conf.young_generation_mib(768) == 256  # a third of a small heap, the JVM's own limit
    monkeypatch.setattr(conf.os, "cpu_count", lambda: 16)
    assert conf.young_generation_mib(16384) == 3072
    monkeypatch.setattr(conf.os, "cpu_count", lambda: None)  # unknown: two cores' worth
    assert conf.young_generation_mib(7168) == 384
    monkeypatch.setattr(conf.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("HARNESS_SPARK_DRIVER_MEMORY", "900m")
    driver = conf.driver_conf()
    assert driver["spark.driver.memory"] == "900m"
    assert "-XX:MaxNewSize=300m" in driver["spark.driver.extraJavaOptions"].split()


@pytest.mark.parametrize("given", ["lots", "0g", "6 g", "-1g", "1.5g"])
def test_a_driver_memory_spark_would_refuse_is_one_line(tmp_path: Path, given: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    generate(tmp_path, Profile(records=20))
    monkeypatch.setenv("HARNESS_SPARK_DRIVER_MEMORY", given)
    with pytest.raises(CheckError) as err:
        check_run(tmp_path)
    assert str(err.value) == (f"$HARNESS_SPARK_DRIVER_MEMORY {given!r}: not a memory size; give one such as "
                              "6g or 4096m, or unset it (a third of this machine's memory, 1 to 16 GiB)")
