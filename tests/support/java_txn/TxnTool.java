// The Java Pulsar client's transactions, driven from the test suite (tests/support/java_txn.py
// compiles and runs this file): the reference the interop tests hold pulsarfast's transactions to.
//
// One command per JVM, its results on stdout as one JSON object per line; the client's own log goes
// to stderr. A failure prints {"error": "<exception class>", "message": "..."} and exits with 1; bad
// arguments exit with 2. Message values are UTF-8 text. Commands:
//
//   produce <serviceUrl> <topic> <n> <prefix> <commit|abort|hold|open> [--batch] [--txn-timeout-ms T]
//       a new transaction, n messages "<prefix>-<i>" sent in it: {"txn": [most, least], "sent": n,
//       "ids": [...]}; then commit / abort it ({"outcome": "committed" | "aborted"}); with hold, wait
//       for a line on stdin first ("commit" or "abort"; end of input leaves it open); with open, leave
//       it open and exit ({"outcome": "open"}: it ends by its timeout, or by the commit/abort commands)
//   consume <serviceUrl> <topic> <subscription> <timeoutMs> [--shared] [--no-ack]
//       subscribe from the earliest message; {"value": ..., "id": ..., "key": ...} per message until
//       none comes within timeoutMs; then {"received": count}
//   consume-txn-ack <serviceUrl> <topic> <subscription> <n> <commit|abort|hold> [--cumulative] [--shared]
//       receive n messages ({"value": ...} each), acknowledge them in a new transaction
//       ({"txn": [most, least], "acked": n}), then end it as produce does
//   new-txn <serviceUrl> [timeoutMs]
//       begin a transaction and leave it open: {"txn": [most, least]}
//   produce-in <serviceUrl> <most> <least> <topic> <n> <prefix> [--batch]
//       send n messages in a transaction begun elsewhere (another client, another process)
//   ack-in <serviceUrl> <most> <least> <topic> <subscription> <n> [--cumulative] [--shared]
//       receive n messages and acknowledge them in a transaction begun elsewhere
//   commit <serviceUrl> <most> <least> / abort <serviceUrl> <most> <least>
//       end a transaction begun elsewhere through the client's transaction coordinator client
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;

public final class TxnTool {
    private static final long RECEIVE_TIMEOUT_MS = 30_000;
    private static final long OP_TIMEOUT_S = 30;

    private TxnTool() {}

    public static void main(String[] argv) {
        if (argv.length < 2) {
            usage("a command and a service URL");
        }
        List<String> args = new ArrayList<>(Arrays.asList(argv));
        List<String> flags = new ArrayList<>();
        String txnTimeout = null;
        for (int i = 0; i < args.size(); ) {
            String a = args.get(i);
            if (a.equals("--txn-timeout-ms") && i + 1 < args.size()) {
                txnTimeout = args.get(i + 1);
                args.remove(i);
                args.remove(i);
            } else if (a.startsWith("--")) {
                flags.add(args.remove(i));
            } else {
                i++;
            }
        }
        String command = args.get(0);
        int code = 0;
        PulsarClient client = null;
        try {
            client = PulsarClient.builder()
                    .serviceUrl(args.get(1))
                    .enableTransaction(true)
                    .operationTimeout((int) OP_TIMEOUT_S, TimeUnit.SECONDS)
                    .build();
            long txnTimeoutMs = txnTimeout == null ? 60_000 : Long.parseLong(txnTimeout);
            switch (command) {
                case "produce":
                    need(args, 6);
                    produce(client, args.get(2), Integer.parseInt(args.get(3)), args.get(4), args.get(5),
                            flags.contains("--batch"), txnTimeoutMs);
                    break;
                case "consume":
                    need(args, 5);
                    consume(client, args.get(2), args.get(3), Long.parseLong(args.get(4)),
                            flags.contains("--shared"), !flags.contains("--no-ack"));
                    break;
                case "consume-txn-ack":
                    need(args, 6);
                    consumeTxnAck(client, args.get(2), args.get(3), Integer.parseInt(args.get(4)), args.get(5),
                            flags.contains("--cumulative"), flags.contains("--shared"), txnTimeoutMs);
                    break;
                case "new-txn":
                    Transaction txn = newTxn(client, args.size() > 2 ? Long.parseLong(args.get(2)) : txnTimeoutMs);
                    emit("{\"txn\": " + txnJson(txn.getTxnID()) + "}");
                    break;
                case "produce-in":
                    need(args, 7);
                    Transaction pin = existing(client, args.get(2), args.get(3), txnTimeoutMs);
                    emit("{\"sent\": " + sendAll(client, pin, args.get(4), Integer.parseInt(args.get(5)),
                            args.get(6), flags.contains("--batch")) + "}");
                    break;
                case "ack-in":
                    need(args, 7);
                    Transaction ain = existing(client, args.get(2), args.get(3), txnTimeoutMs);
                    Consumer<byte[]> consumer = subscribe(client, args.get(4), args.get(5), flags.contains("--shared"));
                    int acked = receiveAndAck(consumer, ain, Integer.parseInt(args.get(6)), flags.contains("--cumulative"));
                    emit("{\"txn\": " + txnJson(ain.getTxnID()) + ", \"acked\": " + acked + "}");
                    consumer.close();
                    break;
                case "commit":
                case "abort":
                    need(args, 4);
                    endElsewhere(client, command, new TxnID(Long.parseLong(args.get(2)), Long.parseLong(args.get(3))));
                    break;
                default:
                    usage("unknown command " + command);
            }
        } catch (Throwable t) {
            Throwable cause = t;
            while ((cause instanceof ExecutionException || cause instanceof java.util.concurrent.CompletionException)
                    && cause.getCause() != null) {
                cause = cause.getCause();
            }
            emit("{\"error\": " + json(cause.getClass().getName()) + ", \"message\": "
                    + json(String.valueOf(cause.getMessage())) + "}");
            code = 1;
        }
        System.out.flush();
        // Every producer and consumer is closed by now; the client itself is not: its close() waits about
        // 2 s for its event loops' quiet period. Its connection just drops (the broker ends no transaction
        // for that, as for a client that crashed).
        Runtime.getRuntime().halt(code);
    }

