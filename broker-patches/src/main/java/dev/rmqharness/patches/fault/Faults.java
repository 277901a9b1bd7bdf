package dev.rmqharness.patches.fault;

import dev.rmqharness.patches.common.AgentLog;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The plants' counters, called from the advice inlined into broker methods (so public). Each plant counts
 * the calls that qualify (made at least {@code after_ms} after install, on a thread whose name contains
 * {@code thread} when given); of those, the first {@code skip} pass, the next {@code calls} fail (or are delayed),
 * every later one passes. A failed call prints {@code planted failure k/N in Class#method}, a delayed one
 * {@code planted delay k/N of D ms in Class#method (thread name)}, k unique per plant (a counter, so exactly N
 * lines).
 */
public final class Faults {
    /** The message of every planted exception. */
    public static final String MESSAGE = "rmq-harness planted failure";
    private static volatile Plant[] plants = new Plant[0];

    private Faults() {
    }

    static final class Plant {
        final FaultOptions.Spec spec;
        final long installedAtNanos;
        final long afterNanos;
        final AtomicLong qualified = new AtomicLong();
        final AtomicLong planted = new AtomicLong();
        volatile boolean exhausted;

        Plant(FaultOptions.Spec spec, long installedAtNanos) {
            this.spec = spec;
            this.installedAtNanos = installedAtNanos;
            this.afterNanos = TimeUnit.MILLISECONDS.toNanos(spec.afterMs);
        }

        /** k (1..calls) when this call (on the thread named {@code threadName}) is to fail, 0 when it passes. */
        long decide(long nowNanos, String threadName) {
            if (exhausted || nowNanos - installedAtNanos < afterNanos || !spec.onThread(threadName)) {
                return 0;
            }
            long n = qualified.incrementAndGet();
            if (n <= spec.skip) {
                return 0;
            }
            long k = n - spec.skip;
            if (k > spec.calls) {
                exhausted = true;
                return 0;
            }
            planted.incrementAndGet();
            return k;
        }
    }

    /** Sets the plants (ids are their indexes), counting after_ms from now. */
    static void install(List<FaultOptions.Spec> specs) {
        install(specs, System.nanoTime());
    }

    static void install(List<FaultOptions.Spec> specs, long installedAtNanos) {
        Plant[] next = new Plant[specs.size()];
        for (int i = 0; i < next.length; i++) {
            next[i] = new Plant(specs.get(i), installedAtNanos);
        }
        plants = next;
    }

    static void uninstall() {
        plants = new Plant[0];
    }

    /** How many calls of plant {@code id} have been failed so far. */
    static long planted(int id) {
        Plant[] p = plants;
        return id >= 0 && id < p.length ? p[id].planted.get() : 0;
    }

    private static Plant plant(int id) {
        Plant[] p = plants;
        return id >= 0 && id < p.length ? p[id] : null;
    }

    /** The current thread's name, asked only when a plant filters by it. */
    private static String threadName(Plant plant) {
        return plant.spec.thread == null ? null : Thread.currentThread().getName();
    }

    /** Whether this call of plant {@code id} is to fail (and if so, says so on the broker's output). */
    public static boolean hit(int id) {
        Plant plant = plant(id);
        if (plant == null) {
            return false;
        }
        long k = plant.decide(System.nanoTime(), threadName(plant));
        if (k == 0) {
            return false;
        }
        AgentLog.info(PopFaultAgent.NAME, "planted failure " + k + "/" + plant.spec.calls + " in "
            + plant.spec.target());
        return true;
    }

    /**
     * mode=delay: when this call of plant {@code id} is counted, says so on the broker's output and sleeps the
     * plant's delay_ms before the body runs; an interrupted sleep ends early with the thread's interrupt flag set
     * again (the body then runs as it would).
     */
    public static void delay(int id) {
        Plant plant = plant(id);
        if (plant == null) {
            return;
        }
        long k = plant.decide(System.nanoTime(), threadName(plant));
        if (k == 0) {
            return;
        }
        AgentLog.info(PopFaultAgent.NAME, "planted delay " + k + "/" + plant.spec.calls + " of "
            + plant.spec.delayMs + " ms in " + plant.spec.target() + " (thread " + Thread.currentThread().getName()
            + ")");
        try {
            Thread.sleep(plant.spec.delayMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The planted exception. */
    public static RuntimeException failure() {
        return new RuntimeException(MESSAGE);
    }

    /** A future completed exceptionally with the planted exception. */
    public static CompletableFuture<Object> failedFuture() {
        CompletableFuture<Object> f = new CompletableFuture<>();
        f.completeExceptionally(failure());
        return f;
    }
}
