// The harness's Java Kafka producer: a transactional workload with the Java client of a
// Kafka image (kafka-clients 4.x: transaction version 2, KIP-890, where the brokers have it),
// compiled and run in a container on the cluster's network. It writes the history contract
// of harness/history.py, as the librdkafka workload (harness/clients/kafka.py) does:
//
//   meta    client version, settings; status ready / go / done / error; restart (a new producer)
//   txn     tx, action begin (ok) / commit / abort: invoke, then ok, fail (it definitely did
//           not take effect: an abortable error, the transaction is aborted next) or info
//           (unknown: a timeout, a fatal error)
//   invoke  mid, topic, key, tx, due (with a rate)
//   ok      mid, topic, partition, offset, epoch null (RecordMetadata has no leader epoch)
//   fail    mid, error (the record provably was not written)
//   info    mid, error (outcome unknown)
//   stall   tx, reason, seconds (the client-side hold before a commit or abort)
//
// Per transaction: begin, `size` sends, a flush (the records are in the log before the
// transaction ends), then commit or abort (transaction i aborts when floor((i+1)*abort) >
// floor(i*abort), as harness.case.TxnArgs.aborts). A timed-out commit or abort is called
// again (up to `retries` times); a fatal error (fenced, ...) closes the producer and a new
// one with the same transactional.id goes on (up to `max_restarts` times), as the
// confluent-kafka workload does. Bounded by count, duration, a hard deadline and a stop file.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTxnProducer {
    static void record(String type, String body) {
        History.record(type, body);
    }

    static String q(String s) {
        return History.q(s);
    }

    static String err(Throwable e) {
        String what = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage());
        return what.length() > 200 ? what.substring(0, 200) : what;
    }

    // Errors after which the broker provably did not append the record.
    static boolean definite(Exception e) {
        return e instanceof RecordTooLargeException || e instanceof NotEnoughReplicasException
                || e instanceof InvalidTopicException || e instanceof TopicAuthorizationException
                || e instanceof RecordBatchTooLargeException || e instanceof UnknownTopicOrPartitionException
                || e instanceof SerializationException;
    }

    // Errors after which the producer cannot go on (KafkaProducer's javadoc).
    static boolean fatal(Exception e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
                || e instanceof AuthorizationException || e instanceof UnsupportedVersionException
                || e instanceof InvalidProducerEpochException;
    }

    static Properties conf;
    static KafkaProducer<byte[], byte[]> producer;

    static KafkaProducer<byte[], byte[]> newProducer() {
        KafkaProducer<byte[], byte[]> made = new KafkaProducer<>(conf, new ByteArraySerializer(),
                new ByteArraySerializer());
        made.initTransactions();
        return made;
    }

    public static void main(String[] args) {
        History.main(args, KafkaTxnProducer::run);
    }

    static void run(History.Workload w) throws Exception {
        Properties p = w.p;
        int size = (int) History.num(p, "txn_size", 10);
        double abort = Double.parseDouble(p.getProperty("txn_abort", "0"));
        long holdAt = History.num(p, "hold_at", -1);
        long holdMs = History.num(p, "hold_ms", 0);
        long callMs = History.num(p, "call_timeout_ms", 30_000);
        int retries = (int) History.num(p, "retries", 3);
        int maxRestarts = (int) History.num(p, "max_restarts", 3);

        conf = new Properties();
        conf.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, p.getProperty("bootstrap"));
        conf.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, p.getProperty("transactional_id"));
        conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        conf.put(ProducerConfig.ACKS_CONFIG, "all");
        conf.put(ProducerConfig.LINGER_MS_CONFIG, p.getProperty("linger_ms", "5"));
        conf.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(callMs));
        conf.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, p.getProperty("request_timeout_ms", "30000"));
        conf.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, p.getProperty("delivery_timeout_ms", "120000"));
        String txnTimeout = p.getProperty("transaction_timeout_ms", "").trim();
        if (!txnTimeout.isEmpty()) conf.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, txnTimeout);
        producer = newProducer();
        String version = org.apache.kafka.common.utils.AppInfoParser.getVersion();
        StringBuilder settings = new StringBuilder();
        for (String k : new TreeSet<>(conf.stringPropertyNames())) {
            settings.append(",").append(q(k)).append(":").append(q(conf.getProperty(k)));
        }
        record("meta", ",\"system\":\"kafka\",\"driver\":\"java\",\"client_version\":" + q(version)
                + ",\"producer\":{" + settings.substring(1) + "},\"status\":\"ready\"");
        History.flush();
        History.awaitGo(p, w.stopFile, w.hardMs);

        long start = System.nanoTime();
        double wallStart = System.currentTimeMillis() / 1000.0;
        long deadline = start + w.hardMs * 1_000_000L;
        long end = w.durationMs >= 0 ? Math.min(deadline, start + w.durationMs * 1_000_000L) : deadline;
        String qtopic = q(w.topic);
        AtomicLong outstanding = new AtomicLong();
        long sent = 0;
        int index = 0;
        int restarts = 0;
        while ((w.count < 0 || sent < w.count) && System.nanoTime() < end && !Files.exists(w.stopFile)) {
            long n = w.count < 0 ? size : Math.min(size, w.count - sent);
            String tx = w.client + ".t" + (index + 1);
            try {
                producer.beginTransaction();
            } catch (KafkaException | IllegalStateException e) {
                restarts++;
                if (restarts > maxRestarts || !restart("begin failed: " + err(e))) break;
                continue;
            }
            record("txn", ",\"tx\":" + q(tx) + ",\"action\":\"begin\",\"status\":\"ok\"");
            for (long i = 0; i < n; i++) {
                long seq = sent + i + 1;
                String mid = w.client + "-" + seq;
                String key = w.keys > 0 ? "k" + ((sent + i) % w.keys) : null;
                byte[] head = (mid + "|").getBytes(StandardCharsets.US_ASCII);
                byte[] value = new byte[Math.max(w.valueSize, head.length)];
                Arrays.fill(value, (byte) 'x');
                System.arraycopy(head, 0, value, 0, head.length);
                String due = w.rate > 0 ? String.format(Locale.ROOT, ",\"due\":%.6f", wallStart + (sent + i) / w.rate) : "";
                record("invoke", ",\"mid\":" + q(mid) + ",\"topic\":" + qtopic + ",\"key\":" + q(key)
                        + ",\"tx\":" + q(tx) + due);
                ProducerRecord<byte[], byte[]> rec = w.partition >= 0
                        ? new ProducerRecord<>(w.topic, w.partition, key == null ? null : key.getBytes(StandardCharsets.UTF_8), value)
                        : new ProducerRecord<>(w.topic, key == null ? null : key.getBytes(StandardCharsets.UTF_8), value);
                outstanding.incrementAndGet();
                try {
                    producer.send(rec, (md, e) -> {
                        if (e == null) {
                            record("ok", ",\"mid\":" + q(mid) + ",\"topic\":" + qtopic + ",\"partition\":"
                                    + md.partition() + ",\"offset\":" + md.offset() + ",\"epoch\":null");
                        } else {
                            record(definite(e) ? "fail" : "info", ",\"mid\":" + q(mid) + ",\"error\":" + q(err(e)));
                        }
                        outstanding.decrementAndGet();
                    });
                } catch (KafkaException e) { // the producer is in an error state: its outcome is unknown
                    record("info", ",\"mid\":" + q(mid) + ",\"error\":" + q(err(e)));
                    outstanding.decrementAndGet();
                }
            }
            sent += n;
            try {
                producer.flush();
            } catch (KafkaException e) {
                // each record's callback reports its fate
            }
            boolean aborts = Math.floor((index + 1) * abort + 1e-9) > Math.floor(index * abort + 1e-9);
            String action = aborts ? "abort" : "commit";
            index++;
            if (index == holdAt && holdMs > 0) {
                record("stall", ",\"tx\":" + q(tx) + ",\"reason\":" + q("held before " + action)
                        + String.format(Locale.ROOT, ",\"seconds\":%.3f", holdMs / 1000.0));
                long holdEnd = System.nanoTime() + holdMs * 1_000_000L;
                while (System.nanoTime() < holdEnd && !Files.exists(w.stopFile)) Thread.sleep(20);
            }
            if (!end(tx, action, retries)) {
                restarts++;
                if (restarts > maxRestarts || !restart("after " + tx)) break;
            }
            if (w.rate > 0) {
                long due = start + (long) (sent * 1e9 / w.rate);
                long ahead = due - System.nanoTime();
                if (ahead > 0) Thread.sleep(Math.min(ahead / 1_000_000L, 500));
            }
        }
        record("meta", ",\"status\":\"done\",\"sent\":" + sent + ",\"outstanding\":" + outstanding.get());
        History.close();
        try {
            producer.close(Duration.ofSeconds(5));
        } catch (Exception e) {
            // the history is complete
        }
        System.exit(0);
    }

    // Commits or aborts tx, recording each call; whether the producer can go on.
    static boolean end(String tx, String action, int retries) {
        for (int attempt = 0; attempt <= retries; attempt++) {
            record("txn", ",\"tx\":" + q(tx) + ",\"action\":" + q(action) + ",\"status\":\"invoke\"");
            try {
                if (action.equals("commit")) producer.commitTransaction();
                else producer.abortTransaction();
            } catch (TimeoutException e) { // may be called again
                record("txn", ",\"tx\":" + q(tx) + ",\"action\":" + q(action) + ",\"status\":\"info\",\"error\":" + q(err(e)));
                continue;
            } catch (KafkaException | IllegalStateException e) {
                if (e instanceof IllegalStateException || fatal((Exception) e) || !action.equals("commit")) {
                    record("txn", ",\"tx\":" + q(tx) + ",\"action\":" + q(action) + ",\"status\":\"info\",\"error\":" + q(err(e)));
                    return false;
                }
                // an abortable error: the commit did not take effect; the transaction is aborted
                record("txn", ",\"tx\":" + q(tx) + ",\"action\":\"commit\",\"status\":\"fail\",\"error\":" + q(err(e)));
                return end(tx, "abort", retries);
            }
            record("txn", ",\"tx\":" + q(tx) + ",\"action\":" + q(action) + ",\"status\":\"ok\"");
            return true;
        }
        return false;
    }

    // A new producer with the same transactional.id (its initTransactions ends what the old
    // one left open); whether it is ready.
    static boolean restart(String reason) {
        try {
            producer.close(Duration.ofSeconds(5));
        } catch (Exception e) {
            // a producer in a fatal state: closed as well as it can be
        }
        record("meta", ",\"restart\":" + q(reason));
        try {
            producer = newProducer();
            return true;
        } catch (KafkaException | IllegalStateException e) {
            record("meta", ",\"restart_failed\":" + q(err(e)));
            return false;
        }
    }
}
