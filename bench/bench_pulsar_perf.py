"""The harness's instrumented Pulsar producer beside Pulsar's own ``pulsar-perf produce``,
on the same cluster, row by row (issue 16: seed 002's table for Pulsar).

    python bench/bench_pulsar_perf.py [--records 100000] [--rows p1 p1-1k p3 p1-java p1-java-1k]
                                      [--reps 1] [--sizes]
                                      [--fault [--fault-rate 2000] [--fault-seconds 90]]
                                      [--html reports/bench-pulsar-perf.html]

Rows (each on a fresh non-partitioned persistent topic, ``--records`` records):

  p1      one producer, 100-byte records
  p1-1k   one producer, 1 KB records (pulsar-perf's default size)
  p3      three producers on one topic at once (their records/s summed)
  p1-java one producer, 100-byte records, the harness's Java driver (the cases'
          ``client: {driver: java}``) at an unbounded rate
  p1-java-1k  the same with 1 KB records
  p1-bare, p1-bare-1k  the Python library alone (pulsar-client, as the harness's producer
          sets it up, ``send_async`` with a callback that only counts; no history, no
          message ids): the ceiling of any per-message Python producer on this machine

Harness side: ``PulsarProducerClient`` of harness/clients/pulsar.py (the Python client,
batching on, as in the cases), writing its history to a temporary file; three producers are
three threads of this process. Tool side: ``pulsar-perf produce`` (``PulsarPerfTestTool``,
pulsar-testclient 4.0.6's jar from Maven Central, which has no 4.0.7, on the broker
image's classpath; compose/images/pulsar-perf/pom.xml) in a
helper container of the broker image on the cluster's network, against the brokers' internal
listeners (a multi-host service URL, as the harness's clients use), with an unbounded rate
(``-r 10000000``), ``-m`` records and ``-n`` producers;
batches of at most 128 KB and a 30-s send timeout as the harness's producers have
(SAME_SETTINGS), other settings pulsar-perf's defaults (batching on, 1 ms publish delay). ``--sizes``
adds a size sweep (10 B to 100 KB, one producer; each step at most ``--sweep-mb`` MB).

``--reps N`` runs each row (not the sweep, not the fault row) N times, each on a fresh topic,
and prints the medians with the spread of records/s (as bench_seed002.py's ``--reps``). The
two sides alternate (harness, tool, harness, tool, ...), so that a drift of the machine's
load or of the cluster's warmth touches both alike; ``--warmup N`` runs N such pairs first
and drops them (a fresh cluster's first runs are slower on both sides). Each row's note
gives the median of the paired ratios beside the ratio of the medians.

Figures: records/s from the first send to the ``--records``-th acknowledgement while the
producer still sends, on both sides: pulsar-perf's own measure (for pulsar-perf, from the
time stamps of its log lines; not its closing summary, which is wrong for runs shorter than
10 s: parse_pulsar_perf_run; the harness's rows send up to twice ``--records``: OVERSEND);
MB/s as 2^20 bytes per second of record values (pulsar-perf prints Mbit/s of 2^20 bits:
divided by 8); pulsar-perf's publish latency p50/p99/p99.9 (ms, "Aggregated latency stats");
the harness measures its send-to-ack latency in the checker, not here.

``--fault`` adds a row with a fault in the middle (the Kafka bench's ``--fault`` for Pulsar):
each side in turn sends 100-byte records at ``--fault-rate`` records/s for ``--fault-seconds``
to a fresh non-partitioned topic; a third of the way in, the broker that owns the topic is
killed -9; at two thirds it is started again. Per phase (before, during, after): the harness's
acknowledged records/s and send-to-ack p50/p99/max of the sends invoked in the phase (from its
history); pulsar-perf's 10-s lines (``-r`` rate, ``-time`` seconds), each placed in the phase
its middle falls in by Docker's time stamps: the mean of their msg/s and of their mean
latencies, the largest of their p99s (a window's percentile cannot be merged with another's:
the largest is a bound, not the phase's p99) and of their maxima. pulsar-perf's clock starts
at its "Created N producers" line. Then the harness's producer and a consumer together, open
loop, under the same fault: per phase of send time, records received per second and the
end-to-end latency p50/p99/max (harness side only).

Traffic stays between this process and the cluster's containers (loopback ports) and
inside the cluster's network; every loop is bounded in records and time.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections.abc import Callable  # noqa: E402

from bench_seed002 import (  # noqa: E402
    MB,
    PHASES,
    SIZES,
    Figures,
    Phase,
    Row,
    _summed,
    _threads,
    docker_time,
    fault_table,
    harness_phases,
    median_of,
    paced_with_fault,
    page,
    ratio,
    run_open_loop,
    table,
    trip_phases,
)
from harness.backend.cluster import Cluster  # noqa: E402
from harness.backend.docker import Engine  # noqa: E402
from harness.backend.images import IMAGES_DIR, _maven_copy  # noqa: E402
from harness.case.model import ClientSpec  # noqa: E402
from harness.clients.pulsar import PulsarProducerClient  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.history import HistoryWriter  # noqa: E402
from harness.systems.pulsar import PulsarSystem  # noqa: E402

ROWS = ("p1", "p1-1k", "p3", "p1-java", "p1-java-1k", "p1-bare", "p1-bare-1k")
TOOL_TIMEOUT_S = 600.0
PERF_DIR = IMAGES_DIR / "pulsar-perf"
#: Maven Central has no pulsar-testclient 4.0.7 (compose/images/pulsar-perf/pom.xml): the nearest
PERF_VERSION = "4.0.6"

_LATENCY = re.compile(r"Aggregated latency stats --- Latency: mean:\s*[\d.]+ ms - med:\s*([\d.]+) - "
                      r"95pct:\s*[\d.]+ - 99pct:\s*([\d.]+) - 99\.9pct:\s*([\d.]+)")


_PERIODIC = re.compile(r"^(\S+) Throughput produced:\s*(\d+) msg ---\s*([\d.]+) msg/s ---\s*([\d.]+) Mbit/s "
                       r".*Latency: mean:\s*([\d.]+) ms - med:\s*([\d.]+) - 95pct:\s*[\d.]+ "
                       r"- 99pct:\s*([\d.]+) .*- Max:\s*([\d.]+)\s*$")
#: pulsar-perf prints a line every 10 s (PerformanceProducer's reporting loop)
WINDOW_S = 10.0


def perf_phases(logs: str, kill_t: float, restart_t: float) -> dict[str, Phase]:
    """Per phase, from pulsar-perf's 10-s lines with Docker's time stamps (each line covers
    the 10 s before it; a window is in the phase its middle falls in): the mean of the
    windows' msg/s and mean latencies, the largest of their p99s and maxima (ms). A window in
    which nothing was acknowledged counts in the rate (0) and not in the latency (it prints
    zeros: nothing measured, not 0 ms)."""
    windows: dict[str, list[tuple[float, float, float, float]]] = {p: [] for p in PHASES}
    for line in logs.splitlines():
        m = _PERIODIC.match(line.strip())
        if not m or (at := docker_time(m.group(1))) is None:
            continue
        middle = at - WINDOW_S / 2
        phase = "before" if middle < kill_t else "during" if middle < restart_t else "after"
        windows[phase].append((float(m.group(3)), float(m.group(5)), float(m.group(7)), float(m.group(8))))
    out = {}
    for p, ws in windows.items():
        lat = [w for w in ws if w[0] > 0]  # a window with no acknowledgement prints zeros: no latency
        out[p] = Phase(rate=statistics.mean(w[0] for w in ws) if ws else None,
                       avg=statistics.mean(w[1] for w in lat) if lat else None,
                       p99=max(w[2] for w in lat) if lat else None,
                       max=max(w[3] for w in lat) if lat else None)
    return out


def parse_pulsar_perf_run(text: str, records: int, size: int) -> Figures:
    """A counted pulsar-perf run's figures (``-m records``, its log time-stamped by Docker):
    records/s from its "Created N producers" line to its DONE line, which it prints when
    ``records`` sends have been acknowledged (it counts a send at its acknowledgement), so
    from its first send to its ``records``-th acknowledgement, as the harness's side is
    timed; MB/s from that and ``size``; the latency from its "Aggregated latency stats"
    (every acknowledgement after its 1 s warm-up).

    Not its "Aggregated throughput stats": it keeps sending while acknowledgements are in
    flight (146,435 to 202,440 records acknowledged for ``-m 100000``, measured), and its
    elapsed time runs to the next wake-up of its 10-s reporting loop, so a run shorter than
    10 s is divided by 10 s (every 100,000-record row measured 10.0 s by it; bench/LOG.md
    has the figures it gave). PerformanceProducer's source has both."""
    created = done = None
    for line in text.splitlines():
        stamp, _, rest = line.strip().partition(" ")
        if created is None and rest.startswith("Created ") and rest.endswith(" producers"):
            created = docker_time(stamp)
        elif done is None and "DONE (reached the maximum number" in rest:
            done = docker_time(stamp)
    if created is None or done is None or done <= created:
        raise ValueError(f"pulsar-perf's output has no 'Created N producers' and DONE lines to time its run: "
                         f"{text[-300:]!r}")
    took = done - created
    lat = [tuple(float(v) for v in found) for found in _LATENCY.findall(text)]
    # all zero: nothing recorded (pulsar-perf records latencies after its 1 s warm-up only)
    p50, p99, p999 = lat[-1] if lat and any(lat[-1]) else (None, None, None)
    return Figures(records, records / took, records * size / MB / took, p50, p99, p999)


