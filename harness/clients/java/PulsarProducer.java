// The harness's Java Pulsar producer: one workload, run as a single-file source program
// (`java -cp '/opt/pulsar/libs/*' PulsarProducer.java <conf.properties>`) in a container on
// the cluster's network. It writes the history contract of harness/history.py:
//
//   meta    client settings, client version
//   invoke  mid, topic, key, partition (the partition the router chose, before the call),
//           due (with a rate: when the schedule had the send due, wall clock like "t")
//   ok      mid, topic, partition, ledger, entry, batch (MessageIdAdv), offset null
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
        long n = 0;
        while ((w.count < 0 || n < w.count) && System.nanoTime() < end) {
            if ((n & 63) == 0 && Files.exists(w.stopFile)) break;
            long seq = n + 1;
            String mid = w.client + "-" + seq;
            String key = w.keys > 0 ? "k" + (n % w.keys) : null;
            int part = w.partition >= 0 ? w.partition : (int) (n % nparts);
            seqForRouter.set(n);
            byte[] head = (mid + "|").getBytes(StandardCharsets.US_ASCII);
            byte[] value = new byte[Math.max(w.valueSize, head.length)];
            Arrays.fill(value, (byte) 'x');
            System.arraycopy(head, 0, value, 0, head.length);
            String dueField = w.rate > 0 ? ",\"due\":" + History.fixed6(wallStart + n / w.rate) : "";
            record("invoke", ",\"mid\":" + q(mid) + ",\"topic\":" + qtopic + ",\"key\":" + q(key)
                    + ",\"partition\":" + part + dueField);
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
                    MessageIdAdv a = (MessageIdAdv) id;
                    record("ok", ",\"mid\":" + q(mid) + ",\"topic\":" + qtopic + ",\"partition\":"
                            + Math.max(a.getPartitionIndex(), 0) + ",\"ledger\":" + a.getLedgerId()
                            + ",\"entry\":" + a.getEntryId() + ",\"batch\":" + a.getBatchIndex()
                            + ",\"offset\":null");
                } else {
                    Throwable e = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
                    String what = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage());
                    if (what.length() > 200) what = what.substring(0, 200);
                    record(definite(e) ? "fail" : "info", ",\"mid\":" + q(mid) + ",\"error\":" + q(what));
                }
                outstanding.decrementAndGet();
            });
            n++;
            if (w.rate > 0) {
                long due = start + (long) (n * 1e9 / w.rate);
                long ahead = due - System.nanoTime();
                if (ahead > 0) Thread.sleep(Math.min(ahead / 1_000_000L, 500), (int) (ahead % 1_000_000L));
            }
        }
        try {
            producer.flush();
        } catch (Exception e) {
            // each message's callback reports its fate
        }
        long drainEnd = System.nanoTime() + drainMs * 1_000_000L;
        while (outstanding.get() > 0 && System.nanoTime() < drainEnd) Thread.sleep(50);
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
