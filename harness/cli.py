"""The ``harness`` command: a thin front over the runner and the backend.

Exit codes: 0 pass, 1 expectations not met, 2 error (a HarnessError: one
clear message, no traceback), 130 interrupted (after cleanup).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import HarnessError

__all__ = ["main"]

DEFAULT_CASE = Path(__file__).resolve().parent.parent / "cases" / "kafka" / "zk-kill-leader.yaml"


def progress(msg: str) -> None:
    """One timestamped progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _engine():  # type: ignore[no-untyped-def]
    from .backend.docker import Engine

    return Engine()


# -- images / cluster / clean ----------------------------------------------------------
def cmd_images_build(args: argparse.Namespace) -> int:
    from .backend.images import SYSTEMS, ensure_images
    from .clusters import KAFKA_VERSIONS, PULSAR_VERSIONS

    defaults = {"kafka": KAFKA_VERSIONS[0], "pulsar": PULSAR_VERSIONS[0]}
    systems = [args.system] if args.system else list(SYSTEMS)
    engine = _engine()
    for system in systems:
        version = args.version or defaults.get(system, "")
        t0 = time.monotonic()
        tag = ensure_images(engine, system, version, progress=progress, force=args.force)
        progress(f"{tag} ready ({time.monotonic() - t0:.1f}s)")
    return 0


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from .backend.cluster import Cluster
    from .systems import open_system

    engine = _engine()
    cluster = Cluster.named(engine, args.name, args.version, owner="keep")
    t0 = time.monotonic()
    try:
        cluster.up(progress)
        open_system(cluster).wait_ready(timeout=args.timeout)
    except BaseException:
        cluster.down()
        raise
    progress(f"{args.name} ready in {time.monotonic() - t0:.1f}s; bootstrap {cluster.spec.bootstrap}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from .backend.cluster import Cluster

    Cluster.named(_engine(), args.name).down()
    progress(f"{args.name} removed")
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from .backend.docker import LABEL_CLUSTER, LABEL_MANAGED, LABEL_OWNER

    rows = _engine().containers({LABEL_MANAGED: "true"})
    if not rows:
        print("no harness containers")
    for c in sorted(rows, key=lambda c: c.name):
        print(f"{c.labels.get(LABEL_CLUSTER, '?'):12} {c.service:10} {c.status:8} "
              f"owner={c.labels.get(LABEL_OWNER, '?')}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from .backend.docker import LABEL_MANAGED

    containers, networks = _engine().remove_labelled({LABEL_MANAGED: "true"})
    if not args.quiet or containers or networks:
        progress(f"clean: removed {containers} container(s) and {networks} network(s)")
    return 0


# -- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=(
        "Crash-timing chaos harness for dockerized Kafka and Pulsar clusters."))
    sub = p.add_subparsers(dest="command", required=True)

    images = sub.add_parser("images", help="build the cluster images").add_subparsers(
        dest="images_command", required=True)
    build = images.add_parser("build", help="build (or reuse cached) images")
    build.add_argument("--system", choices=["kafka", "pulsar"])
    build.add_argument("--version", help="system version (default: the cluster default)")
    build.add_argument("--force", action="store_true", help="rebuild even when inputs are unchanged")
    build.set_defaults(fn=cmd_images_build)

    cluster = sub.add_parser("cluster", help="bring a cluster up or down").add_subparsers(
        dest="cluster_command", required=True)
    up = cluster.add_parser("up", help="start a cluster and wait until it is ready")
    up.add_argument("name")
    up.add_argument("--version")
    up.add_argument("--timeout", type=float, default=180)
    up.set_defaults(fn=cmd_cluster_up)
    down = cluster.add_parser("down", help="remove a cluster's containers and network")
    down.add_argument("name")
    down.set_defaults(fn=cmd_cluster_down)
    status = cluster.add_parser("status", help="list harness containers")
    status.set_defaults(fn=cmd_cluster_status)

    clean = sub.add_parser("clean", help="remove every harness container and network (by label)")
    clean.add_argument("--quiet", action="store_true")
    clean.set_defaults(fn=cmd_clean)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("harness: interrupted (cleanup done)", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
