"""Who owns a cluster a run leaves running: `harness run --keep-cluster` gives it to no
process (later runs reuse it), the default and the pytest plugin keep it owned by the
running process (removed at the session's end, or as a dead run's leftover)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import cli, run
from harness.result import RunResult

CASE = Path(__file__).resolve().parents[2] / "cases" / "kafka" / "zk-kill-leader.yaml"


@pytest.mark.parametrize("flags, keep, owner", [([], False, None),
                                                 (["--keep-cluster"], True, "keep")])
def test_run_passes_the_owner_of_a_kept_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                flags: list[str], keep: bool, owner: str | None) -> None:
    seen: dict[str, Any] = {}

    def fake_run_case(case: Any, **kw: Any) -> Any:
        seen.update(kw)
        return run.RunOutcome(tmp_path, RunResult("x", verdict="pass", as_expected=True))

    monkeypatch.setattr(run, "run_case", fake_run_case)
    cli.main(["run", *flags, "--reports", str(tmp_path), str(CASE)])
    assert seen["keep_cluster"] is keep and seen["owner"] == owner

