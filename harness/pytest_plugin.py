"""pytest plugin (entry point ``chaos_harness``): markers, fixtures, case files as tests."""

from __future__ import annotations

import pytest

MARKERS = {
    "docker": "needs a running Docker engine and the cluster images",
    "kafka": "runs a real Kafka cluster",
    "pulsar": "runs a real Pulsar cluster",
    "case": "a chaos case file run as a test",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
