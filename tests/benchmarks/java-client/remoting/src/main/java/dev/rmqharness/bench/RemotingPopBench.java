package dev.rmqharness.bench;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The remoting counterpart of PopBench: the Apache RocketMQ 5.x remoting client talking to the broker itself.
 * fill NAMESRV TOPIC COUNT: a DefaultMQProducer sends COUNT messages of 100 bytes (at most 1,024 in flight).
 * drain NAMESRV TOPIC GROUP COUNT THREADS BATCH: switches GROUP to pop on TOPIC's brokers, then a
 * DefaultMQPushConsumer with broker-side rebalance pops batches of at most BATCH (30 s invisible) into THREADS
 * consume threads, whose listener returns CONSUME_SUCCESS so that the client acks each delivery asynchronously,
 * until COUNT deliveries or 15 s without one. Prints one JSON line: deliveries, how many of them carried a pop
 * check-point (popped), the seconds and this process's CPU seconds from the first delivery to the last, and the
 * epoch instants of both and this process's pid, at which a caller can sample the process's CPU from outside.
 * Ack failures are not in it: the client acks after the listener returns and only logs a failed ack.
 */
public final class RemotingPopBench {
    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    public static void main(String[] args) throws Exception {
        // rocketmq-tools brings rmq.tools.logback.xml, which RocketMQ's logging prefers to the client's own and
        // which writes to ~/logs/rocketmqlogs whatever -Drocketmq.log.root says.
        System.getProperties().putIfAbsent("rmq.logback.configurationFile", "rmq.client.logback.xml");
        switch (args[0]) {
            case "fill" -> fill(args[1], args[2], Integer.parseInt(args[3]));
            case "drain" -> drain(args[1], args[2], args[3], Long.parseLong(args[4]), Integer.parseInt(args[5]),
                Integer.parseInt(args[6]));
            default -> throw new IllegalArgumentException("unknown command " + args[0] + " (fill | drain)");
        }
        System.exit(0);
    }

    private static void fill(String namesrv, String topic, int count) throws Exception {
        byte[] body = "x".repeat(100).getBytes(StandardCharsets.UTF_8);
        AtomicLong failed = new AtomicLong();
        AtomicReference<Throwable> firstFailure = new AtomicReference<>();
        DefaultMQProducer producer = new DefaultMQProducer("RemotingPopBenchFill");
        producer.setNamesrvAddr(namesrv);
        // The client's 3 s default counts the time a send waits in its async executor behind the 1,024.
        producer.setSendMsgTimeout(10_000);
        producer.start();
        long t0 = System.nanoTime();
        Semaphore window = new Semaphore(1024);
        CountDownLatch done = new CountDownLatch(count);
        for (int i = 0; i < count; i++) {
            window.acquire();
            send(producer, new Message(topic, body), 1, e -> {
                if (e != null) {
                    failed.incrementAndGet();
                    firstFailure.compareAndSet(null, e);
                }
                window.release();
                done.countDown();
            });
        }
        done.await();
        double seconds = (System.nanoTime() - t0) / 1e9;
        producer.shutdown();
        // The client does not log a failed async send: the first one says why on stderr.
        if (firstFailure.get() != null) {
            firstFailure.get().printStackTrace();
        }
        System.out.printf("{\"sent\": %d, \"failed\": %d, \"seconds\": %.3f}%n", count - failed.get(), failed.get(),
            seconds);
    }

