"""The ``harness`` command: a thin front over the runner and the backend.

Exit codes: 0 pass, 1 expectations not met, 2 error (a HarnessError: one
clear message, no traceback), 130 interrupted (after cleanup).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .check.engine.master import require_reachable
from .clusters import CASES_DIR, REPORTS_DIR, SYSTEMS, regression_dirs
from .errors import HarnessError
from .run.events import console

__all__ = ["main"]

log = logging.getLogger("harness.cli")

DEFAULT_CASE = CASES_DIR / "kafka" / "zk-kill-leader.yaml"


def _engine():  # type: ignore[no-untyped-def]
    from .backend.docker import Engine

    return Engine()


# -- images / cluster / clean ----------------------------------------------------------
def cmd_images_build(args: argparse.Namespace) -> int:
    from .backend.images import ensure_images
    from .clusters import KAFKA_VERSIONS, PULSAR_VERSIONS, versions_of
    from .errors import ImageError

    defaults = {"kafka": KAFKA_VERSIONS[0], "pulsar": PULSAR_VERSIONS[0]}
    systems = [args.system] if args.system else list(SYSTEMS)
    if args.version and not args.system:  # only the systems some cluster runs on that version
        systems = [s for s in systems if args.version in versions_of(s)]
        if not systems:
            known = "; ".join(f"{s}: {', '.join(versions_of(s))}" for s in SYSTEMS)
            raise ImageError(f"no cluster runs version {args.version} ({known}); "
                             f"name the system with --system to build it anyway")
    engine = _engine()
    for system in systems:
        version = args.version or defaults.get(system, "")
        t0 = time.monotonic()
        tag = ensure_images(engine, system, version, force=args.force)
        log.info(f"{tag} ready ({time.monotonic() - t0:.1f}s)")
    return 0


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from .backend.cluster import Cluster
    from .systems import open_system

    engine = _engine()
    cluster = Cluster.named(engine, args.name, args.version, owner="keep")
    t0 = time.monotonic()
    try:
        cluster.up()
        open_system(cluster).wait_ready(timeout=args.timeout)
    except BaseException:
        cluster.down()
        raise
    log.info(f"{args.name} ready in {time.monotonic() - t0:.1f}s; bootstrap {cluster.spec.bootstrap}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from .backend.cluster import Cluster

    Cluster.named(_engine(), args.name).down()
    log.info(f"{args.name} removed")
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
    from .check.engine import server
    from .check.engine.scratch import remove_stale

    stopped = server.stop()  # the checker's shared Spark server, if one runs
    if stopped or not args.quiet:
        log.info(f"clean: {'stopped' if stopped else 'no'} shared Spark Connect server")
    scratch = remove_stale()  # scratch directories of killed checks
    if scratch:
        log.info(f"clean: removed {scratch} scratch director{'y' if scratch == 1 else 'ies'} "
                 "of killed checks")
    if server.remove_leftovers():  # Spark's temporary files, of a server killed with kill -9
        log.info("clean: removed the Spark server's temporary files")
    containers, networks = _engine().remove_labelled({LABEL_MANAGED: "true"})
    if not args.quiet or containers or networks:
        log.info(f"clean: removed {containers} container(s) and {networks} network(s)")
    from .backend.cluster import remove_disks

    disks = remove_disks()
    if disks:
        log.info(f"clean: unmounted and removed {disks} lazy disk(s)")
    return 0


# -- cases ---------------------------------------------------------------------------------
def cmd_nodes_check(args: argparse.Namespace) -> int:
    """``harness nodes check NODES.yaml``: every host answers, accepts the key, has the tools
    and (unless ``--no-runtime``) the prepared Java; one line a host, or one clear error
    (exit 2) naming the file, the node and the fix. Starts nothing on any host."""
    from .backend.ssh import probe
    from .case import load_nodes

    nodes = load_nodes(args.nodes)
    for line in probe(nodes, runtime=not args.no_runtime):
        print(line)
    print(f"{nodes.path}: {len(nodes.nodes)} hosts ready to play cluster {nodes.cluster.name} "
          f"({nodes.version})")
    return 0


def cmd_nodes_prepare(args: argparse.Namespace) -> int:
    """``harness nodes prepare NODES.yaml``: sends each host what it needs to play its node
    (harness.backend.prepare); idempotent."""
    from .backend.prepare import prepare
    from .case import load_nodes

    nodes = load_nodes(args.nodes)
    for line in prepare(_engine(), nodes):
        print(line)
    print(f"{nodes.path}: {len(nodes.nodes)} hosts prepared for {nodes.cluster.system} {nodes.version}")
    return 0


def cmd_nodes_reset(args: argparse.Namespace) -> int:
    """``harness nodes reset NODES.yaml``: what the end of a run does to its hosts, for hosts
    a harness killed with -9 left running: every node's process killed, ``/data`` and
    ``/chaos`` emptied, the faults' network rules and the nodes' names removed."""
    from typing import Any, cast

    from .backend.remote import RemoteCluster
    from .backend.ssh import probe
    from .case import load_nodes

    nodes = load_nodes(args.nodes)
    probe(nodes, runtime=False)  # every host answers: one clear error naming a node otherwise
    RemoteCluster.from_nodes(cast(Any, None), nodes).down()  # no image is needed
    print(f"{nodes.path}: {len(nodes.nodes)} hosts reset (node processes killed, /data and /chaos "
          "emptied, the faults' rules and the nodes' names removed)")
    return 0


def cmd_nodes_standin(args: argparse.Namespace) -> int:
    """``harness nodes standin CLUSTER``: a container running sshd for each node of the
    cluster definition, kept until ``harness clean``, and their nodes file."""
    from .backend.standin import StandinHosts
    from .clusters import get_cluster

    cluster = get_cluster(args.cluster)
    hosts = StandinHosts(_engine(), cluster, args.out, owner="keep", version=args.version)
    path = hosts.up()
    for name, ip in hosts.addresses.items():
        print(f"{name}: root@{ip}")
    print(f"nodes file: {path} (the hosts stay until harness clean)")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .case import find_case_files, load_case

    # A missing path, an empty one or a directory without case files is a CaseError here.
    files = find_case_files(args.paths or [str(CASES_DIR)])
    invalid = 0
    for path in files:
        try:
            load_case(path)
        except HarnessError as exc:
            invalid += 1
            print(exc, file=sys.stderr)
    print(f"{len(files) - invalid} of {len(files)} case file(s) valid")
    return 2 if invalid else 0


def cmd_list(args: argparse.Namespace) -> int:
    from .case import find_case_files, load_case

    invalid = 0
    for path in find_case_files(args.paths or [str(CASES_DIR)]):
        try:
            case = load_case(path)
        except HarnessError as exc:
            invalid += 1
            print(f"{str(path):45} INVALID (see below)")
            print(exc, file=sys.stderr)
            continue
        first = case.description.strip().splitlines()[0] if case.description.strip() else ""
        versions = ", ".join(case.variants) if case.variants else case.version
        print(f"{str(path):45} {case.cluster:12} {versions:7} {first[:70]}")
    return 2 if invalid else 0


def cmd_run(args: argparse.Namespace) -> int:
    from .case import MAX_SEED, load_case
    from .report.text import format_result
    from .run import run_case

    if args.repeat < 1:
        raise HarnessError(f"--repeat {args.repeat}: give at least 1 run")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise HarnessError(f"--seed {args.seed}: a seed is between 0 and {MAX_SEED}")
    case = load_case(DEFAULT_CASE if args.case is None else args.case, cluster=args.cluster,
                     version=args.version)
    hosts = None
    if args.nodes is not None:
        from .backend.remote import fit
        from .case import load_nodes

        if args.keep_cluster:
            raise HarnessError("--keep-cluster and --nodes: a cluster on hosts is made anew for every "
                               "run and stopped after it")
        from .backend.ssh import probe

        hosts = load_nodes(args.nodes)
        fit(case, hosts)
        for line in probe(hosts, runtime=False):  # each answers, takes the key, has the tools
            log.info("%s", line)
    require_reachable(args.spark_master)  # before the run, not when its check starts
    code = 0
    for n in range(1, args.repeat + 1):
        if args.repeat > 1:
            log.info("run %d of %d", n, args.repeat)
        outcome = run_case(case, reports_dir=Path(args.reports), keep_cluster=args.keep_cluster,
                           spark_master=args.spark_master,
                           owner="keep" if args.keep_cluster else None, seed=args.seed, hosts=hosts)
        print(format_result(outcome.result, outcome.run_dir))
        code = outcome.exit_code
        if code != 0:  # the first unexpected verdict ends a repeat (Jepsen's --test-count)
            if args.repeat > 1:
                print(f"run {n} of {args.repeat} did not behave as expected; stopping")
            break
    return code


def cmd_matrix(args: argparse.Namespace) -> int:
    """Runs cases on every version of their ``versions:`` lists; writes reports/matrix.json (the
    record: a full one when no path and no --version narrowed it) and reports/matrix.html; exit
    0 when every cell behaved as stated in every run, 1 otherwise, 2 on an error."""
    import shlex

    from .run.matrix import cells_of, format_table, run_matrix, write_matrix

    if args.reps < 1:
        raise HarnessError(f"--reps {args.reps}: give at least 1 run per cell")
    if args.paths and args.system:
        raise HarnessError("give case paths or --system, not both (--system picks "
                           "cases/<system>/regressions)")
    cells = cells_of(args.paths or regression_dirs(args.system), args.version or ())
    if not cells:
        raise HarnessError(f"no case has a version entry named {', '.join(args.version)}")
    require_reachable(args.spark_master)
    done = run_matrix(cells, reps=args.reps, reports_dir=Path(args.reports),
                      spark_master=args.spark_master)
    command = shlex.join(["harness", "matrix", *(args.paths or []),
                          *(["--system", args.system] if args.system else []),
                          *(["--reps", str(args.reps)] if args.reps > 1 else []),
                          *[w for v in args.version or () for w in ("--version", v)]])
    page = write_matrix(done, Path(args.reports), command=command,
                        full=not args.paths and not args.version and not args.system)
    print(format_table(done))
    print(f"matrix: {page}")
    if any(c.errors for c in done):
        return 2
    return 0 if all(c.as_expected == len(c.runs) for c in done) else 1


def _key_values(items: Sequence[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a mapping; one clear error for an item without ``=``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HarnessError(f"{option} {item!r}: give KEY=VALUE, e.g. "
                               f"{option} inter.broker.protocol.version=0.11.0-IV1")
        out[key.strip()] = value.strip()
    return out


def cmd_explore(args: argparse.Namespace) -> int:
    """``harness explore``: a campaign of drawn fault schedules (harness.explore); exit 1 when
    it found a broken promise (reproduced or not), 0 when it found nothing, 2 on an error.
    ``--dry-run N`` prints the first N schedules' case files and runs nothing."""
    import random
    import shlex

    from .explore import run_campaign
    from .explore.schedule import case_text, draw

    for name in ("runs", "probe_runs", "confirm_runs", "max_tries"):
        if getattr(args, name) < 1:
            raise HarnessError(f"--{name.replace('_', '-')} {getattr(args, name)}: give at least 1")
    if args.minutes <= 0:
        raise HarnessError(f"--minutes {args.minutes:g}: give a positive budget")
    # checked by the first draw, before any run
    faults = None if args.faults is None else tuple(f.strip() for f in args.faults.split(",") if f.strip())
    config = _key_values(args.broker_config or (), "--broker-config")
    if args.dry_run is not None:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        seeds = random.Random(seed)
        for _ in range(args.dry_run):
            print(case_text(draw(seeds.randrange(2**31), args.cluster, args.version, disk=args.disk,
                                 faults=faults, broker_config=config)))
        return 0
    require_reachable(args.spark_master)
    camp = run_campaign(args.cluster, args.version, seed=args.seed, runs=args.runs, minutes=args.minutes,
                        reports_dir=Path(args.reports), do_shrink=not args.no_shrink,
                        probe_runs=args.probe_runs, confirm_runs=args.confirm_runs,
                        max_tries=args.max_tries, other_versions=tuple(args.versions or ()),
                        command=shlex.join(["harness", "explore", *sys.argv[2:]]),
                        spark_master=args.spark_master, disk=args.disk, faults=faults,
                        broker_config=config)
    for f in camp.explained:
        print(f"explore: run {f['run']}'s {', '.join(f['anomalies'])} followed an unclean election "
              f"({'; '.join(f['unclean'])}), which Kafka documents: not counted as a finding")
    for f in camp.flaky:
        print(f"explore: found {', '.join(f['anomalies'])} in run {f['run']} (seed {camp.seed}), back in "
              f"{f['rechecked']} rechecks: not shrunk, its case is in the campaign's cases/")
    if camp.finding is None:
        print(f"explore: nothing {'else ' if camp.flaky else ''}found in {len(camp.runs)} runs "
              f"(seed {camp.seed})")
        return 1 if camp.flaky else 0
    outcome = ""
    if camp.found_case:
        outcome = f"; shrunk to {camp.found_case}, reproduced {camp.confirmed}"
    elif camp.confirmed:
        outcome = f"; the shrunk schedule reproduced it in {camp.confirmed} runs, too few for a case"
    print(f"explore: found {', '.join(camp.finding['anomalies'])} in run {camp.finding['run']} "
          f"(seed {camp.seed}){outcome}")
    return 1