#: pulsar-perf's settings where its defaults are not the client's, as the harness's producers
#: run: a batch of at most 128 KB (the Java and C++ clients' default; pulsar-perf's is 4 MB,
#: which at 1 KB makes batches of 1,000 records against the clients' 125) and a send timeout
#: of 30 s (pulsar-perf's default is none). Client statistics are off on both sides.
SAME_SETTINGS = ("-bb", "131072", "--send-timeout", "30")

#: Each harness row sends up to this many times ``--records`` and is timed from its first
#: send to its ``records``-th acknowledgement, while it still sends: pulsar-perf's own
#: measure (``parse_pulsar_perf_run``: its DONE line comes at the ``-m``-th acknowledgement
#: and it keeps sending until then; it sent up to 2.02 times ``-m``). Timed to its last
#: acknowledgement instead, a producer that stops at ``records`` also pays for draining its
#: window (about one publish latency, 0.1 to 0.2 s here: a fifth of a 100,000-record run at
#: 150,000 records/s), which pulsar-perf never does.
OVERSEND = 2


def mth_ack_figures(history: Path, records: int, size: int, note: str = "") -> Figures:
    """Figures of a harness producer's history: records/s from its first send to its
    ``records``-th acknowledgement (:data:`OVERSEND`)."""
    from harness.history import read_events

    first = None
    acks: list[float] = []
    for e in read_events(history):
        if e["type"] == "invoke" and first is None:
            first = float(e["t"])
        elif e["type"] == "ok":
            acks.append(float(e["t"]))
    if first is None or len(acks) < records:
        return Figures(len(acks), note=f"only {len(acks)} of {records} acknowledged")
    took = sorted(acks)[records - 1] - first
    if took <= 0:
        return Figures(len(acks), note="no time between the first send and the acknowledgements")
    return Figures(records, records / took, records * size / MB / took, note=note)