    // ------------------------------------------------------------------ commands

    private static void produce(PulsarClient client, String topic, int n, String prefix, String end,
                                boolean batch, long txnTimeoutMs) throws Exception {
        checkEnd(end, "commit", "abort", "hold", "open");
        Transaction txn = newTxn(client, txnTimeoutMs);
        List<MessageId> ids = new ArrayList<>();
        int sent = sendAll(client, txn, topic, n, prefix, batch, ids);
        StringBuilder idList = new StringBuilder("[");
        for (int i = 0; i < ids.size(); i++) {
            idList.append(i == 0 ? "" : ", ").append(json(ids.get(i).toString()));
        }
        idList.append("]");
        emit("{\"txn\": " + txnJson(txn.getTxnID()) + ", \"sent\": " + sent + ", \"ids\": " + idList + "}");
        finish(txn, end);
    }

    private static void consume(PulsarClient client, String topic, String subscription, long timeoutMs,
                                boolean shared, boolean ack) throws Exception {
        Consumer<byte[]> consumer = subscribe(client, topic, subscription, shared);
        int count = 0;
        while (true) {
            Message<byte[]> msg = consumer.receive((int) timeoutMs, TimeUnit.MILLISECONDS);
            if (msg == null) {
                break;
            }
            emit(messageJson(msg));
            count++;
            if (ack) {
                consumer.acknowledge(msg);
            }
        }
        emit("{\"received\": " + count + "}");
        consumer.close();
    }

    private static void consumeTxnAck(PulsarClient client, String topic, String subscription, int n, String end,
                                      boolean cumulative, boolean shared, long txnTimeoutMs) throws Exception {
        checkEnd(end, "commit", "abort", "hold");
        Consumer<byte[]> consumer = subscribe(client, topic, subscription, shared);
        Transaction txn = newTxn(client, txnTimeoutMs);
        int acked = receiveAndAck(consumer, txn, n, cumulative);
        emit("{\"txn\": " + txnJson(txn.getTxnID()) + ", \"acked\": " + acked + "}");
        finish(txn, end);
        consumer.close();
    }

    private static void endElsewhere(PulsarClient client, String how, TxnID id) throws Exception {
        PulsarClientImpl impl = (PulsarClientImpl) client;
        if (how.equals("commit")) {
            impl.getTcClient().commitAsync(id).get(OP_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"txn\": " + txnJson(id) + ", \"outcome\": \"committed\"}");
        } else {
            impl.getTcClient().abortAsync(id).get(OP_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"txn\": " + txnJson(id) + ", \"outcome\": \"aborted\"}");
        }
    }

    // ------------------------------------------------------------------ pieces

    private static Transaction newTxn(PulsarClient client, long timeoutMs) throws Exception {
        return client.newTransaction().withTransactionTimeout(timeoutMs, TimeUnit.MILLISECONDS)
                .build().get(OP_TIMEOUT_S, TimeUnit.SECONDS);
    }

    /** A handle on a transaction begun elsewhere: the client's TransactionImpl, whose constructor is
     * package-private (the Java API has no public way to adopt a transaction id). */
    private static Transaction existing(PulsarClient client, String most, String least, long timeoutMs)
            throws Exception {
        Class<?> cls = Class.forName("org.apache.pulsar.client.impl.transaction.TransactionImpl");
        Constructor<?> make = cls.getDeclaredConstructor(PulsarClientImpl.class, long.class, long.class, long.class);
        make.setAccessible(true);
        // (client, transactionTimeoutMs, txnIdLeastBits, txnIdMostBits)
        return (Transaction) make.newInstance(client, timeoutMs, Long.parseLong(least), Long.parseLong(most));
    }

