"""The checker's kernels go to the Python workers by value: a cluster's executors need NumPy
and PyArrow, not this package. A kernel that calls a function of another module of the
package, or one wrapped by ``functools.cache``, would go by reference and fail there; the
standalone-cluster test cannot see that (its workers run this interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from harness.check import check_run, plan
from harness.check.engine import memory, tasks
from harness.check.engine.frames import Frames
from harness.testing.synthetic import Profile, generate

# Loads pickled kernels (length-prefixed on stdin) where no module of this package can be
# imported, and says for each whether it loaded.
LOAD = """
import pickle, struct, sys
sys.modules["harness"] = None  # any import of the package fails
data = sys.stdin.buffer.read()
while data:
    (n,) = struct.unpack(">I", data[:4])
    blob, data = data[4:4 + n], data[4 + n:]
    try:
        pickle.loads(blob)
        print("ok")
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")
"""


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every kernel a check hands to Spark, and each as a task list's wrapper
    (:func:`harness.check.engine.tasks.by_index`, a big check's form)."""
    seen: list[Any] = []
    each = Frames.each

    def spy(self: Any, rows: Any, ddl: str, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend([kernel, tasks.by_index(list(rows), ddl, kernel)])
        return each(self, rows, ddl, kernel, *args, **kwargs)

    monkeypatch.setattr(Frames, "each", spy)
    generate(tmp_path / "run", Profile(records=300, partitions=3, replicas=1, txn=True, seed=3))
    check_run(tmp_path / "run")
    return seen


def _load_without_harness(blobs: list[bytes]) -> list[str]:
    data = b"".join(len(b).to_bytes(4, "big") + b for b in blobs)
    proc = subprocess.run([sys.executable, "-c", LOAD], input=data, capture_output=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().splitlines()


def test_kernels_load_without_this_package(kernels: list[Any]) -> None:
    names = {k.__module__ for k in kernels}
    assert {"harness.check.ingest", "harness.check.mids", "harness.check.placed", "harness.check.latency",
            "harness.check.engine.tasks"} <= names
    registered = set(cloudpickle.list_registry_pickle_by_value())
    assert {m.__name__ for m in plan.KERNELS} <= registered
    memory.give_back()  # as a big partition's kernel run in this process would: no state kept
    assert _load_without_harness([cloudpickle.dumps(k) for k in kernels]) == ["ok"] * len(kernels)


def test_the_loader_tells_a_reference_to_this_package() -> None:
    """The subprocess above does fail on a kernel that needs this package."""
    from harness.check import details

    assert _load_without_harness([cloudpickle.dumps(details.read)]) != ["ok"]
