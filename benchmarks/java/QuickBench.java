// The Java client's side of benchmarks/pulsar_quick.py (run by benchmarks/pulsar_java.py): the same
// workloads as the Python children, with the same producer and consumer settings, timed inside this
// JVM (start-up and the warm-up excluded), printing one line "RESULT {json}" shaped like theirs.
//
// Arguments: key=value pairs (see Args below): url, brokerPid, clkTck, webUrl, metric, workloads
// (comma-separated: produce, consume, consume16, fire, send), messages, sendMessages, batching,
// receiverQueue, subscription, topicProduce, topicConsume, topicConsume16, topicFire, topicSend,
// warmupMessages, topicWarmup, topicWarmup16 (a partitioned topic, optional).
//
// Producers: maxPendingMessages 1000, blockIfQueueFull, batching on or off; batched: 1000 messages,
// 128 KiB and a 10 ms publish delay (the C++/Python clients' defaults; Java's own delay default is
// 1 ms). Consumers: Shared, Earliest, receiverQueueSize as told (1000).
//
// Warm-up (not timed, before any workload): warmupMessages messages produced with sendAsync and a
// callback, as many fire-and-forget, and consumed with receive + acknowledge, on a topic of its own
// (and, given topicWarmup16, as many fired and consumed on a partitioned one), so the JIT has
// compiled the client's paths before the timed part.
//
// CPU: this process's CPU time from com.sun.management.OperatingSystemMXBean.getProcessCpuTime()
// (every thread of the JVM: the client's I/O threads, GC and JIT too), the broker's utime+stime from
// /proc/<brokerPid>/stat and the whole machine's from /proc/stat, across each timed part.
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

public class QuickBench {
    static final int PAYLOAD_SIZE = 100;

    static Map<String, String> args;
    static PulsarClient client;