RUN_DIR_HELP = "a run's directory (reports/<run>, as `harness run` prints it)"
SPARK_MASTER_HELP = ("where the check runs: local-connect (default, or $HARNESS_SPARK_MASTER): a Spark "
                     "Connect server on loopback shared by harness processes, started on first use, "
                     "stopped when idle or by `harness clean`; local[*]: Spark in this process; "
                     "spark://HOST:PORT: a standalone cluster; sc://HOST:PORT: a Spark Connect server")


def cmd_check(args: argparse.Namespace) -> int:
    """Checks a stored run again and judges it against its case copy: rewrites result.json
    and the report, prints the summary; exit code as ``harness run``'s."""
    from .report.text import format_result
    from .run.recheck import recheck

    run_dir = Path(args.run_dir)
    result = recheck(run_dir, spark_master=args.spark_master)
    print(format_result(result, run_dir))
    return result.exit_code


def cmd_report(args: argparse.Namespace) -> int:
    from .report import render_index, render_run

    run_dir = Path(args.run_dir)
    path = render_run(run_dir)  # a HarnessError unless run_dir is a run directory
    print(f"report: {path}")
    parent = run_dir.resolve().parent
    if render_index(parent) is None:
        print(f"harness: index not updated: {parent / 'index.html'} was not written by the harness "
              "(left as it is)", file=sys.stderr)
    return 0


