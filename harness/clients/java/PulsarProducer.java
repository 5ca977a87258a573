// The harness's Java Pulsar producer: one workload, run as a single-file source program
// (`java -cp '/opt/pulsar/libs/*' PulsarProducer.java <conf.properties>`) in a container on
// the cluster's network. It writes the history contract of harness/history.py:
//
//   meta    client settings, client version
//   invokes the sends due (at most 256), before any of them: their mids as a run
//           (mid_prefix, mids_from, count), keys, partitions (the partition the router
//           chooses; one "partition" for the line when all share it), topic; with a rate,
//           due and every (send i was due at due + i * every, wall clock like "t")
//   oks     acknowledgements, a broker batch (one entry) a line: the mids and the batch
//           indexes (MessageIdAdv's) as runs, and the entry's partition, ledger and entry
//           as the line's own fields
//   fail    mid, error (the message provably never reached a broker)
//   info    mid, error (outcome unknown: timeout, connection lost)
//   stall   mid, partition, seconds (the sendAsync call itself blocked the caller > 50 ms)
//
// "m" is System.nanoTime() in seconds: CLOCK_MONOTONIC of the host kernel, the clock of the
// harness process's time.monotonic(). Message n goes to partition n mod N (round robin per
// message, a custom router), so the partition of every send, and of every blocked send, is
// known. The send loop is bounded by count, duration, a hard deadline and a stop file.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.pulsar.client.api.*;

public class PulsarProducer {
    static final double STALL_S = 0.05;
    // the most sends one invokes line records
    static final int BATCH = 256;
    // the longest an acknowledgement waits in Acks before its oks line is written (checked
    // every millisecond by a timer thread: the stamp of a line is at most about 2 ms after
    // the completion of its broker batch)
    static final long ACK_HOLD_NS = 1_000_000L;

    // Acknowledgements, written as oks lines (harness/history.py), a broker batch a line: the
    // client completes the messages of one batch one after another on its own thread. A
    // message id does not say how many messages its batch holds (getBatchSize() is 0 on a
    // producer's ids), so the line of a batch is written when the first acknowledgement of
    // another entry comes, or by the timer once the batch is ACK_HOLD_NS old; a message sent
    // alone (batch index -1) is written at once. A line per acknowledgement cost the producer
    // more than its sends (and, measured, a 230-byte line per 100-byte record).
    static final class Acks {
        final String qtopic;
        // the acknowledgements held, all of one entry: the mids and the batch indexes as runs
        // (harness/history.py's RUNS: from send number k0, from index b0) while each is one
        // more than the last (one producer on a topic of one partition), else as lists (a
        // partitioned topic's entry holds every N-th send)
        int size;
        long firstNs;
        int part;
        long ledger, entry, k0, lastK;
        int b0, lastBi;
        boolean midsRun, batchesRun;
        final StringBuilder mids = new StringBuilder(), batches = new StringBuilder();

        // the quoted mid prefix ("<client>-"), and the same without its closing quote
        final String qprefix, open;

        Acks(String qtopic, String qprefix) {
            this.qtopic = qtopic;
            this.qprefix = qprefix;
            this.open = qprefix.substring(0, qprefix.length() - 1);
        }

        synchronized void add(long k, MessageIdAdv a) {
            int p = Math.max(a.getPartitionIndex(), 0);
            long le = a.getLedgerId(), en = a.getEntryId();
            int bi = a.getBatchIndex();
            if (size > 0 && (en != entry || le != ledger || p != part)) flush();
            if (size == 0) {
                firstNs = System.nanoTime();
                part = p;
                ledger = le;
                entry = en;
                k0 = k;
                b0 = bi;
                midsRun = batchesRun = true;
            } else {
                if (midsRun && k != lastK + 1) {  // the run ends: its mids as a list from here
                    midsRun = false;
                    for (long j = k0; j <= lastK; j++) mids.append(j == k0 ? "" : ",").append(open).append(j).append('"');
                }
                if (!midsRun) mids.append(',').append(open).append(k).append('"');
                if (batchesRun && bi != lastBi + 1) {
                    batchesRun = false;
                    for (int j = b0; j <= lastBi; j++) batches.append(j == b0 ? "" : ",").append(j);
                }
                if (!batchesRun) batches.append(',').append(bi);
            }
            lastK = k;
            lastBi = bi;
            size++;
            if (bi < 0 || size >= 4096) flush();
        }

