"""The harness's instrumented Pulsar producer beside Pulsar's own ``pulsar-perf produce``,
on the same cluster, row by row (issue 16: seed 002's table for Pulsar).

    python bench/bench_pulsar_perf.py [--records 100000] [--rows p1 p1-1k p3] [--sizes]
                                      [--html reports/bench-pulsar-perf.html]

Rows (each on a fresh non-partitioned persistent topic, ``--records`` records):

  p1      one producer, 100-byte records
  p1-1k   one producer, 1 KB records (pulsar-perf's default size)
  p3      three producers on one topic at once (their records/s summed)

Harness side: ``PulsarProducerClient`` of harness/clients/pulsar.py (the Python client,
batching on, as in the cases), writing its history to a temporary file; three producers are
three threads of this process. Tool side: ``pulsar-perf produce`` (``PulsarPerfTestTool``,
pulsar-testclient 4.0.6's jar from Maven Central, which has no 4.0.7, on the broker
image's classpath; compose/images/pulsar-perf/pom.xml) in a
helper container of the broker image on the cluster's network, against broker-1's internal
listener, with an unbounded rate (``-r 10000000``), ``-m`` records and ``-n`` producers;
other settings are pulsar-perf's defaults (batching on, 1 ms publish delay). ``--sizes``
adds a size sweep (10 B to 100 KB, one producer; each step at most ``--sweep-mb`` MB).

Figures: records/s from the first send to the last acknowledgement (pulsar-perf's
"Aggregated throughput stats", whose elapsed time starts with its producers); MB/s as 2^20
bytes per second of record values (pulsar-perf prints Mbit/s of 2^20 bits: divided by 8);
pulsar-perf's publish latency p50/p99/p99.9 (ms, "Aggregated latency stats"); the harness
measures its send-to-ack latency in the checker, not here.

Traffic stays between this process and the cluster's containers (loopback ports) and
inside the cluster's network; every loop is bounded in records and time.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_seed002 import MB, SIZES, Figures, Row, _summed, _threads, page, ratio, table  # noqa: E402
from harness.backend.cluster import Cluster  # noqa: E402
from harness.backend.docker import Engine  # noqa: E402
from harness.backend.images import IMAGES_DIR, _maven_copy  # noqa: E402
from harness.case.model import ClientSpec  # noqa: E402
from harness.clients.pulsar import PulsarProducerClient  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.history import HistoryWriter  # noqa: E402
from harness.systems.pulsar import PulsarSystem  # noqa: E402

ROWS = ("p1", "p1-1k", "p3")
TOOL_TIMEOUT_S = 600.0
SERVICE_URL = "pulsar://broker-1:6650"  # the internal listener (compose/pulsar.yaml)
PERF_DIR = IMAGES_DIR / "pulsar-perf"
#: Maven Central has no pulsar-testclient 4.0.7 (compose/images/pulsar-perf/pom.xml): the nearest
PERF_VERSION = "4.0.6"

_THROUGHPUT = re.compile(r"Aggregated throughput stats --- (\d+) records sent --- ([\d.]+) msg/s --- "
                         r"([\d.]+) Mbit/s")
_LATENCY = re.compile(r"Aggregated latency stats --- Latency: mean:\s*[\d.]+ ms - med:\s*([\d.]+) - "
                      r"95pct:\s*[\d.]+ - 99pct:\s*([\d.]+) - 99\.9pct:\s*([\d.]+)")


def parse_pulsar_perf(text: str) -> Figures:
    """pulsar-perf produce's two closing lines: records, msg/s, Mbit/s (of 2^20 bits) and
    the publish latency percentiles (ms; None when it recorded none). Its count of records
    sent can pass ``-m``: sends in flight when it reaches the number are counted too."""
    tp = _THROUGHPUT.findall(text)
    if not tp:
        raise ValueError(f"no pulsar-perf throughput summary in: {text[-300:]!r}")
    n, rate, mbit = tp[-1]
    lat = [tuple(float(v) for v in found) for found in _LATENCY.findall(text)]
    # all zero: nothing recorded (pulsar-perf records latencies after its 1 s warm-up only)
    p50, p99, p999 = lat[-1] if lat and any(lat[-1]) else (None, None, None)
    return Figures(int(n), float(rate), float(mbit) / 8, p50, p99, p999)


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

    def produce(self, topic: str, records: int, size: int, producers: int = 1) -> Figures:
        cmd = ["java", "-Xmx1g", "-cp", "/opt/perf/jars/*:/opt/pulsar/libs/*",
               "-Dlog4j2.configurationFile=/opt/perf/conf/log4j2.properties",
               "org.apache.pulsar.testclient.PulsarPerfTestTool", "/opt/perf/conf/client.conf",
               "produce", "-u", SERVICE_URL,
               "-r", "10000000", "-m", str(records), "-s", str(size), "-n", str(producers),
               PulsarSystem.topic_name(topic)]
        mounts = {str(self.jars): "/opt/perf/jars", str(PERF_DIR): "/opt/perf/conf"}
        box = self.cluster.run_helper(f"bench-pulsar-perf-{uuid.uuid4().hex[:6]}", cmd, role="bench",
                                      mounts=mounts, working_dir="/tmp")
        try:
            deadline = time.monotonic() + TOOL_TIMEOUT_S
            while time.monotonic() < deadline and box.status not in ("exited", "dead"):
                time.sleep(0.5)
            out = box.logs()
            if box.status not in ("exited", "dead"):
                raise RuntimeError(f"pulsar-perf did not end in {TOOL_TIMEOUT_S:.0f}s: {out[-500:]}")
        finally:
            try:
                box.remove()
            except Exception:  # noqa: BLE001 (gone already)
                pass
        self.outputs.append(f"== pulsar-perf produce -m {records} -s {size} -n {producers}\n{out}")
        figures = parse_pulsar_perf(out)
        if producers > 1:
            figures.note = f"{producers} at once"
        return figures


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
                    st = client.run(count=records, value_size=size)
                finally:
                    client.close()
            if st.ok != records:
                return Figures(st.ok, note=f"only {st.ok} of {records} acknowledged")
            return Figures(records, records / st.seconds, records * size / MB / st.seconds)
        return _summed(_threads(one, copies))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rows", nargs="*", default=list(ROWS), choices=ROWS)
    ap.add_argument("--sizes", action="store_true", help="also the message-size sweep")
    ap.add_argument("--sweep-mb", type=int, default=50, help="at most this many MB per sweep step")
    ap.add_argument("--html", type=Path, default=Path("reports/bench-pulsar-perf.html"))
    args = ap.parse_args(argv)
    if args.records < 1000:
        ap.error("--records must be at least 1000")
    cluster = Cluster.named(Engine(), "pulsar")
    load_before = os.getloadavg()
    reused = cluster.up()
    pulsar = PulsarSystem(cluster)
    pulsar.wait_ready()
    perf = PulsarPerf(cluster)
    rows: list[Row] = []
    sweep: list[Row] = []
    n = args.records

    def topic() -> str:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        pulsar.create_topic(name, 0)
        return name

    try:
        with tempfile.TemporaryDirectory() as tmp:
            harness = Harness(cluster.spec.bootstrap, Path(tmp))
            print(table([]).replace("kafka", "tool "), flush=True)
            for name, size, copies in (("p1", 100, 1), ("p1-1k", 1000, 1), ("p3", 100, 3)):
                if name in args.rows:
                    h = harness.produce(topic(), n, size, copies)
                    k = perf.produce(topic(), n, size, copies)
                    rows.append(Row(name, f"{copies} producer(s), {size} B", h, k, size))
                    print(table([rows[-1]]).splitlines()[1], flush=True)
            if args.sizes:
                for size in SIZES:
                    count = max(1000, min(n, args.sweep_mb * 1_000_000 // size))
                    h = harness.produce(topic(), count, size)
                    k = perf.produce(topic(), count, size)
                    sweep.append(Row(f"size {size}", f"{count} records of {size} B", h, k, size))
                    print(table([sweep[-1]]).splitlines()[1], flush=True)
    finally:
        if not reused:
            cluster.down()
    load_after = os.getloadavg()
    header = (f"pulsar ({cluster.version}), pulsar-perf {perf.version}, {n} records a row, "
              f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
              f"after; {time.strftime('%Y-%m-%d %H:%M')}")
    print(header)
    print(table([*rows, *sweep]).replace("kafka", "tool "))
    measured = [x for r in rows if (x := ratio(r.harness.rate, r.tool.rate)) is not None]
    if measured:
        print(f"harness/pulsar-perf records/s: median {statistics.median(measured):.2f}")
    args.html.parent.mkdir(parents=True, exist_ok=True)
    args.html.with_suffix(".log").write_text("\n".join(perf.outputs))
    args.html.write_text(page(rows, sweep, header, title="The Pulsar producer beside pulsar-perf",
                              tool="pulsar-perf"))
    print(f"page: {args.html} (pulsar-perf's output: {args.html.with_suffix('.log')})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (HarnessError, RuntimeError, ValueError) as exc:  # one line, not a traceback
        print(f"bench_pulsar_perf: {exc}", file=sys.stderr)
        sys.exit(2)