    static String arg(String key) {
        String value = args.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing argument " + key + "=...");
        }
        return value;
    }

    /** count distinct 100-byte bodies, the same bytes as pulsar_quick.payloads(count, tag). */
    static byte[][] payloads(int count, String tag) {
        byte[][] out = new byte[count][];
        for (int i = 0; i < count; i++) {
            String head = String.format("%s-%010d-", tag, i);
            StringBuilder body = new StringBuilder(PAYLOAD_SIZE).append(head);
            while (body.length() < PAYLOAD_SIZE) {
                body.append('x');
            }
            out[i] = body.toString().getBytes(StandardCharsets.ISO_8859_1);
        }
        return out;
    }

    // ------------------------------------------------------------------ CPU and time

    static double statSeconds(String path) throws Exception {
        String stat = new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.ISO_8859_1);
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
        return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / Double.parseDouble(arg("clkTck"));
    }

    static double systemBusySeconds() throws Exception {
        String line = Files.readAllLines(Paths.get("/proc/stat")).get(0);
        String[] f = line.trim().split("\\s+");
        long busy = 0;
        int[] counted = {1, 2, 3, 6, 7, 8};  // user nice system (idle iowait) irq softirq steal
        for (int i : counted) {
            if (i < f.length) {
                busy += Long.parseLong(f[i]);
            }
        }
        return busy / Double.parseDouble(arg("clkTck"));
    }

    static double selfCpuSeconds() {
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    static class Meter {
        double s0, b0, c0;
        long t0;

        void start() throws Exception {
            s0 = systemBusySeconds();
            b0 = statSeconds("/proc/" + arg("brokerPid") + "/stat");
            c0 = selfCpuSeconds();
            t0 = System.nanoTime();
        }

        Map<String, Object> stop(int count) throws Exception {
            long t1 = System.nanoTime();
            double c1 = selfCpuSeconds();
            double b1 = statSeconds("/proc/" + arg("brokerPid") + "/stat");
            double s1 = systemBusySeconds();
            double seconds = (t1 - t0) / 1e9;
            double other = Math.max(0.0, (s1 - s0) - (c1 - c0) - (b1 - b0));
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("count", count);
            r.put("seconds", seconds);
            r.put("rate", seconds > 0 ? count / seconds : null);
            r.put("client_cpu_s", c1 - c0);
            r.put("broker_cpu_s", b1 - b0);
            r.put("client_cpu_us_per_msg", (c1 - c0) * 1e6 / count);
            r.put("broker_cpu_us_per_msg", (b1 - b0) * 1e6 / count);
            r.put("other_cpu_s", other);
            r.put("other_cpu_pct", seconds > 0 ? 100.0 * other / seconds : null);
            return r;
        }
    }

    /** The sum of a Prometheus metric's samples from the broker's /metrics/ (null when unreadable). */
    static Double metricTotal() {
        String name = args.get("metric");
        if (name == null || args.get("webUrl") == null) {
            return null;
        }
        try {
            HttpURLConnection conn = (HttpURLConnection) new URL(arg("webUrl") + "/metrics/").openConnection();
            conn.setConnectTimeout(10000);
            conn.setReadTimeout(30000);
            String text;
            try (InputStream in = conn.getInputStream()) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
            double total = 0;
            for (String line : text.split("\n")) {
                if (line.startsWith(name) && line.length() > name.length()
                        && (line.charAt(name.length()) == '{' || line.charAt(name.length()) == ' ')) {
                    total += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                }
            }
            return total;
        } catch (Exception e) {
            return null;
        }
    }

    // ------------------------------------------------------------------ clients

    static Producer<byte[]> producer(String topic) throws Exception {
        return client.newProducer().topic(topic)
            .maxPendingMessages(1000).blockIfQueueFull(true)
            .enableBatching(Boolean.parseBoolean(arg("batching")))
            .batchingMaxMessages(1000).batchingMaxBytes(128 * 1024)
            .batchingMaxPublishDelay(10, TimeUnit.MILLISECONDS)
            .create();
    }

    static Consumer<byte[]> consumer(String topic) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName(arg("subscription"))
            .subscriptionType(SubscriptionType.Shared)
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
            .receiverQueueSize(Integer.parseInt(arg("receiverQueue")))
            .subscribe();
    }

    // ------------------------------------------------------------------ workloads

    /** sendAsync(body) with a callback counting the outcomes, then flush(). */
    static Map<String, Object> produce(String topic, byte[][] bodies, Meter meter) throws Exception {
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger err = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        Producer<byte[]> producer = producer(topic);
        if (meter != null) {
            meter.start();
        }
        for (byte[] body : bodies) {
            producer.sendAsync(body).whenComplete((id, exc) -> {
                if (exc == null) {
                    ok.incrementAndGet();
                } else {
                    err.incrementAndGet();
                    firstError.compareAndSet(null, exc.toString());
                }
            });
        }
        producer.flush();
        Map<String, Object> r = meter != null ? meter.stop(bodies.length) : new LinkedHashMap<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ok.get() + err.get() < bodies.length && System.nanoTime() < deadline) {
            Thread.sleep(10);  // the last callbacks may still be on their way (not timed)
        }
        r.put("callbacks_ok", ok.get());
        r.put("callbacks_err", err.get());
        r.put("first_error", firstError.get());
        producer.close();
        return r;
    }

    /** sendAsync(body), the future ignored, then flush(). */
    static Map<String, Object> fire(String topic, byte[][] bodies, Meter meter) throws Exception {
        Producer<byte[]> producer = producer(topic);
        if (meter != null) {
            meter.start();
        }
        for (byte[] body : bodies) {
            producer.sendAsync(body);
        }
        producer.flush();
        Map<String, Object> r = meter != null ? meter.stop(bodies.length) : new LinkedHashMap<>();
        producer.close();
        return r;
    }

    /** receive() + acknowledge() one by one, n messages; every payload kept to check them after. */
    static Map<String, Object> consume(String topic, int n, byte[][] expected, Meter meter) throws Exception {
        Consumer<byte[]> consumer = consumer(topic);
        Set<String> seen = new HashSet<>(n * 2);
        int got = 0;
        String error = null;
        Double readsBefore = meter != null ? metricTotal() : null;
        if (meter != null) {
            meter.start();
        }
        try {
            for (int i = 0; i < n; i++) {
                Message<byte[]> msg = consumer.receive(30, TimeUnit.SECONDS);
                if (msg == null) {
                    throw new RuntimeException("Timeout: no message in 30 s");
                }
                seen.add(new String(msg.getData(), StandardCharsets.ISO_8859_1));
                consumer.acknowledge(msg);
                got++;
            }
        } catch (Exception e) {
            error = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        Map<String, Object> r = meter != null ? meter.stop(Math.max(got, 1)) : new LinkedHashMap<>();
        Double readsAfter = meter != null ? metricTotal() : null;
        Set<String> produced = new HashSet<>(expected.length * 2);
        for (byte[] body : expected) {
            produced.add(new String(body, StandardCharsets.ISO_8859_1));
        }
        int unexpected = 0;
        for (String body : seen) {
            if (!produced.contains(body)) {
                unexpected++;
            }
        }
        r.put("received", got);
        r.put("distinct", seen.size());
        r.put("unexpected", unexpected);
        r.put("error", error);
        r.put("broker_entries_read", readsBefore != null && readsAfter != null ? readsAfter - readsBefore : null);
        consumer.close();  // (the grouped acks go out here)
        return r;
    }

    /** a blocking send() at a time. */
    static Map<String, Object> send(String topic, byte[][] bodies, Meter meter) throws Exception {
        Producer<byte[]> producer = producer(topic);
        int sent = 0;
        String error = null;
        meter.start();
        try {
            for (byte[] body : bodies) {
                producer.send(body);
                sent++;
            }
        } catch (Exception e) {
            error = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        Map<String, Object> r = meter.stop(Math.max(sent, 1));
        r.put("sent_ok", sent);
        r.put("error", error);
        producer.close();
        return r;
    }

    // ------------------------------------------------------------------ JSON out

    static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            if (value instanceof Double && (((Double) value).isNaN() || ((Double) value).isInfinite())) {
                return "null";
            }
            return value.toString();
        }
        if (value instanceof Map) {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (out.length() > 1) {
                    out.append(", ");
                }
                out.append(json(e.getKey().toString())).append(": ").append(json(e.getValue()));
            }
            return out.append('}').toString();
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    public static void main(String[] argv) throws Exception {
        args = new HashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
        List<String> workloads = Arrays.asList(arg("workloads").split(","));
        int n = Integer.parseInt(arg("messages"));
        Map<String, Object> results = new LinkedHashMap<>();
        Map<String, Object> out = new LinkedHashMap<>();
        client = PulsarClient.builder().serviceUrl(arg("url")).build();
        out.put("lib_file", client.getClass().getProtectionDomain().getCodeSource().getLocation().getPath());
        try {
            int warm = Integer.parseInt(args.getOrDefault("warmupMessages", "0"));
            if (warm > 0) {
                long began = System.nanoTime();
                String topic = arg("topicWarmup");
                byte[][] bodies = payloads(warm, "w");
                consumer(topic).close();  // (the subscription holds what follows)
                produce(topic, bodies, null);
                fire(topic, bodies, null);
                consume(topic, 2 * warm, bodies, null);
                if (args.containsKey("topicWarmup16")) {  // (a partitioned topic: its consumer's paths)
                    String partitioned = arg("topicWarmup16");
                    consumer(partitioned).close();
                    fire(partitioned, bodies, null);
                    consume(partitioned, warm, bodies, null);
                }
                out.put("warmup_seconds", (System.nanoTime() - began) / 1e9);
            }
            Meter meter = new Meter();
            byte[][] produced = payloads(n, "p");
            if (workloads.contains("produce")) {
                results.put("produce", produce(arg("topicProduce"), produced, meter));
            }
            if (workloads.contains("consume")) {
                results.put("consume", consume(arg("topicConsume"), n, produced, meter));
            }
            if (workloads.contains("consume16")) {
                results.put("consume16", consume(arg("topicConsume16"), n, produced, meter));
            }
            if (workloads.contains("fire")) {
                results.put("fire", fire(arg("topicFire"), payloads(n, "f"), meter));
            }
            if (workloads.contains("send")) {
                results.put("send", send(arg("topicSend"), payloads(Integer.parseInt(arg("sendMessages")), "s"), meter));
            }
        } finally {
            client.close();
        }
        out.put("workloads", results);
        System.out.println("RESULT " + json(out));
        System.out.flush();
    }
}
