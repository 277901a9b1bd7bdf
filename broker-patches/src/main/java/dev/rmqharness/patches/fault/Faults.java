package dev.rmqharness.patches.fault;

import dev.rmqharness.patches.common.AgentLog;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The plants' counters, called from the advice inlined into broker methods (so public). Each plant counts
 * the calls that qualify (made at least {@code after_ms} after install, on a thread whose name contains
 * {@code thread} when given); of those, the first {@code skip} pass, the next {@code calls} fail (or are delayed),
 * every later one passes. A failed call prints {@code planted failure k/N in Class#method}, a delayed one
 * {@code planted delay k/N of D ms in Class#method (thread name)}, k unique per plant (a counter, so exactly N
 * lines). A plant with {@code exception=X} fails with a new X, made by reflection when the call fails, from the
 * planted method's class's loader (the broker's classes are not visible to the agent's); when X cannot be made, the
 * call fails with RuntimeException and the plant prints once {@code planted failure: cannot make X(...): why; threw
 * RuntimeException instead}.
 */
public final class Faults {
    /** The message of every planted exception. */
    public static final String MESSAGE = "rmq-harness planted failure";
    private static volatile Plant[] plants = new Plant[0];
    /** How often a plant waiting for its arm file looks for it. */
    static final long ARM_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private Faults() {
    }

    static final class Plant {
        final FaultOptions.Spec spec;
        final long installedAtNanos;
        final long afterNanos;
        final AtomicLong qualified = new AtomicLong();
        final AtomicLong planted = new AtomicLong();
        /** Whether the plant said its exception could not be made (said once). */
        final AtomicBoolean saidFallback = new AtomicBoolean();
        volatile boolean exhausted;
        /** When the plant was armed: at install, or when its arm file was first seen. */
        volatile long armedAtNanos;
        volatile boolean armed;
        /** arm_file: the next moment its existence is looked for (at most every ARM_CHECK_NANOS). */
        final AtomicLong nextLook = new AtomicLong(Long.MIN_VALUE);

        Plant(FaultOptions.Spec spec, long installedAtNanos) {
            this.spec = spec;
            this.installedAtNanos = installedAtNanos;
            this.afterNanos = TimeUnit.MILLISECONDS.toNanos(spec.afterMs);
            this.armed = spec.armFile == null;
            this.armedAtNanos = installedAtNanos;
        }

        /** Whether the plant is armed at {@code nowNanos}: at install, or once its arm file exists. */
        boolean armed(long nowNanos) {
            if (armed) {
                return true;
            }
            long next = nextLook.get();
            boolean due = next == Long.MIN_VALUE || nowNanos - next >= 0;
            if (!due || !nextLook.compareAndSet(next, nowNanos + ARM_CHECK_NANOS)) {
                return false; // looked for a moment ago, or another thread is looking now
            }
            if (new java.io.File(spec.armFile).exists()) {
                armedAtNanos = nowNanos;
                armed = true;
                AgentLog.info(PopFaultAgent.NAME, "armed: " + spec.target() + " (" + spec.armFile + " exists)");
                return true;
            }
            return false;
        }

        /** k (1..calls) when this call (on the thread named {@code threadName}) is to fail, 0 when it passes. */
        long decide(long nowNanos, String threadName) {
            if (exhausted || !armed(nowNanos) || nowNanos - armedAtNanos < afterNanos || !spec.onThread(threadName)) {
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

    /** The planted exception (without exception=X). */
    public static RuntimeException failure() {
        return new RuntimeException(MESSAGE);
    }

    /**
     * The planted exception of plant {@code id}, thrown by mode=throw's advice as {@code throw Faults.failure(..)}:
     * a RuntimeException is returned, any other Throwable (a checked exception such as MQBrokerException, an Error)
     * is thrown from here, unchecked by the compiler and undeclared by the planted method, as the JVM allows.
     */
    public static RuntimeException failure(int id, Class<?> origin) {
        Throwable t = planted(id, origin);
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        throw Faults.<RuntimeException>sneaky(t);
    }

    @SuppressWarnings("unchecked")
    static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
        throw (T) t;
    }

    /**
     * What plant {@code id} fails with, made now: a new exception=X from {@code origin}'s loader (origin: the
     * planted method's class), by X(int, String) with code and X(String) without, with {@link #MESSAGE}; the
     * RuntimeException without exception=X, or when X cannot be made (said once per plant).
     */
    static Throwable planted(int id, Class<?> origin) {
        Plant plant = plant(id);
        if (plant == null || plant.spec.exception == null) {
            return failure();
        }
        FaultOptions.Spec spec = plant.spec;
        String signature = spec.exception + (spec.code == null ? "(String)" : "(int, String)");
        String why;
        try {
            ClassLoader loader = origin == null ? null : origin.getClassLoader();
            Class<?> type = Class.forName(spec.exception, true, loader);
            if (!Throwable.class.isAssignableFrom(type)) {
                why = "not a Throwable";
            } else if (spec.code == null) {
                Constructor<?> c = type.getConstructor(String.class);
                return (Throwable) c.newInstance(MESSAGE);
            } else {
                Constructor<?> c = type.getConstructor(int.class, String.class);
                return (Throwable) c.newInstance(spec.code, MESSAGE);
            }
        } catch (ClassNotFoundException e) {
            why = "class not found by " + (origin == null ? "the bootstrap loader" : loaderName(origin));
        } catch (NoSuchMethodException e) {
            why = "no public constructor " + (spec.code == null ? "(String)" : "(int, String)");
        } catch (InvocationTargetException e) {
            why = "the constructor threw " + e.getCause();
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            why = e.toString();
        }
        if (plant.saidFallback.compareAndSet(false, true)) {
            AgentLog.info(PopFaultAgent.NAME, "planted failure: cannot make " + signature + ": " + why
                + "; threw RuntimeException instead");
        }
        return failure();
    }

    private static String loaderName(Class<?> origin) {
        ClassLoader loader = origin.getClassLoader();
        return "the loader of " + origin.getName() + " (" + (loader == null ? "bootstrap" : loader.toString()) + ")";
    }

    /** A future completed exceptionally with the planted exception (without exception=X). */
    public static CompletableFuture<Object> failedFuture() {
        CompletableFuture<Object> f = new CompletableFuture<>();
        f.completeExceptionally(failure());
        return f;
    }

    /** A future completed exceptionally with plant {@code id}'s exception, made from {@code origin}'s loader. */
    public static CompletableFuture<Object> failedFuture(int id, Class<?> origin) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        f.completeExceptionally(planted(id, origin));
        return f;
    }

    /** The return types mode=return_empty serves, by name, each with a fresh empty value (mutable, as the broker's own). */
    static final java.util.Set<String> EMPTIABLE = java.util.Collections.unmodifiableSet(new java.util.HashSet<>(
        java.util.Arrays.asList("java.util.List", "java.util.Collection", "java.lang.Iterable", "java.util.ArrayList",
            "java.util.Set", "java.util.HashSet", "java.util.Map", "java.util.HashMap", "java.lang.String",
            "java.lang.CharSequence")));

    /** An empty value of the declared return type {@code declared} (one of {@link #EMPTIABLE}). */
    public static Object empty(String declared) {
        switch (declared) {
            case "java.util.Set":
            case "java.util.HashSet":
                return new java.util.HashSet<Object>();
            case "java.util.Map":
            case "java.util.HashMap":
                return new java.util.HashMap<Object, Object>();
            case "java.lang.String":
            case "java.lang.CharSequence":
                return "";
            default:
                return new java.util.ArrayList<Object>();
        }
    }
}
