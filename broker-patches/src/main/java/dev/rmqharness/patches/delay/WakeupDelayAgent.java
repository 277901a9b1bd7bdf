package dev.rmqharness.patches.delay;

import static net.bytebuddy.matcher.ElementMatchers.isDeclaredBy;
import static net.bytebuddy.matcher.ElementMatchers.isSubTypeOf;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.returns;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Agents;
import java.lang.instrument.Instrumentation;
import java.util.concurrent.ExecutorService;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.asm.MemberSubstitution;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.utility.JavaModule;

/**
 * A positive control, not a fix: makes every wakeup of a suspended pop long-poll request take effect
 * {@code delay_ms} later, so the harness can be shown a regression of known size. Agent arguments:
 * {@code delay_ms=N} (0 installs the same rewrite but passes straight through).
 *
 * <p>The seam. In 5.3.3 (and 5.4.0) every wakeup of a suspended request goes through
 * {@code PopLongPollingService.wakeUp(PopRequest, CommandCallback)}: the notify paths (new message,
 * retry, the lag calculator's forced notify) call it after taking the request out of the polling map,
 * and the service thread's expiry scan and shutdown drain reach it through {@code wakeUp(PopRequest)}.
 * That method claims the request ({@code request.complete()}, a compare-and-set: a request is completed
 * once), attaches the callback, checks the channel, then submits a task re-running the pop request to
 * the broker's pull executor and returns true. The agent delays only that last hand-off: the one
 * {@code ExecutorService.submit(Runnable)} call in the method is replaced by {@link WakeupDelay#submit},
 * which schedules the same submit on its own timer thread.
 *
 * <p>Why completion and return values stay right. The request is claimed exactly as upstream does, by
 * upstream's own code, at the original moment, before anything is deferred; the deferred part is a task
 * that upstream would have queued anyway and that runs once (one timer entry, one submit). wakeUp's
 * return value and the callers' reaction to it (PopMessageProcessor skipping the per-queue notify,
 * ConsumerLagCalculator leaving the lag to the callback) are unchanged, and so is what other agents
 * observing wakeUp (the probe) see. Nothing re-enters wakeUp, so no request can be woken twice; a
 * request is lost only where upstream's own submit would have thrown (executor saturated or shut down).
 */
public final class WakeupDelayAgent {
    static final String NAME = "pop-wakeup-delay";
    static final String TARGET = "org.apache.rocketmq.broker.longpolling.PopLongPollingService";
    private static volatile boolean rewriting;

    private WakeupDelayAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        long delayMs;
        try {
            delayMs = DelayOptions.parse(args);
        } catch (IllegalArgumentException e) {
            AgentLog.info(NAME, "not installed: " + e.getMessage() + "; the broker runs unpatched");
            return;
        }
        try {
            WakeupDelay.install(delayMs);
            Agents.builder(TARGET)
                .with(new Report(delayMs))
                .type(named(TARGET))
                .transform((builder, type, loader, module, domain) -> {
                    String missing = incompatibility(type);
                    if (missing != null) {
                        AgentLog.once(NAME, "incompatible", "not installed: " + TARGET + " " + missing
                            + "; the broker runs unpatched");
                        return builder;
                    }
                    rewriting = true;
                    return builder.visit(handOffRewrite());
                })
                .installOn(inst);
        } catch (RuntimeException | LinkageError e) {
            AgentLog.info(NAME, "not installed: " + e + "; the broker runs unpatched");
        }
    }

    /** Why the agent cannot patch this class version, or null when it can. */
    static String incompatibility(TypeDescription type) {
        boolean wake = !type.getDeclaredMethods().filter(wakeMethod()).isEmpty();
        return wake ? null : "has no boolean wakeUp(PopRequest, CommandCallback)";
    }

    private static net.bytebuddy.matcher.ElementMatcher.Junction<MethodDescription> wakeMethod() {
        return named("wakeUp").<MethodDescription>and(takesArguments(2)).and(returns(boolean.class));
    }

    /**
     * In wakeUp(PopRequest, CommandCallback), {@code executor.submit(runnable)} becomes
     * {@code WakeupDelay.submit(executor, runnable)}. Fails the transformation (the class then loads
     * untouched) when the method contains no such call.
     */
    static AsmVisitorWrapper handOffRewrite() {
        try {
            return MemberSubstitution.relaxed()
                .failIfNoMatch(true)
                .method(named("submit").<MethodDescription>and(takesArguments(Runnable.class))
                    .and(isDeclaredBy(isSubTypeOf(ExecutorService.class))))
                .replaceWith(WakeupDelay.class.getMethod("submit", ExecutorService.class, Runnable.class))
                .on(wakeMethod());
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException(e);
        }
    }

    static String describe(long delayMs) {
        if (delayMs == 0) {
            return "wakeUp's hand-off to the pull executor rewritten but passed straight through (delay_ms=0: "
                + "no delay, a control for the agent itself)";
        }
        return "every wakeup of a suspended pop request (message, retry, lag callback, expiry) reaches the pull "
            + "executor " + delayMs + " ms late (delay_ms=" + delayMs + "), handed off by a timer thread; "
            + "the waking thread is not blocked. A positive control, not a fix";
    }

    /** Reports the outcome once the class has really been rewritten (or the rewrite failed). */
    private static final class Report extends AgentBuilder.Listener.Adapter {
        private final long delayMs;

        Report(long delayMs) {
            this.delayMs = delayMs;
        }

        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            if (rewriting && TARGET.equals(type.getName())) {
                AgentLog.once(NAME, "installed", "installed on " + TARGET + ": " + describe(delayMs));
            }
        }

        @Override
        public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded,
                            Throwable error) {
            if (TARGET.equals(typeName)) {
                AgentLog.once(NAME, "failed", "not installed: " + TARGET + " wakeUp could not be rewritten ("
                    + error + "); the broker runs unpatched");
            }
        }
    }
}
