"""Crash-timing chaos harness for dockerized Kafka and Pulsar clusters.

Layering. A *unit* is a top-level module ``harness/x.py`` or package
``harness/x/`` (``harness`` itself is this package's ``__init__``). Units form
layers and dependencies point down: a unit may import the units its row below
names, and ``*`` names every unit of a lower layer. A row names units of lower
layers, or of its own layer where that is allowed; never of a higher one.
Besides: only ``backend`` imports the docker SDK, only ``check`` imports
pyspark, and nothing in the product imports ``testing`` (test data and oracles,
for tests and bench). ``tests/unit/test_layering.py`` parses this table and
checks every import under ``harness/`` against it (imports inside functions and
under ``TYPE_CHECKING`` count too), and that no units import each other in a
cycle.

::

    layer  unit           may import
    0      errors         -
    1      anomalies      -
    1      clusters       errors
    1      history        errors
    1      points         errors
    1      result         errors
    1      wait           errors
    2      backend        clusters, errors
    2      case           anomalies, clusters, errors, history, points
    3      clients        backend, errors, history
    3      collect        backend, errors, history, wait
    3      faults         backend, errors, history, wait
    3      systems        backend, case, clients, clusters, collect, errors, history, wait
    4      check          anomalies, errors, history
    4      inject         backend, case, errors, history, points, systems, wait
    4      report         anomalies, check, errors, history, result
    5      run            *
    5      explore        case, clusters, errors, points, run
    6      cli            *
    6      pytest_plugin  *
    7      __main__       cli
    7      harness        *
    7      testing        anomalies, check, clusters, errors, history, result

``errors`` is the exception tree, ``history`` the contract between clients,
collector, checker and report, ``result`` that of ``result.json``, ``points``
the crash-timing points table, ``anomalies`` the anomaly names; ``backend`` is
the only way to Docker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The public API, imported on first use (``import harness`` stays cheap: the CLI and the
#: pytest plugin load it on every start).
__all__ = [
    "Case",
    "HarnessError",
    "RunOutcome",
    "RunResult",
    "System",
    "check_run",
    "load_case",
    "run_case",
]

_EXPORTS = {
    "Case": "harness.case",
    "load_case": "harness.case",
    "HarnessError": "harness.errors",
    "RunOutcome": "harness.run",
    "run_case": "harness.run",
    "RunResult": "harness.result",
    "System": "harness.systems.base",
    "check_run": "harness.check",
}

if TYPE_CHECKING:
    from .case import Case, load_case
    from .check import check_run
    from .errors import HarnessError
    from .result import RunResult
    from .run import RunOutcome, run_case
    from .systems.base import System


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