        synchronized void flushIfOlder(long ns) {
            if (size > 0 && System.nanoTime() - firstNs > ns) flush();
        }

        synchronized void flush() {
            if (size == 0) return;
            // the entry's position as the line's own fields (a batch field holds for every record)
            StringBuilder b = new StringBuilder(160 + mids.length() + batches.length());
            b.append(",\"topic\":").append(qtopic).append(",\"partition\":").append(part)
                    .append(",\"ledger\":").append(ledger).append(",\"entry\":").append(entry)
                    .append(",\"offset\":null,\"count\":").append(size);
            if (midsRun) b.append(",\"mid_prefix\":").append(qprefix).append(",\"mids_from\":").append(k0);
            else b.append(",\"mids\":[").append(mids).append(']');
            if (batchesRun) b.append(",\"batches_from\":").append(b0);
            else b.append(",\"batches\":[").append(batches).append(']');
            record("oks", b.toString());
            mids.setLength(0);
            batches.setLength(0);
            size = 0;
        }
    }

    static void record(String type, String body) {
        History.record(type, body);
    }

    static String q(String s) {
        return History.q(s);
    }

    static boolean definite(Throwable e) {
        return e instanceof PulsarClientException.ProducerQueueIsFullError
                || e instanceof PulsarClientException.MemoryBufferIsFullError
                || e instanceof PulsarClientException.InvalidMessageException
                || e instanceof PulsarClientException.InvalidTopicNameException
                || e instanceof PulsarClientException.NotAllowedException;
    }

    public static void main(String[] args) {
        History.main(args, PulsarProducer::run);
    }

