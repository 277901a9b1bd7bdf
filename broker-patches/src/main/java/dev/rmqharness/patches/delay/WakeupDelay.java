package dev.rmqharness.patches.delay;

import dev.rmqharness.patches.common.AgentLog;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Hands a woken pop request's task to the broker's executor {@code delayMs} late, without blocking the
 * thread that woke it.
 *
 * <p>The agent rewrites the one {@code executor.submit(task)} call inside
 * {@code PopLongPollingService.wakeUp(PopRequest, CommandCallback)} into {@link #submit}. Everything
 * before that call (claiming the request with {@code request.complete()}, attaching the lag
 * calculator's callback, the channel check, the {@code true} returned to the caller) still happens on
 * the waking thread at the original moment; only the re-execution of the request is postponed. A
 * single daemon timer thread does the postponed hand-offs, in the order they were asked for (equal
 * delays, FIFO ties), so a burst of wakeups costs the waking threads nothing.
 *
 * <p>A hand-off made on the timer thread while it is handing off (only possible if the executor ran the
 * task inline, e.g. a caller-runs policy) goes straight through: the timer never queues work for
 * itself, and nothing is delayed twice.
 */
public final class WakeupDelay {
    private static volatile WakeupDelay active;
    private static final ThreadLocal<Boolean> HANDING_OFF = new ThreadLocal<>();

    private final long delayMs;
    private final ScheduledExecutorService timer;

    WakeupDelay(long delayMs) {
        this.delayMs = delayMs;
        this.timer = delayMs <= 0 ? null : Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, WakeupDelayAgent.NAME);
            t.setDaemon(true);
            return t;
        });
    }

    long delayMs() {
        return delayMs;
    }

    /** Make {@link #submit} delay by {@code delayMs} (0: pass straight through). */
    static synchronized void install(long delayMs) {
        WakeupDelay previous = active;
        active = new WakeupDelay(delayMs);
        if (previous != null) {
            previous.stop();
        }
    }

    /** Back to pass-through (tests). */
    static synchronized void uninstall() {
        WakeupDelay previous = active;
        active = null;
        if (previous != null) {
            previous.stop();
        }
    }

    /** What the rewritten call site in wakeUp calls instead of {@code executor.submit(task)}. */
    public static Future<?> submit(ExecutorService executor, Runnable task) {
        WakeupDelay d = active;
        return d == null ? executor.submit(task) : d.handOff(executor, task);
    }

    /**
     * Submit {@code task} to {@code executor} after the delay, from the timer thread; returns at once.
     * The returned future is the timer's, not the executor's (wakeUp discards it).
     */
    Future<?> handOff(ExecutorService executor, Runnable task) {
        if (timer == null || HANDING_OFF.get() != null) {
            return executor.submit(task);
        }
        try {
            return timer.schedule(() -> handOffNow(executor, task), delayMs, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) {
            return executor.submit(task); // timer stopped: never drop a wakeup, hand it off undelayed
        }
    }

    private static void handOffNow(ExecutorService executor, Runnable task) {
        HANDING_OFF.set(Boolean.TRUE);
        try {
            executor.submit(task);
        } catch (RuntimeException e) {
            // Where upstream's submit would have thrown to the waking thread (executor saturated or shut
            // down): the request is then lost in both cases and its client times out. Log, keep the timer.
            AgentLog.once(WakeupDelayAgent.NAME, "handoff-failed", "a delayed wakeup could not be handed to the "
                + "broker's executor (" + e + "); that request's client will time out");
        } finally {
            HANDING_OFF.remove();
        }
    }

    private void stop() {
        if (timer != null) {
            timer.shutdown(); // already scheduled hand-offs still run
        }
    }
}
