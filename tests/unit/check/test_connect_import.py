"""A check's process imports PySpark's Connect client without IPython (about 0.3 to 0.4 s of
a fresh ``harness check`` where IPython is installed), and IPython stays importable."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PROBE = """
import sys
from harness.check.engine import session

session.import_connect_client()
assert "pyspark.sql.connect.shell.progress" in sys.modules
print("IPython" in sys.modules)
from pyspark.sql.connect.client import SparkConnectClient  # the client the session uses
print("IPython" in sys.modules)
import IPython
print(IPython.__name__)
"""


@pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="IPython is not installed here")
def test_the_connect_client_is_imported_without_ipython() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "IPython"]