class PulsarPerf:
    """pulsar-perf (``PulsarPerfTestTool``) in a helper container of the broker image on the
    cluster's network. The broker image has no pulsar-perf: the pulsar-testclient jar is
    copied from Maven Central (compose/images/pulsar-perf/pom.xml) into a cache directory on the first
    run and mounted into the container, where it runs on the image's own classpath, with a
    log configuration that prints its summary lines."""

    def __init__(self, cluster: Cluster, version: str = PERF_VERSION) -> None:
        self.cluster = cluster
        self.version = version
        self.outputs: list[str] = []  # every run's output, kept beside the page
        self.jars = Path(tempfile.gettempdir()) / f"chaos-harness-pulsar-perf-{version}"
        _maven_copy(PERF_DIR / "pom.xml", self.jars, f"pulsar-testclient {version} jar",
                    [f"-Dperf.version={version}"])

    @property
    def service_url(self) -> str:
        """Every broker's internal listener (compose/pulsar.yaml), as the harness's clients
        get every broker's loopback port: a lookup does not depend on one broker."""
        return "pulsar://" + ",".join(f"{n.name}:6650" for n in self.cluster.spec.nodes_of("pulsar-broker"))

    def _run(self, args: list[str], what: str, started: Callable[[], None] | None = None) -> str:
        """pulsar-perf produce with ``args`` in a helper container, to its end (bounded);
        ``started`` called once its producers are created. Its log, time-stamped."""
        cmd = ["java", "-Xmx1g", "-cp", "/opt/perf/jars/*:/opt/pulsar/libs/*",
               "-Dlog4j2.configurationFile=/opt/perf/conf/log4j2.properties",
               "org.apache.pulsar.testclient.PulsarPerfTestTool", "/opt/perf/conf/client.conf",
               "produce", "-u", self.service_url, *args]
        mounts = {str(self.jars): "/opt/perf/jars", str(PERF_DIR): "/opt/perf/conf"}
        box = self.cluster.run_helper(f"bench-pulsar-perf-{uuid.uuid4().hex[:6]}", cmd, role="bench",
                                      mounts=mounts, working_dir="/tmp")
        try:
            deadline = time.monotonic() + TOOL_TIMEOUT_S
            if started is not None:
                while time.monotonic() < deadline and "Created " not in box.logs():
                    if box.status in ("exited", "dead"):
                        raise RuntimeError(f"pulsar-perf ended early: {box.logs()[-500:]}")
                    time.sleep(0.2)
                started()
            while time.monotonic() < deadline and box.status not in ("exited", "dead"):
                time.sleep(0.5)
            out = box.logs(timestamps=True)
            if box.status not in ("exited", "dead"):
                raise RuntimeError(f"pulsar-perf did not end in {TOOL_TIMEOUT_S:.0f}s: {out[-500:]}")
        finally:
            try:
                box.remove()
            except Exception:  # noqa: BLE001 (gone already)
                pass
        self.outputs.append(f"== pulsar-perf produce {what}\n{out}")
        return out

    def produce(self, topic: str, records: int, size: int, producers: int = 1) -> Figures:
        """``records`` at an unbounded rate, timed from its log (parse_pulsar_perf_run). A
        count, not a duration, bounds what the bookies store: 30 s unbounded at 1 KB wrote
        about 4 GB a bookie here and filled the disk. ``-ml``: the client's memory limit, as
        the Java and C++ clients have by default (64 MB); pulsar-perf's own default is none,
        and at 10 KB it ran out of direct memory (1 GiB) with its sends outrunning the acks."""
        out = self._run(["-r", "10000000", "-m", str(records), "-s", str(size), "-n", str(producers),
                         "-ml", "64M", *SAME_SETTINGS,
                         PulsarSystem.topic_name(topic)], f"-m {records} -s {size} -n {producers}")
        figures = parse_pulsar_perf_run(out, records, size)
        if producers > 1:
            figures.note = f"{producers} at once"
        return figures

    def produce_with_fault(self, topic: str, rate: int, seconds: float, fault: Callable[[], None]) -> str:
        """pulsar-perf at ``rate`` records/s of 100 B for ``seconds``, ``fault`` started in a
        thread once its producer is created; its log, time-stamped."""
        killer = threading.Thread(target=fault)
        try:
            return self._run(["-r", str(rate), "-time", str(int(seconds)), "-s", "100",
                              PulsarSystem.topic_name(topic)], f"-r {rate} -time {int(seconds)} (fault)",
                             started=killer.start)
        finally:
            if killer.is_alive():
                killer.join()


