package dev.rmqharness.patches.fault;

import dev.rmqharness.patches.common.AgentLog;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The plants' counters, called from the advice inlined into broker methods (so public). Each plant counts
 * the calls that qualify (made at least {@code after_ms} after install); of those, the first {@code skip}
 * pass, the next {@code calls} fail, every later one passes. A failed call prints
 * {@code planted failure k/N in Class#method}, k unique per plant (a counter, so exactly N lines).
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

        /** k (1..calls) when this call is to fail, 0 when it passes. */
        long decide(long nowNanos) {
            if (exhausted || nowNanos - installedAtNanos < afterNanos) {
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

    /** Whether this call of plant {@code id} is to fail (and if so, says so on the broker's output). */
    public static boolean hit(int id) {
        Plant[] p = plants;
        if (id < 0 || id >= p.length) {
            return false;
        }
        Plant plant = p[id];
        long k = plant.decide(System.nanoTime());
        if (k == 0) {
            return false;
        }
        AgentLog.info(PopFaultAgent.NAME, "planted failure " + k + "/" + plant.spec.calls + " in "
            + plant.spec.target());
        return true;
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