    static void run(History.Workload w) throws Exception {
        Properties p = w.p;
        long drainMs = History.num(p, "drain_ms", 120_000);

        // The client's own statistics are off (statsInterval 0, as pulsar-perf runs it): the
        // history is this program's record, and with them on, the client updates a latency
        // sketch under a lock on every acknowledgement, for a log line nothing reads.
        ClientBuilder cb = PulsarClient.builder().serviceUrl(p.getProperty("service_url"))
                .operationTimeout(30, TimeUnit.SECONDS).connectionTimeout(5, TimeUnit.SECONDS)
                .statsInterval(0, TimeUnit.SECONDS);
        StringBuilder conf = new StringBuilder(",\"statsIntervalSeconds\":0");
        String v;
        if ((v = History.opt(p, "memory_limit_bytes")) != null) {
            cb.memoryLimit(Long.parseLong(v), SizeUnit.BYTES);
            conf.append(",\"memoryLimitBytes\":").append(v);
        }
        PulsarClient pc = cb.build();
        AtomicLong seqForRouter = new AtomicLong();
        ProducerBuilder<byte[]> pb = pc.newProducer().topic(w.topic)
                .producerName(w.client + "-" + UUID.randomUUID().toString().substring(0, 6))
                .messageRoutingMode(MessageRoutingMode.CustomPartition)
                .messageRouter(new MessageRouter() {
                    @Override
                    public int choosePartition(Message<?> msg, TopicMetadata md) {
                        if (w.partition >= 0) return w.partition;
                        return (int) (seqForRouter.get() % md.numPartitions());
                    }
                });
        boolean batching = Boolean.parseBoolean(p.getProperty("batching", "true"));
        pb.enableBatching(batching);
        conf.append(",\"batchingEnabled\":").append(batching);
        long sendTimeout = History.num(p, "send_timeout_ms", 30000);
        pb.sendTimeout((int) sendTimeout, TimeUnit.MILLISECONDS);
        conf.append(",\"sendTimeoutMs\":").append(sendTimeout);
        boolean block = Boolean.parseBoolean(p.getProperty("block_if_queue_full", "true"));
        pb.blockIfQueueFull(block);
        conf.append(",\"blockIfQueueFull\":").append(block);
        if ((v = History.opt(p, "max_pending_messages")) != null) {
            pb.maxPendingMessages(Integer.parseInt(v));
            conf.append(",\"maxPendingMessages\":").append(v);
        }
        if ((v = History.opt(p, "max_pending_messages_across_partitions")) != null) {
            pb.maxPendingMessagesAcrossPartitions(Integer.parseInt(v));
            conf.append(",\"maxPendingMessagesAcrossPartitions\":").append(v);
        }
        if ((v = History.opt(p, "batching_max_publish_delay_us")) != null) {
            // The 4.x Java client rejects a delay under 1 ms ("must be at least 1ms"): the
            // article's 50 us (an older client) is applied as 1000 us, and both are recorded.
            long us = Math.max(Long.parseLong(v), 1000L);
            pb.batchingMaxPublishDelay(us, TimeUnit.MICROSECONDS);
            conf.append(",\"batchingMaxPublishDelayMicros\":").append(us);
            if (us != Long.parseLong(v)) conf.append(",\"batchingMaxPublishDelayMicrosRequested\":").append(v);
        }
        if ((v = History.opt(p, "batching_max_messages")) != null) {
            pb.batchingMaxMessages(Integer.parseInt(v));
            conf.append(",\"batchingMaxMessages\":").append(v);
        }
        if ((v = History.opt(p, "batching_max_bytes")) != null) {
            pb.batchingMaxBytes(Integer.parseInt(v));
            conf.append(",\"batchingMaxBytes\":").append(v);
        }
        Producer<byte[]> producer = pb.create();
        int partitions = pc.getPartitionsForTopic(w.topic).get(30, TimeUnit.SECONDS).size();
        String version = PulsarClient.class.getPackage().getImplementationVersion();
        record("meta", ",\"system\":\"pulsar\",\"driver\":\"java\",\"client_version\":" + q(version)
                + ",\"topic_partitions\":" + partitions + ",\"producer\":{" + conf.substring(1) + "}"
                + ",\"status\":\"ready\"");
        History.flush();
        History.awaitGo(p, w.stopFile, w.hardMs);

        LongAdder outstanding = new LongAdder(); // sends not yet answered
        long start = System.nanoTime();
        // the schedule on the wall clock of "t": send n (from 0) is due at wallStart + n / rate
        double wallStart = System.currentTimeMillis() / 1000.0;
        long deadline = start + w.hardMs * 1_000_000L;
        long end = w.durationMs >= 0 ? Math.min(deadline, start + w.durationMs * 1_000_000L) : deadline;
        int nparts = Math.max(partitions, 1);
        String qtopic = q(w.topic);
        String qprefix = q(w.client + "-");
        Acks acks = new Acks(qtopic, qprefix);
        ScheduledExecutorService tick = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "oks-flush");
            t.setDaemon(true);
            return t;
        });
        tick.scheduleAtFixedRate(() -> acks.flushIfOlder(ACK_HOLD_NS), 1, 1, TimeUnit.MILLISECONDS);
        byte[] filler = new byte[Math.max(w.valueSize, 0)];
        Arrays.fill(filler, (byte) 'x');
        byte[] valuePrefix = (w.client + "-").getBytes(StandardCharsets.US_ASCII);
        long n = 0;
        while ((w.count < 0 || n < w.count) && System.nanoTime() < end) {
            if (Files.exists(w.stopFile)) break;
            // the sends due now (at most BATCH; at a rate, those whose time has come), recorded
            // first as one invokes line (harness/clients/__init__.py's paced_batches)
            long due = BATCH;
            if (w.rate > 0) {
                due = Math.min(BATCH, Math.max(1, (long) ((System.nanoTime() - start) / 1e9 * w.rate) + 1 - n));
            }
            if (w.count >= 0) due = Math.min(due, w.count - n);
            StringBuilder keys = new StringBuilder(w.keys > 0 ? 8 * (int) due : 0);
            // one partition for all (a fixed one, or a topic of one): the line's own field
            boolean onePart = w.partition >= 0 || nparts == 1;
            StringBuilder parts = new StringBuilder(onePart ? 0 : 3 * (int) due);
            for (int i = 0; i < due; i++) {
                String sep = i == 0 ? "" : ",";
                if (w.keys > 0) keys.append(sep).append("\"k").append((n + i) % w.keys).append('"');
                if (!onePart) parts.append(sep).append((int) ((n + i) % nparts));
            }
            // the sends' mids as a run: "<client>-<n + 1>" onwards
            record("invokes", ",\"topic\":" + qtopic + ",\"mid_prefix\":" + qprefix + ",\"mids_from\":" + (n + 1)
                    + ",\"count\":" + due + ",\"keys\":" + (w.keys > 0 ? "[" + keys + "]" : "null")
                    + (onePart ? ",\"partition\":" + Math.max(w.partition, 0) : ",\"partitions\":[" + parts + "]")
                    + (w.rate > 0 ? ",\"due\":" + History.fixed6(wallStart + n / w.rate) + ",\"every\":"
                       + History.fixed6(1.0 / w.rate) : ""));
            for (int i = 0; i < due; i++) {
                long k = n + i;
                String key = w.keys > 0 ? "k" + (k % w.keys) : null;
                int part = w.partition >= 0 ? w.partition : (int) (k % nparts);
                if (nparts > 1) seqForRouter.set(k);
                // the value: "<client>-<k + 1>|" then 'x' up to the size
                String number = Long.toString(k + 1);
                int headLength = valuePrefix.length + number.length() + 1;
                byte[] value = new byte[Math.max(w.valueSize, headLength)];
                System.arraycopy(valuePrefix, 0, value, 0, valuePrefix.length);
                for (int d = 0; d < number.length(); d++) value[valuePrefix.length + d] = (byte) number.charAt(d);
                value[headLength - 1] = '|';
                System.arraycopy(filler, 0, value, headLength, value.length - headLength);
                outstanding.increment();
                TypedMessageBuilder<byte[]> mb = producer.newMessage().value(value);
                if (key != null) mb.key(key);
                long t0 = System.nanoTime();
                CompletableFuture<MessageId> f;
                try {
                    f = mb.sendAsync();
                } catch (Throwable e) {
                    f = CompletableFuture.failedFuture(e);
                }
                double blocked = (System.nanoTime() - t0) / 1e9;
                if (blocked > STALL_S) {
                    record("stall", String.format(Locale.ROOT, ",\"mid\":%s,\"partition\":%d,\"seconds\":%.4f",
                            q(w.client + "-" + (k + 1)), part, blocked));
                }
                f.whenComplete((id, err) -> {
                    if (err == null) {
                        acks.add(k + 1, (MessageIdAdv) id);
                    } else {
                        Throwable e = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
                        String what = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage());
                        if (what.length() > 200) what = what.substring(0, 200);
                        acks.flush(); // the acknowledgements before it stay before it
                        record(definite(e) ? "fail" : "info", ",\"mid\":" + q(w.client + "-" + (k + 1)) + ",\"error\":" + q(what));
                    }
                    outstanding.decrement();
                });
            }
            n += due;
            acks.flushIfOlder(ACK_HOLD_NS);
            if (w.rate > 0) {
                long when = start + (long) (n * 1e9 / w.rate);
                long ahead = when - System.nanoTime();
                if (ahead > 0) Thread.sleep(Math.min(ahead / 1_000_000L, 500), (int) (ahead % 1_000_000L));
            }
        }
        try {
            producer.flush();
        } catch (Exception e) {
            // each message's callback reports its fate
        }
        long drainEnd = System.nanoTime() + drainMs * 1_000_000L;
        while (outstanding.sum() > 0 && System.nanoTime() < drainEnd) {
            Thread.sleep(20);
            acks.flushIfOlder(ACK_HOLD_NS);
        }
        tick.shutdownNow();
        acks.flush();
        record("meta", ",\"status\":\"done\",\"sent\":" + n + ",\"outstanding\":" + outstanding.sum());
        History.close();
        try {
            producer.closeAsync().get(10, TimeUnit.SECONDS);
            pc.closeAsync().get(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            // closing is best effort: the history is complete
        }
        System.exit(0);
    }
}
