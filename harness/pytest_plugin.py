"""pytest plugin (entry point ``chaos_harness``): case files as tests, fixtures, markers.

* ``pytest cases/`` collects every case YAML under a directory named ``cases``
  (not under a ``data`` directory; names starting with ``_`` are skipped) as one
  test item. A malformed case fails with its one-line error; a run whose verdict
  differs from the expected one fails with the anomaly summary and the run
  directory; an error is reported as such. Items carry the markers ``case``,
  ``docker`` and ``kafka``/``pulsar``.
* Clusters are kept between the cases of one session (a case whose cluster
  settings differ recreates it) and removed when the session ends; if pytest is
  killed, the next run or ``harness clean`` removes them.
* Fixtures: ``chaos_run`` (run a case file or object, returns the outcome),
  ``kafka_cluster`` and ``pulsar_cluster`` (a ready system adapter), and
  ``chaos_reports`` (where run directories go: ``--chaos-reports``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .clusters import SYSTEMS

if TYPE_CHECKING:
    from .case import Case
    from .run import RunOutcome

MARKERS = {
    "docker": "needs a running Docker engine and the cluster images",
    "kafka": "runs a real Kafka cluster",
    "pulsar": "runs a real Pulsar cluster",
    "case": "a chaos case file run as a test",
    "browser": "needs Debian's chromium",
    "full_matrix": "a version-matrix item CI leaves out (a case's versions entry with ci: false); "
                   "`bin/test -m full_matrix` runs them",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos-harness")
    group.addoption("--chaos-reports", default=None,
                    help="directory for run directories (default: the project's reports/)")
    group.addoption("--chaos-spark-master", default=None,
                    help="Spark master for the checker (default: the shared local Spark Connect "
                         "server; see `harness run --help`)")
    group.addoption("--chaos-seed", type=int, default=None,
                    help="the seed of every case's chaos steps (replays a schedule)")
    group.addoption("--chaos-repeat", type=int, default=1, metavar="N",
                    help="run each case up to N times, failing at the first run that does not "
                         "behave as expected")
    group.addoption("--chaos-file-order", action="store_true", default=False,
                    help="run case files in file order (default: cases that need the same "
                         "cluster version and broker settings one after another, so a kept "
                         "cluster is recreated once per setting)")


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    master = config.getoption("--chaos-spark-master", default=None)
    if master:  # a bad one is a usage error before any case runs, not an error in each
        from .check.engine.master import require_reachable
        from .errors import CheckError

        try:
            require_reachable(master, option="--chaos-spark-master")
        except CheckError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix not in (".yaml", ".yml") or file_path.name.startswith("_"):
        return None
    parents = {p.name for p in file_path.parents}
    if "cases" not in parents or "data" in parents:
        return None
    return CaseFile.from_parent(parent, path=file_path)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                   items: list[pytest.Item]) -> None:
    """Case items that need the same cluster setting run one after another (other items keep
    their places); ``--chaos-file-order`` keeps the file order."""
    if config.getoption("--chaos-file-order"):
        return
    from .run.order import by_cluster

    slots = [i for i, item in enumerate(items) if isinstance(item, CaseItem)]
    cases = [item for item in items if isinstance(item, CaseItem)]
    ordered = by_cluster(cases, CaseItem.cluster_setting, CaseItem.default_setting)
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


def _reports_dir(config: pytest.Config) -> Path:
    from .run import DEFAULT_REPORTS

    opt = config.getoption("--chaos-reports")
    return Path(opt) if opt else DEFAULT_REPORTS


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Removes the clusters this process started (they were kept between cases)."""
    if not getattr(session.config, "_chaos_used_docker", False):
        return
    from .backend.cluster import this_owner
    from .backend.docker import LABEL_OWNER, Engine
    from .errors import HarnessError

    try:
        Engine().remove_labelled({LABEL_OWNER: this_owner()})
    except HarnessError:
        pass  # no engine: nothing of ours can be running


class CaseFailed(Exception):
    """A case's verdict differed from its expected verdict (message is the summary)."""


class CaseFile(pytest.File):
    """A case file: one item, or one per entry of its ``versions:`` list (``name[label]``)."""

    def collect(self) -> Iterator[pytest.Item]:
        from .case import load_case
        from .errors import CaseError

        try:
            first = load_case(self.path)
        except CaseError:
            yield CaseItem.from_parent(self, name=self.path.stem)  # it reports the error
            return
        if not first.variants:
            item = CaseItem.from_parent(self, name=self.path.stem)
            if not first.in_ci:
                item.add_marker("full_matrix")
            yield item
        for label in first.variants:
            item = CaseItem.from_parent(self, name=f"{self.path.stem}[{label}]", variant=label)
            if label in first.outside_ci or not first.in_ci:
                item.add_marker("full_matrix")
            yield item


