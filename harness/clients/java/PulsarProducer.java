// The harness's Java Pulsar producer: one workload, run as a single-file source program
// (`java -cp '/opt/pulsar/libs/*' PulsarProducer.java <conf.properties>`) in a container on
// the cluster's network. It writes the history contract of harness/history.py:
//
//   meta    client settings, client version
//   invokes the sends due (at most 256), before any of them: mids, keys, partitions (the
//           partition the router chooses), topic; with a rate, due and every (send i was
//           due at due + i * every, wall clock like "t")
//   oks     acknowledgements, a broker batch a line: mids, partitions, ledgers, entries,
//           batches (MessageIdAdv), offsets null
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
    // the longest an acknowledgement waits in Acks before its oks line (the send loop and the
    // drain check; the last acknowledgement of a broker batch writes the line at once)
    static final long ACK_HOLD_NS = 20_000_000L;

    // Acknowledgements, written as oks lines (harness/history.py): the client completes the
    // messages of one broker batch one after another on its own thread, and the last of the
    // batch (batch index batchSize - 1, or a message sent alone) writes the line, so each
    // acknowledgement's stamp is that of its batch's completion. A line per acknowledgement
    // cost the producer more than its sends.
    static final class Acks {
        final String qtopic;
        final StringBuilder mids = new StringBuilder(), parts = new StringBuilder(),
                ledgers = new StringBuilder(), entries = new StringBuilder(), batches = new StringBuilder();
        int size;
        long firstNs;

        Acks(String qtopic) {
            this.qtopic = qtopic;
        }

        synchronized void add(String mid, MessageIdAdv a) {
            if (size == 0) firstNs = System.nanoTime();
            String sep = size == 0 ? "" : ",";
            mids.append(sep).append(q(mid));
            parts.append(sep).append(Math.max(a.getPartitionIndex(), 0));
            ledgers.append(sep).append(a.getLedgerId());
            entries.append(sep).append(a.getEntryId());
            batches.append(sep).append(a.getBatchIndex());
            size++;
            if (a.getBatchIndex() < 0 || a.getBatchIndex() >= a.getBatchSize() - 1 || size >= 4096) flush();
        }

        synchronized void flushIfOlder(long ns) {
            if (size > 0 && System.nanoTime() - firstNs > ns) flush();
        }

        synchronized void flush() {
            if (size == 0) return;
            record("oks", ",\"topic\":" + qtopic + ",\"mids\":[" + mids + "],\"partitions\":[" + parts
                    + "],\"ledgers\":[" + ledgers + "],\"entries\":[" + entries + "],\"batches\":["
                    + batches + "],\"offsets\":null");
            for (StringBuilder b : new StringBuilder[] {mids, parts, ledgers, entries, batches}) b.setLength(0);
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

        ClientBuilder cb = PulsarClient.builder().serviceUrl(p.getProperty("service_url"))
                .operationTimeout(30, TimeUnit.SECONDS).connectionTimeout(5, TimeUnit.SECONDS);
        StringBuilder conf = new StringBuilder();
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

        AtomicLong outstanding = new AtomicLong();
        long start = System.nanoTime();
        // the schedule on the wall clock of "t": send n (from 0) is due at wallStart + n / rate
        double wallStart = System.currentTimeMillis() / 1000.0;
        long deadline = start + w.hardMs * 1_000_000L;
        long end = w.durationMs >= 0 ? Math.min(deadline, start + w.durationMs * 1_000_000L) : deadline;
        int nparts = Math.max(partitions, 1);
        String qtopic = q(w.topic);
        Acks acks = new Acks(qtopic);
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
            StringBuilder mids = new StringBuilder(16 * (int) due);
            StringBuilder keys = new StringBuilder(w.keys > 0 ? 8 * (int) due : 0);
            StringBuilder parts = new StringBuilder(3 * (int) due);
            for (long i = 0; i < due; i++) {
                String sep = i == 0 ? "" : ",";
                mids.append(sep).append(q(w.client + "-" + (n + i + 1)));
                if (w.keys > 0) keys.append(sep).append("\"k").append((n + i) % w.keys).append('"');
                parts.append(sep).append(w.partition >= 0 ? w.partition : (int) ((n + i) % nparts));
            }
            record("invokes", ",\"topic\":" + qtopic + ",\"mids\":[" + mids + "],\"keys\":"
                    + (w.keys > 0 ? "[" + keys + "]" : "null") + ",\"partitions\":[" + parts + "]"
                    + (w.rate > 0 ? ",\"due\":" + History.fixed6(wallStart + n / w.rate) + ",\"every\":"
                       + History.fixed6(1.0 / w.rate) : ""));
            for (long i = 0; i < due; i++) {
                long k = n + i;
                String mid = w.client + "-" + (k + 1);
                String key = w.keys > 0 ? "k" + (k % w.keys) : null;
                int part = w.partition >= 0 ? w.partition : (int) (k % nparts);
                seqForRouter.set(k);
                byte[] head = (mid + "|").getBytes(StandardCharsets.US_ASCII);
                byte[] value = new byte[Math.max(w.valueSize, head.length)];
                Arrays.fill(value, (byte) 'x');
                System.arraycopy(head, 0, value, 0, head.length);
                outstanding.incrementAndGet();
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
                            q(mid), part, blocked));
                }
                f.whenComplete((id, err) -> {
                    if (err == null) {
                        acks.add(mid, (MessageIdAdv) id);
                    } else {
                        Throwable e = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
                        String what = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage());
                        if (what.length() > 200) what = what.substring(0, 200);
                        acks.flush(); // the acknowledgements before it stay before it
                        record(definite(e) ? "fail" : "info", ",\"mid\":" + q(mid) + ",\"error\":" + q(what));
                    }
                    outstanding.decrementAndGet();
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
        while (outstanding.get() > 0 && System.nanoTime() < drainEnd) {
            Thread.sleep(20);
            acks.flushIfOlder(ACK_HOLD_NS);
        }
        acks.flush();
        record("meta", ",\"status\":\"done\",\"sent\":" + n + ",\"outstanding\":" + outstanding.get());
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