class Harness:
    def __init__(self, service_url: str, tmp: Path) -> None:
        self.service_url = service_url
        self.tmp = tmp

    def produce(self, topic: str, records: int, size: int, copies: int = 1) -> Figures:
        spec = ClientSpec()

        def one(i: int) -> Figures:
            path = self.tmp / f"p{i}-{uuid.uuid4().hex[:6]}.jsonl"
            with HistoryWriter(path, f"p{i}") as hist:
                client = PulsarProducerClient(self.service_url, topic, hist, spec)
                try:
                    client.run(count=records * OVERSEND, value_size=size)
                finally:
                    client.close()
            return mth_ack_figures(path, records, size)
        return _summed(_threads(one, copies))

    def produce_bare(self, topic: str, records: int, size: int) -> Figures:
        """The pulsar-client Python library alone: the harness's producer settings (batching
        on, blocking when the queue is full), ``send_async`` of one prebuilt value with a
        callback that only counts; timed as pulsar-perf is (:data:`OVERSEND`)."""
        from harness.clients.pulsar import client_for

        client = client_for(self.service_url)
        done = threading.Event()
        acked = [0, 0]  # ok, failed
        last = [0.0]

        def callback(res: Any, msg_id: Any) -> None:
            acked[0 if getattr(res, "name", str(res)) == "Ok" else 1] += 1
            if acked[0] == records:
                last[0] = time.monotonic()
                done.set()

        try:
            producer = client.create_producer(PulsarSystem.topic_name(topic), batching_enabled=True,
                                              block_if_queue_full=True, send_timeout_millis=30000)
            value = b"x" * size
            first = time.monotonic()
            for _ in range(records * OVERSEND):
                producer.send_async(value, callback)
            producer.flush()
            done.wait(TOOL_TIMEOUT_S)
        finally:
            client.close()
        if acked[0] < records or last[0] <= first:
            return Figures(acked[0], note=f"only {acked[0]} of {records} acknowledged")
        took = last[0] - first
        return Figures(records, records / took, records * size / MB / took, note="library alone")

    def open_loop(self, topic: str, rate: int, seconds: float,
                  started: Callable[[], None] | None = None) -> list[tuple[float, float | None]]:
        """The producer and a consumer together, open loop (bench_seed002's Harness.open_loop
        for Pulsar): one producer paced at ``rate`` records/s of 100 B for ``seconds``, one
        consumer (an exclusive subscription from the earliest message) in this thread. Per
        acknowledged send: its invoke time and its end-to-end latency in ms (the receive
        that returned it minus the invoke, one clock), or None when it was not received
        before the consumer gave up (30 s after the producer ended with nothing new).
        ``started`` is called as the producer starts."""
        import pulsar

        from harness.clients.pulsar import client_for

        client = client_for(self.service_url)
        consumer = client.subscribe(PulsarSystem.topic_name(topic), f"bench-{uuid.uuid4().hex[:6]}",
                                    initial_position=pulsar.InitialPosition.Earliest)

        def receive() -> list[bytes]:
            try:
                msg = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                return []
            consumer.acknowledge(msg)
            return [bytes(msg.data())]

        try:
            return run_open_loop(self.tmp, lambda hist: PulsarProducerClient(
                self.service_url, topic, hist, ClientSpec()), receive, rate, seconds, started)
        finally:
            client.close()

    def produce_java(self, cluster: Cluster, topic: str, records: int, size: int) -> Figures:
        """The harness's Java producer (harness/clients/java/PulsarProducer.java, the one
        the cases' ``client: {driver: java}`` runs, history written per send) at an unbounded
        rate, timed as pulsar-perf is (:data:`OVERSEND`): its JVM's start and javac are not
        counted."""
        from harness.clients.pulsar import PulsarJavaProducer

        run_dir = self.tmp / f"java-{uuid.uuid4().hex[:6]}"
        program = PulsarJavaProducer(cluster, run_dir, topic, "pj", ClientSpec())
        program.run(count=records * OVERSEND, value_size=size, max_s=TOOL_TIMEOUT_S)
        return mth_ack_figures(program.history, records, size, "Java driver")