class CaseItem(pytest.Item):
    def __init__(self, *, variant: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.variant = variant
        self.add_marker("case")
        self.add_marker("docker")
        system = _peek_system(self.path)
        if system:
            self.add_marker(system)

    def _case(self) -> Case | None:
        """The case this item runs, for ordering (None when the file is invalid)."""
        from .case import load_case
        from .errors import CaseError

        if not hasattr(self, "_loaded"):
            try:
                self._loaded: Case | None = load_case(self.path, version=self.variant)
            except CaseError:
                self._loaded = None
        return self._loaded

    def cluster_setting(self) -> Hashable | None:
        from .run.order import cluster_setting

        case = self._case()
        return cluster_setting(case) if case is not None else None

    def default_setting(self) -> bool:
        from .run.order import is_default_setting

        case = self._case()
        return case is not None and is_default_setting(case)

    def runtest(self) -> None:
        from .case import load_case
        from .errors import CaseError

        try:
            case = load_case(self.path, version=self.variant)
        except CaseError as exc:
            raise CaseFailed(f"invalid case: {exc}") from None
        repeat = max(1, int(self.config.getoption("--chaos-repeat")))
        for _ in range(repeat):  # stops at the first run that does not behave as expected
            outcome = _run(self.config, case)
            self.user_properties.append(("run_dir", str(outcome.run_dir)))
            if outcome.exit_code != 0:
                raise CaseFailed(_summary(outcome))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"case: {self.name}"


def _peek_system(path: Path) -> str | None:
    """The ``system:`` of a case file, for its marker (no validation here)."""
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("system:"):
                value = line.split(":", 1)[1].split("#")[0].strip()
                return value if value in SYSTEMS else None
    except OSError:
        return None
    return None


def _run(config: pytest.Config, case: Case, seed: int | None = None) -> RunOutcome:
    import sys

    from .run import run_case
    from .run.events import console

    config._chaos_used_docker = True  # type: ignore[attr-defined]
    with console(sys.stdout, prefix="  ", stamp=False):
        return run_case(case, reports_dir=_reports_dir(config), keep_cluster=True,
                        spark_master=config.getoption("--chaos-spark-master"),
                        seed=seed if seed is not None else config.getoption("--chaos-seed"))


def _summary(outcome: RunOutcome) -> str:
    from .report.text import format_result

    return format_result(outcome.result, outcome.run_dir, verbose=True)


# -- fixtures ------------------------------------------------------------------------------
@pytest.fixture
def chaos_reports(request: pytest.FixtureRequest) -> Path:
    """Where this session's run directories go."""
    return _reports_dir(request.config)


@pytest.fixture
def chaos_run(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    """``chaos_run(path_or_case, cluster=None, version=None, seed=None)`` runs a case ->
    RunOutcome.

    The cluster is kept for the session; ``cluster``/``version`` override the file's,
    ``seed`` the run's seed (default: ``--chaos-seed``, else drawn).
    """
    from .case import Case, load_case

    def run(case: str | Path | Case, cluster: str | None = None,
            version: str | None = None, seed: int | None = None) -> Any:
        obj = case if isinstance(case, Case) else load_case(Path(case), cluster=cluster,
                                                             version=version)
        return _run(request.config, obj, seed=seed)

    return run


def _system_fixture(request: pytest.FixtureRequest, name: str) -> Iterator[Any]:
    from .backend.cluster import Cluster
    from .backend.docker import Engine
    from .systems import fit_for_reuse, open_system

    request.config._chaos_used_docker = True  # type: ignore[attr-defined]
    cluster = Cluster.named(Engine(), name)
    reused = cluster.up()
    system = open_system(cluster)
    system.wait_ready(timeout=180)
    if reused and not fit_for_reuse(system, cluster):
        system.wait_ready(timeout=180)
    yield system


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ready ``kafka-zk`` cluster (KafkaSystem), removed at the end of the session."""
    yield from _system_fixture(request, "kafka-zk")


@pytest.fixture(scope="session")
def pulsar_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ready ``pulsar`` cluster (PulsarSystem), removed at the end of the session."""
    yield from _system_fixture(request, "pulsar")
