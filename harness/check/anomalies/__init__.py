"""What each anomaly is: one module per family (:data:`harness.anomalies.FAMILIES`), each
holding together its anomalies' definitions (its docstring), how they are found (a
Spark condition over the per-id table, or a NumPy kernel of the position pass) and how
their examples are built. :mod:`~harness.check.anomalies.vocab` is the words they share
(codes, flags, transaction states, the uniform anomaly row); they never import the engine
(:mod:`harness.check.engine`) or the plan (:mod:`harness.check.plan`).

A family module has ``KINDS`` (its anomalies, as the registry has them), ``LOOKUP`` (the
kinds whose examples need rows looked up again) and ``example_of(kind, row, names,
details)``; how it finds them is its own (the plan calls it). This package's face imports
nothing, so that the vocabulary goes where Spark is not (the reference checker, the
Python workers).
"""
