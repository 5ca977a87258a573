import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.common.util.OrderedExecutor;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.proto.BookieClient;
import org.apache.bookkeeper.proto.BookieClientImpl;
import org.apache.bookkeeper.proto.BookieProtocol;
import org.apache.bookkeeper.stats.NullStatsLogger;

/**
 * What each bookie holds of some ledgers: every (ledger, bookie, entry) of the tasks file is
 * read from that bookie alone (BookKeeper's BookieClient, no fencing, no recovery), and one
 * JSON line per read says what came back: the entry's length as stored, a CRC-32 of its
 * payload (what follows the 32-byte header and the digest code: the producer's bytes, the same
 * on every copy; the header's last add confirmed and the code are not, since a ledger
 * recovery writes an entry again with its own), and the last add confirmed in its header; or
 * the bookie's return code when it has no such entry.
 *
 * Properties: tasks (a file of lines "ledger bookie first last", entries first..last
 * inclusive), out (the JSON-lines file written), digest.LEDGER (the bytes of that ledger's
 * digest code; absent: the CRC-32 covers every stored byte and the line says "crc_of":
 * "stored"), inflight (reads at once, default 256), timeout_s (per read, default 10).
 */
public class BookieDump {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            p.load(in);
        }
        List<long[]> ranges = new ArrayList<>();
        List<String> bookies = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new FileReader(p.getProperty("tasks")))) {
            String line;
            while ((line = r.readLine()) != null) {
                String[] f = line.trim().split("\\s+");
                if (f.length != 4) {
                    continue;
                }
                ranges.add(new long[] {Long.parseLong(f[0]), Long.parseLong(f[2]), Long.parseLong(f[3])});
                bookies.add(f[1]);
            }
        }
        int timeout = Integer.parseInt(p.getProperty("timeout_s", "10"));
        ClientConfiguration conf = new ClientConfiguration();
        conf.setReadEntryTimeout(timeout);
        conf.setAddEntryTimeout(timeout);
        EventLoopGroup loop = new NioEventLoopGroup(1);
        OrderedExecutor executor = OrderedExecutor.newBuilder().numThreads(1).name("dump").build();
        ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
        BookieClient client = new BookieClientImpl(conf, loop, UnpooledByteBufAllocator.DEFAULT, executor,
                scheduler, NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
        Semaphore inflight = new Semaphore(Integer.parseInt(p.getProperty("inflight", "256")));
        long reads = 0;
        try (PrintWriter out = new PrintWriter(new FileWriter(p.getProperty("out")))) {
            for (int i = 0; i < ranges.size(); i++) {
                long ledger = ranges.get(i)[0];
                String bookie = bookies.get(i);
                BookieId id = BookieId.parse(bookie);
                for (long entry = ranges.get(i)[1]; entry <= ranges.get(i)[2]; entry++) {
                    inflight.acquire();
                    reads++;
                    int code = Integer.parseInt(p.getProperty("digest." + ledger, "-1"));
                    client.readEntry(id, ledger, entry, (rc, l, e, buf, ctx) -> {
                        try {
                            String line = line(l, e, bookie, rc, buf, code);
                            synchronized (out) {
                                out.println(line);
                            }
                        } finally {
                            inflight.release();
                        }
                    }, null, BookieProtocol.FLAG_NONE);
                }
            }
            int all = Integer.parseInt(p.getProperty("inflight", "256"));
            if (!inflight.tryAcquire(all, (long) timeout * 3, TimeUnit.SECONDS)) {
                System.err.println("reads still outstanding after " + timeout * 3 + " s");
            }
        }
        System.out.println("read " + reads + " entries");
        System.out.flush();
        // the output is closed and complete: no graceful shutdown of the client's threads (netty
        // waits 2 s of quiet for it)
        Runtime.getRuntime().halt(0);
    }

    static final int HEADER = 32; // ledger id, entry id, last add confirmed, length

    static String line(long ledger, long entry, String bookie, int rc, ByteBuf buf, int code) {
        StringBuilder s = new StringBuilder(160);
        s.append("{\"ledger\":").append(ledger).append(",\"entry\":").append(entry)
            .append(",\"bookie\":\"").append(bookie).append("\",\"rc\":").append(rc);
        if (rc == BKException.Code.OK && buf != null) {
            int n = buf.readableBytes();
            byte[] bytes = new byte[n];
            buf.getBytes(buf.readerIndex(), bytes);
            CRC32 crc = new CRC32();
            int from = code >= 0 && n >= HEADER + code ? HEADER + code : 0;
            crc.update(bytes, from, n - from);
            s.append(",\"bytes\":").append(n).append(",\"crc32\":\"").append(Long.toHexString(crc.getValue()))
                .append('"');
            if (from == 0) {
                s.append(",\"crc_of\":\"stored\"");
            }
            if (n >= 24) {
                s.append(",\"lac\":").append(buf.getLong(buf.readerIndex() + 16));
            }
        } else {
            s.append(",\"error\":\"").append(BKException.getMessage(rc).replace("\"", "'")).append('"');
        }
        // the buffer is the bookie client's: it releases it once the callback returns
        return s.append('}').toString();
    }
}
