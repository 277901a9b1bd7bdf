package dev.rmqharness.patches.delay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The scheduling logic on plain executors: no broker, no ByteBuddy installation. */
class WakeupDelayTest {
    private static final long DELAY_MS = 150;
    private final List<ExecutorService> executors = new ArrayList<>();

    @AfterEach
    void cleanUp() {
        WakeupDelay.uninstall();
        executors.forEach(ExecutorService::shutdownNow);
    }

    /** The broker's pull executor: one named thread; remembers which thread submitted to it. */
    private ExecutorService pullExecutor(AtomicReference<String> submitter) {
        ExecutorService real = Executors.newSingleThreadExecutor(r -> new Thread(r, "pull"));
        executors.add(real);
        return new Inline() {
            @Override
            public void execute(Runnable command) {
                submitter.set(Thread.currentThread().getName());
                real.execute(command);
            }
        };
    }

    @Test
    void delayedHandOffRunsOnceAfterTheDelayOnAnotherThread() throws Exception {
        WakeupDelay delay = new WakeupDelay(DELAY_MS);
        AtomicReference<String> submitter = new AtomicReference<>();
        AtomicReference<String> runner = new AtomicReference<>();
        AtomicInteger runs = new AtomicInteger();
        AtomicLong ranAt = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        ExecutorService pull = pullExecutor(submitter);

        long start = System.nanoTime();
        delay.handOff(pull, () -> {
            ranAt.set(System.nanoTime());
            runner.set(Thread.currentThread().getName());
            runs.incrementAndGet();
            done.countDown();
        });
        long returnedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertTrue(returnedAfterMs < DELAY_MS / 3, "the waking thread waited " + returnedAfterMs + " ms");
        assertEquals(0, runs.get(), "ran before the delay");
        assertTrue(done.await(5, TimeUnit.SECONDS));
        assertTrue(TimeUnit.NANOSECONDS.toMillis(ranAt.get() - start) >= DELAY_MS,
            "ran after " + TimeUnit.NANOSECONDS.toMillis(ranAt.get() - start) + " ms");
        assertEquals("pull", runner.get());
        assertEquals(WakeupDelayAgent.NAME, submitter.get(), "handed off by the timer thread");
        Thread.sleep(2 * DELAY_MS);
        assertEquals(1, runs.get());
    }

    @Test
    void aHandOffFromInsideTheDelayedHandOffIsNotDelayedAgain() throws Exception {
        WakeupDelay delay = new WakeupDelay(DELAY_MS);
        ExecutorService inline = new Inline(); // runs tasks on the submitting thread, like a caller-runs policy
        AtomicLong outerAt = new AtomicLong();
        AtomicLong innerAt = new AtomicLong();
        AtomicReference<String> innerThread = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        AtomicInteger innerRuns = new AtomicInteger();

        delay.handOff(inline, () -> {
            outerAt.set(System.nanoTime());
            delay.handOff(inline, () -> {
                innerAt.set(System.nanoTime());
                innerThread.set(Thread.currentThread().getName());
                innerRuns.incrementAndGet();
            });
            done.countDown();
        });

        assertTrue(done.await(5, TimeUnit.SECONDS));
        assertEquals(1, innerRuns.get(), "the inner hand-off ran before the outer task returned");
        assertEquals(WakeupDelayAgent.NAME, innerThread.get());
        assertTrue(TimeUnit.NANOSECONDS.toMillis(innerAt.get() - outerAt.get()) < DELAY_MS / 3);
    }

    @Test
    void zeroDelayPassesStraightThrough() {
        WakeupDelay delay = new WakeupDelay(0);
        AtomicReference<Thread> runner = new AtomicReference<>();
        delay.handOff(new Inline(), () -> runner.set(Thread.currentThread()));
        assertEquals(Thread.currentThread(), runner.get());
    }

    @Test
    void everyHandOffRunsOnceInOrder() throws Exception {
        WakeupDelay delay = new WakeupDelay(20);
        ExecutorService pull = pullExecutor(new AtomicReference<>());
        List<Integer> order = Collections.synchronizedList(new ArrayList<>());
        int n = 500;
        CountDownLatch done = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            int id = i;
            delay.handOff(pull, () -> {
                order.add(id);
                done.countDown();
            });
        }
        assertTrue(done.await(10, TimeUnit.SECONDS));
        Thread.sleep(100);
        assertEquals(n, order.size());
        for (int i = 0; i < n; i++) {
            assertEquals(i, order.get(i));
        }
    }

    @Test
    void aRejectedHandOffDoesNotStopLaterOnes() throws Exception {
        WakeupDelay delay = new WakeupDelay(10);
        AtomicInteger calls = new AtomicInteger();
        ExecutorService flaky = new Inline() {
            @Override
            public void execute(Runnable command) {
                if (calls.incrementAndGet() == 1) {
                    throw new RejectedExecutionException("queue full");
                }
                command.run();
            }
        };
        CountDownLatch second = new CountDownLatch(1);
        AtomicInteger firstRuns = new AtomicInteger();
        delay.handOff(flaky, firstRuns::incrementAndGet);
        delay.handOff(flaky, second::countDown);
        assertTrue(second.await(5, TimeUnit.SECONDS));
        assertEquals(0, firstRuns.get());
    }

    @Test
    void theRewrittenCallSiteDelaysOnlyOnceInstalled() throws Exception {
        AtomicReference<Thread> runner = new AtomicReference<>();
        WakeupDelay.submit(new Inline(), () -> runner.set(Thread.currentThread()));
        assertEquals(Thread.currentThread(), runner.get(), "not installed: straight through");

        WakeupDelay.install(DELAY_MS);
        CountDownLatch done = new CountDownLatch(1);
        AtomicLong ranAt = new AtomicLong();
        runner.set(null);
        long start = System.nanoTime();
        WakeupDelay.submit(new Inline(), () -> {
            ranAt.set(System.nanoTime());
            runner.set(Thread.currentThread());
            done.countDown();
        });
        assertTrue(done.await(5, TimeUnit.SECONDS));
        // When the task ran, not when this thread looked: on a loaded machine this thread may be descheduled past
        // the delay before it waits (an "await(DELAY_MS / 3) is false" check failed so, 2026-11-29, beside a sweep).
        assertTrue(TimeUnit.NANOSECONDS.toMillis(ranAt.get() - start) >= DELAY_MS);
        assertNotEquals(Thread.currentThread(), runner.get());
    }

    /** An executor running each task on the thread that submits it. */
    static class Inline extends AbstractExecutorService {
        @Override
        public void execute(Runnable command) {
            command.run();
        }

        @Override
        public void shutdown() {
        }

        @Override
        public List<Runnable> shutdownNow() {
            return Collections.emptyList();
        }

        @Override
        public boolean isShutdown() {
            return false;
        }

        @Override
        public boolean isTerminated() {
            return false;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return true;
        }
    }
}