    /**
     * Sends msg asynchronously and tells done the outcome (null once sent). The remoting client does not retry a
     * busy broker's answer ([TIMEOUT_CLEAN_QUEUE] when a send waited 200 ms in its queue, frequent with 1,024 in
     * flight on a loaded machine), while PopBench's gRPC producer retries it after a backoff, up to 3 attempts:
     * here too, up to 3 attempts, so that both fill the same backlog.
     */
    private static void send(DefaultMQProducer producer, Message msg, int attempt, Consumer<Throwable> done)
        throws Exception {
        producer.send(msg, new SendCallback() {
            @Override
            public void onSuccess(SendResult result) {
                done.accept(null);
            }

            @Override
            public void onException(Throwable e) {
                if (attempt < 3 && e instanceof MQBrokerException busy
                    && busy.getResponseCode() == ResponseCode.SYSTEM_BUSY) {
                    try {
                        send(producer, msg, attempt + 1, done);
                    } catch (Exception again) {
                        done.accept(again);
                    }
                } else {
                    done.accept(e);
                }
            }
        });
    }

    private static void drain(String namesrv, String topic, String group, long count, int threads, int batch)
        throws Exception {
        popMode(namesrv, topic, group);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.subscribe(topic, "*");
        // Broker-side rebalance: the broker's assignment carries the group's request mode, and only a POP
        // assignment makes the client pop (PopProcessQueue, ConsumeMessagePopConcurrentlyService) instead of pull.
        consumer.setClientRebalance(false);
        // The backlog is older than the group's first pop; from the last offset a new group would skip it.
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPopBatchNums(batch);
        consumer.setPopInvisibleTime(30_000);
        // The pool grows past its minimum only when its unbounded queue is full, that is never.
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        AtomicLong delivered = new AtomicLong();
        AtomicLong popped = new AtomicLong();
        AtomicLong firstNs = new AtomicLong();
        AtomicLong firstCpu = new AtomicLong();
        AtomicLong firstEpochNs = new AtomicLong();
        AtomicLong lastNs = new AtomicLong(System.nanoTime());
        AtomicLong lastCpu = new AtomicLong();
        AtomicLong lastEpochNs = new AtomicLong();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            if (firstNs.get() == 0) {
                synchronized (firstNs) {
                    if (firstNs.get() == 0) {
                        firstCpu.set(OS.getProcessCpuTime());
                        firstEpochNs.set(epochNs());
                        firstNs.set(System.nanoTime());
                    }
                }
            }
            // The client sets POP_CK, the broker's check-point handle its ack names, only on popped messages.
            for (MessageExt m : msgs) {
                if (m.getProperty(MessageConst.PROPERTY_POP_CK) != null) {
                    popped.incrementAndGet();
                }
            }
            delivered.addAndGet(msgs.size());
            synchronized (lastNs) {
                lastNs.set(System.nanoTime());
                lastCpu.set(OS.getProcessCpuTime());
                lastEpochNs.set(epochNs());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        while (delivered.get() < count && System.nanoTime() - lastNs.get() < 15_000_000_000L) {
            Thread.sleep(20);
        }
        // Taken before the shutdown, while consume threads may still count batches popped before the COUNT-th.
        String result;
        synchronized (lastNs) {
            result = String.format("{\"deliveries\": %d, \"popped\": %d, \"seconds\": %.3f, \"cpu_s\": %.3f, "
                + "\"threads\": %d, \"batch\": %d, \"first_epoch_ns\": %d, \"last_epoch_ns\": %d, \"pid\": %d}",
                delivered.get(), popped.get(), (lastNs.get() - firstNs.get()) / 1e9,
                (lastCpu.get() - firstCpu.get()) / 1e9, threads, batch, firstEpochNs.get(), lastEpochNs.get(),
                ProcessHandle.current().pid());
        }
        consumer.shutdown();
        System.out.println(result);
    }

    /** What `mqadmin setConsumeMode -c GROUP -t TOPIC -m POP` does, on each master of TOPIC. */
    private static void popMode(String namesrv, String topic, String group) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            for (BrokerData broker : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
                // popShareQueueNum 0: every consumer of the group pops from all of the topic's queues.
                admin.setMessageRequestMode(broker.getBrokerAddrs().get(MixAll.MASTER_ID), topic, group,
                    MessageRequestMode.POP, 0, 10_000);
            }
        } finally {
            admin.shutdown();
        }
    }

    private static long epochNs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }
}
