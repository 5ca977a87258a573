"""A copier's exactly-once on synthetic copier histories (harness.testing.copier_history):
committed, aborted, retried and unknown-outcome transactions, rewinds, and injected
duplicates and losses; the Spark job and the reference checker must report exactly what
was injected, and nothing on clean histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.check import ANOMALIES, check_run
from harness.testing import reference_checker
from harness.testing.copier_history import generate

CASES = [(1, 0, 0), (2, 0, 0), (3, 2, 0), (4, 0, 3), (5, 3, 4)]


def _expected(answer: dict) -> dict[str, int]:
    return {k: answer["anomalies"].get(k, 0) for k in ANOMALIES}


@pytest.mark.parametrize(("seed", "duplicates", "losses"), CASES)
def test_reference_finds_what_was_injected(tmp_path: Path, seed: int, duplicates: int, losses: int) -> None:
    answer = generate(tmp_path, seed, duplicates=duplicates, losses=losses)
    assert answer["duplicates"] == duplicates
    result = reference_checker.check(tmp_path)
    assert result.anomalies == _expected(answer)
    for name, n in answer["counts"].items():
        assert result.counts[name] == n, name


def test_spark_finds_what_was_injected(tmp_path: Path) -> None:
    for seed, duplicates, losses in ((5, 3, 4), (2, 0, 0)):
        run = tmp_path / f"s{seed}"
        answer = generate(run, seed, inputs=600, duplicates=duplicates, losses=losses)
        result = check_run(run)
        assert result.anomalies == _expected(answer)
        for name, n in answer["counts"].items():
            assert result.counts[name] == n, name
        assert result == reference_checker.check(run)
    # every transaction state occurs in the clean one (no false positive from any of them)
    assert all(answer["counts"][k] > 0 for k in ("txn-committed", "txn-aborted", "txn-unknown",
                                                 "txn-seen-committed"))
