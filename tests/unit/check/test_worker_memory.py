"""The shared server's workers (harness.check.daemon): memory freed by a task is kept
for the next one; glibc's is given back past the limit (Arrow's pool keeps its own); what
the daemon imported before forking is frozen, out of the workers' collections."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

_SCRIPT = textwrap.dedent("""
    from harness.check.engine import daemon
    daemon._keep_freed_memory()  # as the daemon does, before PyArrow loads
    import numpy as np, pyarrow as pa, pyarrow.compute as pc
    mib = 1 << 20
    def resident():
        return daemon._resident() // mib
    base = resident()
    a = pa.array(np.arange(50_000_000)); b = pc.add(a, 1); del a, b  # NumPy's 400 MB, Arrow's 400
    x = np.ones(50_000_000); x += 1; del x  # NumPy's 400 MB again: the same memory, reused
    kept = resident() - base
    daemon._release(1 << 40)   # under the limit: nothing given back
    still = resident() - base
    daemon._release(0)         # over it: glibc's given back
    print(kept, still, resident() - base)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and /proc")
def test_worker_keeps_freed_memory_up_to_its_limit() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    kept, still, after = map(int, out.stdout.split())
    assert kept > 700 and still > 700, out.stdout  # NumPy's and Arrow's 400 MB held
    assert still - after > 350 and after > 350, out.stdout  # NumPy's back, Arrow's kept


def test_keep_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.check.engine import daemon  # no settings change on import: only when run

    monkeypatch.setenv("HARNESS_WORKER_KEEP_MB", "0")
    assert daemon.keep_bytes() == 0
    monkeypatch.delenv("HARNESS_WORKER_KEEP_MB")
    assert 1 << 30 <= daemon.keep_bytes() <= 4 << 30


def test_workers_leave_what_the_daemon_imported_out_of_their_collections() -> None:
    """A worker of the shared server runs a full collection after each task: the objects
    it inherits from the daemon are frozen (``gc.freeze``), so it walks only its own."""
    from harness.check import plan
    from harness.check.engine import master

    if master.master_of(None) != master.DEFAULT_MASTER:
        pytest.skip("the daemon is the shared server's; $HARNESS_SPARK_MASTER names another master")

    def frozen(batches: Any) -> Any:
        import gc

        import pyarrow as pa

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"frozen": [gc.get_freeze_count()]})

    rows = plan.session_for().range(2).repartition(2).mapInArrow(frozen, "frozen long").collect()
    assert len(rows) == 2 and all(r.frozen > 30_000 for r in rows), rows  # NumPy's, PyArrow's, PySpark's