def owner_fault(pulsar: PulsarSystem, topic: str, seconds: float,
                times: dict[str, float]) -> Callable[[], None]:
    """The fault of a row of ``seconds``, called when the row starts: a third of the way in,
    the broker that owns ``topic`` is killed -9; at two thirds it is started again.
    ``times`` gets when (``kill``, ``restart``)."""

    def fault() -> None:
        time.sleep(seconds / 3)
        node = pulsar.owner(topic)  # owned by now: the producer's lookup assigned it
        times["kill"] = time.time()
        node.container.kill()
        print(f"  killed -9 {node.name}, the owner of {topic}", flush=True)
        time.sleep(seconds / 3)
        times["restart"] = time.time()
        node.container.start()

    return fault


def fault_row(pulsar: PulsarSystem, perf: PulsarPerf, harness: Harness, topic: Callable[[], str], rate: int,
              seconds: float) -> list[tuple[str, dict[str, Phase]]]:
    """Each side in turn, on a fresh topic: 100-byte records at ``rate`` for ``seconds``; a
    third of the way in, the topic's owner is killed -9; at two thirds it is started again."""
    out: list[tuple[str, dict[str, Phase]]] = []
    for side in ("harness", "pulsar-perf"):
        name = topic()
        times: dict[str, float] = {}
        fault = owner_fault(pulsar, name, seconds, times)
        if side == "harness":
            def client(hist: HistoryWriter, topic: str = name) -> PulsarProducerClient:
                return PulsarProducerClient(harness.service_url, topic, hist, ClientSpec())
            phases = harness_phases(paced_with_fault(harness.tmp, client, fault, rate, seconds),
                                    times["kill"], times["restart"])
        else:
            phases = perf_phases(perf.produce_with_fault(name, rate, seconds, fault), times["kill"],
                                 times["restart"])
        out.append((side, phases))
        pulsar.wait_ready()
    return out