# -- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=(
        "Crash-timing chaos harness for dockerized Kafka and Pulsar clusters."))
    sub = p.add_subparsers(dest="command", required=True)

    images = sub.add_parser("images", help="build the cluster images").add_subparsers(
        dest="images_command", required=True)
    build = images.add_parser("build", help="build (or reuse cached) images")
    build.add_argument("--system", choices=SYSTEMS)
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

    clean = sub.add_parser("clean", help="remove every harness container and network (by label); "
                                         "stop the shared Spark server; remove scratch left by killed checks")
    clean.add_argument("--quiet", action="store_true")
    clean.set_defaults(fn=cmd_clean)

    run = sub.add_parser("run", help="run one case (default: a Kafka leader kill)")
    run.add_argument("case", nargs="?", help=f"case file (default: {DEFAULT_CASE.name})")
    run.add_argument("--reports", default=str(REPORTS_DIR),
                     help="where run directories go (default: reports/)")
    run.add_argument("--cluster", help="run on this cluster instead of the case's (same system)")
    run.add_argument("--version", help="run on this version instead of the case's")
    run.add_argument("--seed", type=int, help="the seed of the case's chaos steps (replays a "
                     "schedule: the report of a run names its seed)")
    run.add_argument("--repeat", type=int, default=1, metavar="N",
                     help="run the case up to N times, stopping at the first run that does "
                          "not behave as expected")
    run.add_argument("--keep-cluster", action="store_true",
                     help="leave the cluster running after the run; later runs reuse it until "
                          "`harness cluster down NAME` or `harness clean`")
    run.add_argument("--nodes", metavar="FILE",
                     help="run on the hosts this nodes file names, over SSH, instead of containers "
                          "(docs/remote.md); each run prepares them and empties their /data")
    run.add_argument("--spark-master", help=SPARK_MASTER_HELP)
    run.set_defaults(fn=cmd_run)

    matrix = sub.add_parser("matrix", help="run cases on every version they name; write "
                                           "reports/matrix.html (case x version)")
    matrix.add_argument("paths", nargs="*", help="case files or directories "
                                                 "(default: cases/kafka/regressions and "
                                                 "cases/pulsar/regressions)")
    matrix.add_argument("--system", choices=SYSTEMS,
                        help="only this system's regression library (cases/<system>/regressions)")
    matrix.add_argument("--reps", type=int, default=1, help="runs per case and version (default 1)")
    matrix.add_argument("--version", action="append",
                        help="only the version entries with this label (a case without "
                             "versions: its version; repeatable)")
    matrix.add_argument("--reports", default=str(REPORTS_DIR))
    matrix.add_argument("--spark-master", help=SPARK_MASTER_HELP)
    matrix.set_defaults(fn=cmd_matrix)

    explore = sub.add_parser("explore", help="run drawn fault schedules until one breaks a promise; "
                                             "shrink it to a case under cases/found/")
    explore.add_argument("--cluster", default="kafka-zk", help="the cluster (default kafka-zk)")
    explore.add_argument("--version", help="its version (default: the cluster's)")
    explore.add_argument("--seed", type=int, help="the campaign's seed (default: drawn; printed)")
    explore.add_argument("--disk", choices=("plain", "lazy"), default="plain",
                         help="lazy: the nodes' data on lazy disks, and power losses (every unsynced "
                              "byte lost) drawn on every system")
    explore.add_argument("--faults", metavar="F,F,...",
                         help="the faults to draw, of kill9, stop, pause, partition, powerloss (Kafka, or "
                              "--disk lazy), degrade, clock (default: all but degrade and clock)")
    explore.add_argument("--broker-config", action="append", metavar="KEY=VALUE",
                         help="a broker property for the runs on --version, not on --versions "
                              "(repeatable), e.g. inter.broker.protocol.version=0.11.0-IV1")
    explore.add_argument("--runs", type=int, default=60, help="search runs at most (default 60)")
    explore.add_argument("--minutes", type=float, default=120, help="search budget (default 120)")
    explore.add_argument("--no-shrink", action="store_true", help="stop at the first finding")
    explore.add_argument("--probe-runs", type=int, default=2,
                         help="runs of each shrink candidate, all of which must fail (default 2)")
    explore.add_argument("--confirm-runs", type=int, default=10,
                         help="runs of the shrunk case (default 10)")
    explore.add_argument("--max-tries", type=int, default=30, help="shrink candidates at most (default 30)")
    explore.add_argument("--versions", action="append",
                         help="also run the shrunk case on this version (repeatable)")
    explore.add_argument("--dry-run", type=int, metavar="N",
                         help="print the first N drawn schedules as case files; run nothing")
    explore.add_argument("--reports", default=str(REPORTS_DIR))
    explore.add_argument("--spark-master", help=SPARK_MASTER_HELP)
    explore.set_defaults(fn=cmd_explore)

    nodes = sub.add_parser("nodes", help="hosts reached over SSH that play a cluster's nodes "
                                         "(a nodes file: docs/remote.md)").add_subparsers(
        dest="nodes_command", required=True)
    ncheck = nodes.add_parser("check", help="check that every host of a nodes file answers, accepts "
                                            "the key and has what a node needs; starts nothing")
    ncheck.add_argument("nodes", type=Path, help="the nodes file")
    ncheck.add_argument("--no-runtime", action="store_true",
                        help="do not require the Java that harness nodes prepare installs")
    ncheck.set_defaults(fn=cmd_nodes_check)
    nprepare = nodes.add_parser("prepare", help="send every host of a nodes file the Java runtime, "
                                                "the system's jars and the node supervisor "
                                                "(from the local image; idempotent)")
    nprepare.add_argument("nodes", type=Path, help="the nodes file")
    nprepare.set_defaults(fn=cmd_nodes_prepare)
    nreset = nodes.add_parser("reset", help="stop every node a run left on the hosts of a nodes file "
                                            "(a harness killed with -9): kill, empty /data, remove "
                                            "the faults' rules and the names")
    nreset.add_argument("nodes", type=Path, help="the nodes file")
    nreset.set_defaults(fn=cmd_nodes_reset)
    nstandin = nodes.add_parser("standin", help="start a container running sshd for each node of a "
                                                "cluster and write their nodes file (to try the SSH "
                                                "backend on one machine)")
    nstandin.add_argument("cluster", help="the cluster definition (kafka-zk, kafka-kraft, pulsar, ...)")
    nstandin.add_argument("--version", help="the version the nodes file names (default: the cluster's)")
    nstandin.add_argument("--out", type=Path, default=Path("reports/standin"),
                          help="the folder for the key and nodes.yaml (default: reports/standin)")
    nstandin.set_defaults(fn=cmd_nodes_standin)

    validate = sub.add_parser("validate", help="validate case files (no Docker)")
    validate.add_argument("paths", nargs="*", help="files or directories (default: cases/)")
    validate.set_defaults(fn=cmd_validate)

    lst = sub.add_parser("list", help="list case files")
    lst.add_argument("paths", nargs="*")
    lst.set_defaults(fn=cmd_list)

    check = sub.add_parser("check", help="check a stored run again: judge it, rewrite its "
                                         "result.json and report (exit 0/1/2)")
    check.add_argument("run_dir", help=RUN_DIR_HELP)
    check.add_argument("--spark-master", help=SPARK_MASTER_HELP)
    check.set_defaults(fn=cmd_check)

    report = sub.add_parser("report", help="regenerate a run's HTML report (and the index)")
    report.add_argument("run_dir", help=RUN_DIR_HELP)
    report.set_defaults(fn=cmd_report)
    return p


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM cleans up like Ctrl-C: heal, collect, tear down."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        with console():
            return int(args.fn(args))
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a path the commands did not foresee: still one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"harness: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted (cleanup done)", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
