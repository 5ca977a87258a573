"""Cluster figures: image build time (cold and warm), time to ready, memory.

    python bench/bench_clusters.py                 # warm builds, every cluster
    python bench/bench_clusters.py --cold          # first removes the harness images and
                                                   # build caches (Maven's ~/.m2 is kept)
    python bench/bench_clusters.py --clusters kafka-zk

Prints one table; every cluster it starts is removed again.
"""

from __future__ import annotations

import argparse
import shutil
import time
from typing import cast

from harness.backend.cluster import Cluster
from harness.backend.docker import Container, Engine
from harness.backend.images import BASE_TAG, IMAGES_DIR, JVM_TAG, ensure_images, image_tag
from harness.clusters import CLUSTERS
from harness.systems import open_system


def _mem_mib(cluster: Cluster) -> float:
    total = 0.0
    for node in cluster.nodes():
        stats = cast(Container, node.container).stats()  # Docker nodes only
        usage = stats.get("memory_stats", {})
        total += (usage.get("usage", 0) - usage.get("stats", {}).get("cache", 0)) / 2**20
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", nargs="*", default=list(CLUSTERS))
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    engine = Engine()
    builds = {}
    wanted = {(CLUSTERS[c].system, v) for c in args.clusters for v in CLUSTERS[c].versions[:1]}
    if args.cold:
        for system, version in wanted:
            engine.remove_image(image_tag(system, version))
        engine.remove_image(JVM_TAG)
        engine.remove_image(BASE_TAG)
        for sub in ("jvm", "kafka", "pulsar"):
            shutil.rmtree(IMAGES_DIR / sub / "build", ignore_errors=True)
    for system, version in sorted(wanted):
        t0 = time.monotonic()
        ensure_images(engine, system, version)
        first = time.monotonic() - t0
        t0 = time.monotonic()
        ensure_images(engine, system, version)
        builds[(system, version)] = (first, time.monotonic() - t0)
    print(f"{'image':28} {'build (s)':>10} {'again (s)':>10}")
    for (system, version), (first, again) in sorted(builds.items()):
        print(f"{image_tag(system, version):28} {first:10.1f} {again:10.2f}")
    print()
    print(f"{'cluster':14} {'up->ready (s)':>14} {'memory (MiB)':>13}")
    for name in args.clusters:
        cluster = Cluster.named(engine, name)
        cluster.down()
        try:
            t0 = time.monotonic()
            cluster.up(reuse=False)
            open_system(cluster).wait_ready(timeout=300)
            ready = time.monotonic() - t0
            time.sleep(5)
            print(f"{name:14} {ready:14.1f} {_mem_mib(cluster):13.0f}")
        finally:
            cluster.down()


if __name__ == "__main__":
    main()
