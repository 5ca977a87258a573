"""Where a check runs and how fast: the Spark session (:mod:`.session`) and its settings
(:mod:`.conf`), the shared Spark Connect server (:mod:`.server`), its Java and AOT cache
(:mod:`.aot`, :mod:`.training`), its Python worker pool (:mod:`.daemon`), the master
(:mod:`.master`), scratch space (:mod:`.scratch`), task scheduling (:mod:`.tasks`,
:mod:`.frames`) and memory (:mod:`.memory`). It names no anomaly and no step of a check,
and imports neither: what a check is, the plan (:mod:`harness.check.plan`) hands it.
"""
