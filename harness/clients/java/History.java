// The history file of a Java workload (harness/history.py's contract): one JSON object per
// line with "type", "client", "t" (wall clock, Unix seconds) and "m" (System.nanoTime() in
// seconds: CLOCK_MONOTONIC of the host kernel, the clock of the harness's time.monotonic()),
// flushed at least every 200 ms. Compiled with each workload program (harness/clients/jvm.py).
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

final class History {
    private static Writer out;
    private static String client;
    private static String quotedClient = "null";
    private static final Object LOCK = new Object();
    private static long lastFlush = System.nanoTime();

    private History() {
    }

    static void open(String path, String name) throws IOException {
        client = name;
        quotedClient = q(name);
        out = Files.newBufferedWriter(Paths.get(path), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    static boolean isOpen() {
        synchronized (LOCK) {
            return out != null;
        }
    }

    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    // One event: body holds its other fields, each as ,"name":value. The line is built by
    // hand (String.format parses its pattern on every call: at 100,000 sends a second, two
    // lines a send, it was the producer's largest cost).
    static void record(String type, String body) {
        long millis = System.currentTimeMillis();
        long micros = (System.nanoTime() + 500) / 1000;
        StringBuilder b = new StringBuilder(96 + body.length());
        b.append("{\"type\":\"").append(type).append("\",\"client\":").append(quotedClient)
                .append(",\"t\":");
        fixed6(b, millis / 1000, (millis % 1000) * 1000);
        b.append(",\"m\":");
        fixed6(b, micros / 1_000_000L, micros % 1_000_000L);
        String line = b.append(body).append("}\n").toString();
        synchronized (LOCK) {
            if (out == null) return; // a late callback after the history was closed
            try {
                out.write(line);
                long now = System.nanoTime();
                if (now - lastFlush > 200_000_000L) {
                    out.flush();
                    lastFlush = now;
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    // seconds.micros with six digits after the point ("%.6f" of a non-negative value)
    static void fixed6(StringBuilder b, long seconds, long micros) {
        b.append(seconds).append('.');
        for (long d = 100_000L; d > 1 && micros < d; d /= 10) b.append('0');
        b.append(micros);
    }

    // "%.6f" of a non-negative value, by fixed6
    static String fixed6(double value) {
        long micros = Math.round(value * 1e6);
        StringBuilder b = new StringBuilder(24);
        fixed6(b, micros / 1_000_000L, micros % 1_000_000L);
        return b.toString();
    }

    static void flush() {
        synchronized (LOCK) {
            try {
                if (out != null) out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    static void close() throws IOException {
        synchronized (LOCK) {
            if (out != null) {
                out.flush();
                out.close();
                out = null;
            }
        }
    }

    // A workload's end on an error: the error as a meta event, then exit code 1 (the
    // client's threads would keep the JVM alive).
    static void fail(Throwable e) {
        e.printStackTrace();
        if (isOpen()) {
            record("meta", ",\"status\":\"error\",\"error\":" + q(String.valueOf(e)));
            try {
                close();
            } catch (IOException ignored) {
                // the exit code reports it
            }
        }
        System.exit(1);
    }

    // What every workload program reads from its properties file (its only argument).
    static final class Workload {
        final Properties p;
        final String client;
        final String topic;
        final Path stopFile;
        final long count;
        final long durationMs;
        final double rate;
        final int valueSize;
        final int keys;
        final int partition;
        final long hardMs;

        Workload(Properties p) {
            this.p = p;
            client = p.getProperty("name");
            topic = p.getProperty("topic");
            stopFile = Paths.get(p.getProperty("stop_file"));
            count = num(p, "count", -1);
            durationMs = num(p, "duration_ms", -1);
            rate = Double.parseDouble(p.getProperty("rate", "0"));
            valueSize = (int) num(p, "value_size", 100);
            keys = (int) num(p, "keys", 0);
            partition = (int) num(p, "partition", -1);
            hardMs = num(p, "deadline_ms", 600_000);
        }
    }

    interface Body {
        void run(Workload w) throws Exception;
    }

    // A program's main: reads its properties, opens its history, runs; an error ends it
    // with a meta event and exit code 1 (fail).
    static void main(String[] args, Body body) {
        try {
            Workload w = new Workload(load(args[0]));
            open(w.p.getProperty("history"), w.client);
            body.run(w);
        } catch (Throwable e) {
            fail(e);
        }
    }

    static Properties load(String path) throws IOException {
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8)) {
            p.load(r);
        }
        return p;
    }

    static String opt(Properties p, String k) {
        String v = p.getProperty(k, "").trim();
        return v.isEmpty() ? null : v;
    }

    static long num(Properties p, String k, long dflt) {
        String v = opt(p, k);
        return v == null ? dflt : Long.parseLong(v);
    }

    // The start barrier: producers of one case start sending together, when the harness
    // writes the go file (or the stop file), at most until the deadline.
    static void awaitGo(Properties p, Path stopFile, long hardMs) throws InterruptedException {
        String goName = opt(p, "go_file");
        if (goName == null) return;
        Path go = Paths.get(goName);
        long waitEnd = System.nanoTime() + hardMs * 1_000_000L;
        while (!Files.exists(go) && !Files.exists(stopFile) && System.nanoTime() < waitEnd) Thread.sleep(10);
        record("meta", ",\"status\":\"go\"");
    }
}
