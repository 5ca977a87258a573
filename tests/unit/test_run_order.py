"""Cases that need the same cluster setting run one after another (``harness.run.order``).

A kept cluster is recreated whenever the next case needs another version or other broker
settings; in file order the CI suite's cases recreated one 13 times, grouped 10 times (7
instead of 10 after the integration tests, which leave the default settings running).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.case import load_case
from harness.run.order import by_cluster, cluster_setting, is_default_setting

ROOT = Path(__file__).resolve().parents[2]


def test_groups_keep_first_appearance_defaults_first_and_unknowns_in_place() -> None:
    items = ["A0", "B1", "A2", "?3", "C4", "B5"]
    ordered = by_cluster(items, lambda s: None if s[0] == "?" else s[0], lambda s: s[0] == "C")
    assert ordered == ["C4", "A0", "A2", "B1", "B5", "?3"]
    assert by_cluster([], lambda s: s) == []
    # already grouped: nothing moves
    assert by_cluster(["A0", "A1", "B2"], lambda s: s[0]) == ["A0", "A1", "B2"]


def test_setting_is_what_a_kept_cluster_is_matched_on() -> None:
    case = load_case(ROOT / "cases/kafka/regressions/kip-101-loss.yaml", version="3.9.2-ibp-0.11.0-IV1")
    plain = load_case(ROOT / "cases/kafka/regressions/kip-101-loss.yaml", version="3.9.2")
    assert cluster_setting(case)[:2] == cluster_setting(plain)[:2] == (plain.cluster, "3.9.2")
    assert cluster_setting(case) != cluster_setting(plain)
    assert is_default_setting(plain) and not is_default_setting(case)


def _collected(*extra: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only",
                          "-q", "-m", "not full_matrix", *extra, "cases"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line for line in out.splitlines() if "::" in line]


def _setting(node_id: str) -> tuple[object, ...]:
    path, name = node_id.split("::")
    variant = name.split("[", 1)[1].rstrip("]") if "[" in name else None
    return cluster_setting(load_case(ROOT / path, version=variant))


def test_the_suite_runs_each_setting_once_and_the_option_keeps_file_order() -> None:
    grouped = _collected()
    settings = [_setting(n) for n in grouped]
    runs = [s for i, s in enumerate(settings) if i == 0 or settings[i - 1] != s]
    assert len(runs) == len(set(runs)), "a cluster setting comes back after another one"
    in_files = _collected("--chaos-file-order")
    assert sorted(in_files) == sorted(grouped)
    assert in_files == sorted(in_files, key=lambda n: n.split("::")[0]) != grouped