def open_loop_fault_row(pulsar: PulsarSystem, harness: Harness, topic: str, rate: int,
                        seconds: float) -> tuple[str, dict[str, Phase]]:
    """The producer and a consumer together, open loop, at ``rate`` for ``seconds``; a
    third of the way in, the topic's owner is killed -9; at two thirds it is started again.
    Per phase of send time: records received per second and the end-to-end latency (harness
    side only: pulsar-perf's producer prints no end-to-end latency)."""
    times: dict[str, float] = {}
    killer = threading.Thread(target=owner_fault(pulsar, topic, seconds, times))
    try:
        trips = harness.open_loop(topic, rate, seconds, started=killer.start)
    finally:
        if killer.ident is not None:
            killer.join()
    pulsar.wait_ready()
    return "harness prod+cons", trip_phases(trips, times["kill"], times["restart"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rows", nargs="*", default=list(ROWS), choices=ROWS)
    ap.add_argument("--sizes", action="store_true", help="also the message-size sweep")
    ap.add_argument("--reps", type=int, default=1, help="run each row this many times; medians")
    ap.add_argument("--warmup", type=int, default=0,
                    help="pairs of runs (harness, tool) made and dropped before each row's --reps")
    ap.add_argument("--sweep-mb", type=int, default=50, help="at most this many MB per sweep step")
    ap.add_argument("--html", type=Path, default=Path("reports/bench-pulsar-perf.html"))
    ap.add_argument("--fault", action="store_true",
                    help="also the fault row: --fault-rate records/s for --fault-seconds, the topic's owner "
                         "killed -9 at a third and started again at two thirds")
    ap.add_argument("--fault-rate", type=int, default=2000)
    ap.add_argument("--fault-seconds", type=float, default=90.0)
    args = ap.parse_args(argv)
    if args.records < 1000:
        ap.error("--records must be at least 1000")
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be at least 1, --warmup at least 0")
    if args.fault and not (30 <= args.fault_seconds <= 600 and 1 <= args.fault_rate <= 50_000):
        ap.error("--fault-seconds must be 30 to 600 (three phases of 10-s windows), --fault-rate 1 to 50000")
    cluster = Cluster.named(Engine(), "pulsar")
    load_before = os.getloadavg()
    reused = cluster.up()
    pulsar = PulsarSystem(cluster)
    pulsar.wait_ready()
    perf = PulsarPerf(cluster)
    rows: list[Row] = []
    sweep: list[Row] = []
    faults: list[tuple[str, dict[str, Phase]]] = []
    n = args.records

    def topic() -> str:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        pulsar.create_topic(name, 0)
        return name

    def on_topic(produce: Callable[..., Figures], *more: Any) -> Callable[[], Figures]:
        """A run of ``produce`` on a fresh topic, with ``more`` after the topic."""
        return lambda: produce(topic(), *more)

    def paired(side: Callable[[], Figures], tool: Callable[[], Figures]) -> tuple[Figures, Figures]:
        """The row's medians over --reps pairs of runs, the two sides alternating, after
        --warmup pairs dropped; the median of the paired ratios in the harness side's note."""
        pairs = [(side(), tool()) for _ in range(args.warmup + args.reps)][args.warmup:]
        h, k = median_of([a for a, _ in pairs]), median_of([b for _, b in pairs])
        each = [x for a, b in pairs if (x := ratio(a.rate, b.rate)) is not None]
        if len(pairs) > 1 and each:
            h = dataclasses.replace(h, note=f"{h.note}; paired ratios median {statistics.median(each):.2f} "
                                            f"({min(each):.2f} to {max(each):.2f})")
        return h, k

    try:
        with tempfile.TemporaryDirectory() as tmp:
            harness = Harness(cluster.spec.bootstrap, Path(tmp))
            print(table([]).replace("kafka", "tool "), flush=True)
            for name, size, copies in (("p1", 100, 1), ("p1-1k", 1000, 1), ("p3", 100, 3)):
                if name in args.rows:
                    h, k = paired(on_topic(harness.produce, n, size, copies),
                                  on_topic(perf.produce, n, size, copies))
                    rows.append(Row(name, f"{copies} producer(s), {size} B", h, k, size))
                    print(table([rows[-1]]).splitlines()[1], flush=True)
            for name, size in (("p1-java", 100), ("p1-java-1k", 1000)):
                if name in args.rows:
                    h, k = paired(on_topic(functools.partial(harness.produce_java, cluster), n, size),
                                  on_topic(perf.produce, n, size))
                    rows.append(Row(name, f"1 producer, {size} B, the harness's Java driver", h, k, size))
                    print(table([rows[-1]]).splitlines()[1], flush=True)
            for name, size in (("p1-bare", 100), ("p1-bare-1k", 1000)):
                if name in args.rows:
                    h, k = paired(on_topic(harness.produce_bare, n, size), on_topic(perf.produce, n, size))
                    rows.append(Row(name, f"1 producer, {size} B, the Python library alone", h, k, size))
                    print(table([rows[-1]]).splitlines()[1], flush=True)
            if args.sizes:
                for size in SIZES:
                    count = max(1000, min(n, args.sweep_mb * 1_000_000 // size))
                    h = harness.produce(topic(), count, size)
                    k = perf.produce(topic(), count, size)
                    sweep.append(Row(f"size {size}", f"{count} records of {size} B", h, k, size))
                    print(table([sweep[-1]]).splitlines()[1], flush=True)
            if args.fault:
                faults.extend(fault_row(pulsar, perf, harness, topic, args.fault_rate, args.fault_seconds))
                faults.append(open_loop_fault_row(pulsar, harness, topic(), args.fault_rate,
                                                  args.fault_seconds))
                print(fault_table(faults), flush=True)
    finally:
        if not reused:
            cluster.down()
    load_after = os.getloadavg()
    header = (f"pulsar ({cluster.version}), pulsar-perf {perf.version}, {n} records a row, "
              f"{args.reps} run(s) a row (medians; sides alternating"
              + (f", {args.warmup} pair(s) dropped first" if args.warmup else "") + "), "
              f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
              f"after; {time.strftime('%Y-%m-%d %H:%M')}")
    print(header)
    print(table([*rows, *sweep]).replace("kafka", "tool "))
    measured = [x for r in rows if (x := ratio(r.harness.rate, r.tool.rate)) is not None]
    if measured:
        print(f"harness/pulsar-perf records/s: median {statistics.median(measured):.2f}")
    fault_what = (f"{args.fault_rate} records/s of 100 B for {args.fault_seconds:.0f} s, one producer, a "
                  "non-partitioned topic; the broker owning it killed -9 at a third, started again at two "
                  "thirds")
    if faults:
        print(f"fault row: {fault_what}")
        print(fault_table(faults))
    args.html.parent.mkdir(parents=True, exist_ok=True)
    args.html.with_suffix(".log").write_text("\n".join(perf.outputs))
    args.html.write_text(page(rows, sweep, header, title="The Pulsar producer beside pulsar-perf",
                              tool="pulsar-perf", faults=faults, fault_what=fault_what))
    print(f"page: {args.html} (pulsar-perf's output: {args.html.with_suffix('.log')})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (HarnessError, RuntimeError, ValueError) as exc:  # one line, not a traceback
        print(f"bench_pulsar_perf: {exc}", file=sys.stderr)
        sys.exit(2)

