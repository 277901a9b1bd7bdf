package dev.rmqharness.bench;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * fill ENDPOINTS TOPIC COUNT: sends COUNT messages of 100 bytes (at most 1,024 in flight).
 * drain ENDPOINTS TOPIC GROUP COUNT THREADS BATCH: THREADS SimpleConsumers' threads receive batches of
 * at most BATCH (30 s invisible, 5 s long poll) and ack each delivery asynchronously, until COUNT
 * deliveries or 15 s without one. Prints one JSON line: deliveries, the seconds and this process's CPU
 * seconds from the first delivery to the last, and the epoch instants of both and this process's pid, at which
 * a caller can sample the process's CPU from outside.
 */
public final class PopBench {
    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    public static void main(String[] args) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(args[1])
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        switch (args[0]) {
            case "fill" -> fill(provider, config, args[2], Integer.parseInt(args[3]));
            case "drain" -> drain(provider, config, args[2], args[3], Long.parseLong(args[4]),
                Integer.parseInt(args[5]), Integer.parseInt(args[6]));
            default -> throw new IllegalArgumentException("unknown command " + args[0] + " (fill | drain)");
        }
        System.exit(0);
    }

    private static void fill(ClientServiceProvider provider, ClientConfiguration config, String topic, int count)
        throws Exception {
        byte[] body = "x".repeat(100).getBytes(StandardCharsets.UTF_8);
        AtomicLong failed = new AtomicLong();
        long t0 = System.nanoTime();
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            Semaphore window = new Semaphore(1024);
            CountDownLatch done = new CountDownLatch(count);
            for (int i = 0; i < count; i++) {
                window.acquire();
                producer.sendAsync(provider.newMessageBuilder().setTopic(topic).setBody(body).build())
                    .whenComplete((r, e) -> {
                        if (e != null) {
                            failed.incrementAndGet();
                        }
                        window.release();
                        done.countDown();
                    });
            }
            done.await();
        }
        System.out.printf("{\"sent\": %d, \"failed\": %d, \"seconds\": %.3f}%n", count - failed.get(), failed.get(),
            (System.nanoTime() - t0) / 1e9);
    }

    private static void drain(ClientServiceProvider provider, ClientConfiguration config, String topic, String group,
        long count, int threads, int batch) throws Exception {
        SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Map.of(topic, FilterExpression.SUB_ALL)).build();
        AtomicLong delivered = new AtomicLong();
        AtomicLong ackFailed = new AtomicLong();
        AtomicLong firstNs = new AtomicLong();
        AtomicLong firstCpu = new AtomicLong();
        AtomicLong firstEpochNs = new AtomicLong();
        AtomicLong lastNs = new AtomicLong(System.nanoTime());
        AtomicLong lastCpu = new AtomicLong();
        AtomicLong lastEpochNs = new AtomicLong();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                while (delivered.get() < count && System.nanoTime() - lastNs.get() < 15_000_000_000L) {
                    List<MessageView> got;
                    try {
                        got = consumer.receive(batch, Duration.ofSeconds(30));
                    } catch (Exception e) {
                        continue;  // an empty long poll is an exception in this client
                    }
                    if (got.isEmpty()) {
                        continue;
                    }
                    if (firstNs.get() == 0) {
                        synchronized (firstNs) {
                            if (firstNs.get() == 0) {
                                firstCpu.set(OS.getProcessCpuTime());
                                firstEpochNs.set(epochNs());
                                firstNs.set(System.nanoTime());
                            }
                        }
                    }
                    for (MessageView m : got) {
                        consumer.ackAsync(m).whenComplete((r, e) -> {
                            if (e != null) {
                                ackFailed.incrementAndGet();
                            }
                        });
                    }
                    delivered.addAndGet(got.size());
                    synchronized (lastNs) {
                        lastNs.set(System.nanoTime());
                        lastCpu.set(OS.getProcessCpuTime());
                        lastEpochNs.set(epochNs());
                    }
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        double seconds = (lastNs.get() - firstNs.get()) / 1e9;
        double cpu = (lastCpu.get() - firstCpu.get()) / 1e9;
        consumer.close();
        System.out.printf("{\"deliveries\": %d, \"ack_failed\": %d, \"seconds\": %.3f, \"cpu_s\": %.3f, "
            + "\"threads\": %d, \"batch\": %d, \"first_epoch_ns\": %d, \"last_epoch_ns\": %d, \"pid\": %d}%n",
            delivered.get(), ackFailed.get(), seconds, cpu, threads, batch, firstEpochNs.get(), lastEpochNs.get(),
            ProcessHandle.current().pid());
    }

    private static long epochNs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }
}
