"""The per-id step is a hash aggregate: a variable-width value (a string) in its buffer
makes Spark sort every event by id instead (at 10M records 41-46 s against 29-31 s), and
nothing else would show it. A copier's ``src`` is joined on apart for that reason."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from harness.check import check_run, spark_job
from harness.testing.copier_history import generate as copier_history
from harness.testing.synthetic import Profile, generate


@pytest.mark.parametrize("copier", [False, True], ids=["plain", "copier"])
def test_the_per_id_step_is_a_hash_aggregate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             copier: bool) -> None:
    if copier:
        answer = copier_history(tmp_path, 2, inputs=200, duplicates=1, losses=1)
        expected = {"eos-duplicate": answer["duplicates"], "eos-loss": 1}
    else:
        expected = {k: v for k, v in generate(tmp_path, Profile(records=2000, seed=3)).anomalies.items() if v}
    plans: list[str] = []
    stage = spark_job._Job._stage

    def capture(self: spark_job._Job, name: str, df, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "mids":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                df.explain()
            plans.append(out.getvalue())
        return stage(self, name, df, *args, **kwargs)

    monkeypatch.setattr(spark_job._Job, "_stage", capture)
    result = check_run(tmp_path)
    (plan,) = plans
    assert "HashAggregate(keys=[mid" in plan and "SortAggregate" not in plan, plan
    assert {k: v for k, v in result.anomalies.items() if v and k in expected} == expected
