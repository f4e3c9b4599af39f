// The Java client's side of benchmarks/pulsar_transactions.py: produce `count` messages of `size`
// bytes on `topic`, batched (sendAsync, then flush), either outside transactions or in one
// transaction per `perTxn` messages (sendAsync in it, then commit). Prints one JSON line:
// {"mode": ..., "count": n, "seconds": s}.
// In transactions: `window` threads, each with a producer of its own, open, fill and commit in turn.
// Usage: TxnBench <serviceUrl> <topic> <count> <size> <plain|txn> <perTxn> <window>
import java.util.concurrent.CompletableFuture;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;

public class TxnBench {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        boolean txnMode = args[4].equals("txn");
        int perTxn = Integer.parseInt(args[5]);
        int window = Integer.parseInt(args[6]);
        byte[] body = new byte[size];
        try (PulsarClient client = PulsarClient.builder().serviceUrl(url).enableTransaction(txnMode).build()) {
            Producer<byte[]> producer = client.newProducer().topic(topic).enableBatching(true)
                .batchingMaxMessages(1000).batchingMaxPublishDelay(10, TimeUnit.MILLISECONDS)
                .maxPendingMessages(10000).blockIfQueueFull(true).sendTimeout(0, TimeUnit.SECONDS).create();
            long start = System.nanoTime();
            if (!txnMode) {
                for (int i = 0; i < count; i++) {
                    producer.sendAsync(body);
                }
                producer.flush();
            } else {
                List<Producer<byte[]>> producers = new ArrayList<>();
                producers.add(producer);
                for (int w = 1; w < window; w++) {
                    producers.add(client.newProducer().topic(topic).enableBatching(true).batchingMaxMessages(1000)
                        .batchingMaxPublishDelay(10, TimeUnit.MILLISECONDS).maxPendingMessages(10000)
                        .blockIfQueueFull(true).sendTimeout(0, TimeUnit.SECONDS).create());
                }
                start = System.nanoTime();
                AtomicInteger failed = new AtomicInteger();
                List<Thread> workers = new ArrayList<>();
                for (int w = 0; w < window; w++) {
                    final int worker = w;
                    Thread thread = new Thread(() -> {
                        try {
                            Producer<byte[]> mine = producers.get(worker);
                            for (int done = worker * perTxn; done < count; done += window * perTxn) {
                                Transaction txn = client.newTransaction()
                                    .withTransactionTimeout(60, TimeUnit.SECONDS).build().get();
                                for (int i = done; i < Math.min(count, done + perTxn); i++) {
                                    mine.newMessage(txn).value(body).sendAsync();
                                }
                                txn.commit().get();
                            }
                        } catch (Exception e) {
                            failed.incrementAndGet();
                        }
                    });
                    workers.add(thread);
                    thread.start();
                }
                for (Thread thread : workers) {
                    thread.join();
                }
                if (failed.get() > 0) {
                    throw new RuntimeException(failed.get() + " workers failed");
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.println("{\"mode\": \"" + args[4] + "\", \"count\": " + count + ", \"seconds\": " + seconds + "}");
            producer.close();
        }
    }
}