    private static int sendAll(PulsarClient client, Transaction txn, String topic, int n, String prefix,
                               boolean batch) throws Exception {
        return sendAll(client, txn, topic, n, prefix, batch, new ArrayList<>());
    }

    private static int sendAll(PulsarClient client, Transaction txn, String topic, int n, String prefix,
                               boolean batch, List<MessageId> ids) throws Exception {
        // a producer sending in transactions must have no send timeout (the Java client's rule)
        Producer<byte[]> producer = client.newProducer().topic(topic).sendTimeout(0, TimeUnit.SECONDS)
                .enableBatching(batch).create();
        List<CompletableFuture<MessageId>> futures = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] value = (prefix + "-" + i).getBytes(StandardCharsets.UTF_8);
            futures.add(producer.newMessage(txn).value(value).sendAsync());
        }
        producer.flush();
        for (CompletableFuture<MessageId> f : futures) {
            ids.add(f.get(OP_TIMEOUT_S, TimeUnit.SECONDS));
        }
        producer.close();
        return futures.size();
    }

    private static Consumer<byte[]> subscribe(PulsarClient client, String topic, String subscription, boolean shared)
            throws Exception {
        ConsumerBuilder<byte[]> builder = client.newConsumer().topic(topic).subscriptionName(subscription)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscriptionType(shared ? SubscriptionType.Shared : SubscriptionType.Exclusive);
        return builder.subscribe();
    }

    private static int receiveAndAck(Consumer<byte[]> consumer, Transaction txn, int n, boolean cumulative)
            throws Exception {
        Message<byte[]> last = null;
        for (int i = 0; i < n; i++) {
            Message<byte[]> msg = consumer.receive((int) RECEIVE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            if (msg == null) {
                throw new IllegalStateException("received " + i + " of " + n + " messages within "
                        + RECEIVE_TIMEOUT_MS + " ms each");
            }
            emit(messageJson(msg));
            last = msg;
            if (!cumulative) {
                consumer.acknowledgeAsync(msg.getMessageId(), txn).get(OP_TIMEOUT_S, TimeUnit.SECONDS);
            }
        }
        if (cumulative && last != null) {
            consumer.acknowledgeCumulativeAsync(last.getMessageId(), txn).get(OP_TIMEOUT_S, TimeUnit.SECONDS);
        }
        return n;
    }

    private static void finish(Transaction txn, String end) throws Exception {
        if (end.equals("open")) {
            emit("{\"outcome\": \"open\"}");
            return;
        }
        if (end.equals("hold")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line = in.readLine();
            if (line == null) {
                emit("{\"outcome\": \"open\"}");
                return;
            }
            end = line.trim();
            checkEnd(end, "commit", "abort");
        }
        if (end.equals("commit")) {
            txn.commit().get(OP_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"outcome\": \"committed\", \"state\": " + json(txn.getState().name()) + "}");
        } else {
            txn.abort().get(OP_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"outcome\": \"aborted\", \"state\": " + json(txn.getState().name()) + "}");
        }
    }

    // ------------------------------------------------------------------ output

    private static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String txnJson(TxnID id) {
        return "[" + id.getMostSigBits() + ", " + id.getLeastSigBits() + "]";
    }

    private static String messageJson(Message<byte[]> msg) {
        StringBuilder props = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, String> e : msg.getProperties().entrySet()) {
            props.append(first ? "" : ", ").append(json(e.getKey())).append(": ").append(json(e.getValue()));
            first = false;
        }
        props.append("}");
        return "{\"value\": " + json(new String(msg.getData(), StandardCharsets.UTF_8))
                + ", \"id\": " + json(msg.getMessageId().toString())
                + ", \"key\": " + (msg.hasKey() ? json(msg.getKey()) : "null")
                + ", \"redelivery_count\": " + msg.getRedeliveryCount()
                + ", \"properties\": " + props + "}";
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    // ------------------------------------------------------------------ arguments

    private static void checkEnd(String end, String... allowed) {
        if (!Arrays.asList(allowed).contains(end)) {
            usage("expected one of " + Arrays.toString(allowed) + ", got " + end);
        }
    }

    private static void need(List<String> args, int count) {
        if (args.size() < count) {
            usage(args.get(0) + " needs " + (count - 1) + " arguments, got " + (args.size() - 1));
        }
    }

    private static void usage(String why) {
        emit("{\"error\": \"usage\", \"message\": " + json(why) + "}");
        System.out.flush();
        Runtime.getRuntime().halt(2);
    }
}
