"""Crash-timing chaos harness for dockerized Kafka and Pulsar clusters.

Layers (dependencies point one way): ``cli``/``pytest_plugin`` -> ``runner`` ->
``case``, ``systems``, ``faults``, ``inject``, ``clients``, ``collect``,
``check``, ``report`` -> ``backend`` -> Docker. ``history`` is the contract
between clients, collector, checker and report.
"""

__version__ = "0.1.0"
