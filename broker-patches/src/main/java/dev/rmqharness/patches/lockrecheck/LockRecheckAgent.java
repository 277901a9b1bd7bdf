package dev.rmqharness.patches.lockrecheck;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Patch;
import java.lang.instrument.Instrumentation;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.description.type.TypeDescription;

/**
 * The idea of upstream's proposed fix for apache/rocketmq#10750 (PR #10751, open), applied to a released broker so a
 * run can show whether it removes the defect: the KV pop service's {@code PopConsumerLockService.removeTimeout()}
 * decides a lock is stale from a time it read earlier and then removes the entry, even when a pop took that lock in
 * between; a later pop makes a new lock, and two pops hold the same group and topic. Here taking a lock and the
 * cleanup's check-and-remove are each one step of the lock table ({@code compute} / {@code computeIfPresent} on the
 * key), so the cleanup decides on the time as it is when it removes. Our own code (LockRecheck), not the PR's.
 */
public final class LockRecheckAgent {
    static final String NAME = "pop-lock-recheck";
    static final String TARGET = "org.apache.rocketmq.broker.pop.PopConsumerLockService";

    private LockRecheckAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        // The class loads with the KV pop service (popConsumerKVServiceInit): say so before, or a broker without it
        // would show nothing from this agent.
        AgentLog.info(NAME, "waiting for " + TARGET + " (loaded with the KV pop service, popConsumerKVServiceInit)");
        // tryLock(group, topic) is the only one up to 5.5.0; 5.5.1 adds tryLock(key), which the other calls: both are
        // taken over (neither body runs, so nothing is taken twice).
        AsmVisitorWrapper advice = new AsmVisitorWrapper.Compound(
            Advice.to(TryLockAdvice.class).on(named("tryLock").and(takesArguments(1)).and(takesArgument(0, String.class))),
            Advice.to(TryLockPairAdvice.class).on(named("tryLock").and(takesArguments(2))
                .and(takesArgument(0, String.class)).and(takesArgument(1, String.class))),
            Advice.to(RemoveTimeoutAdvice.class).on(named("removeTimeout").and(takesArguments(0))));
        Patch.install(inst, NAME, TARGET, LockRecheckAgent::incompatibility,
            "tryLock(key) and removeTimeout() each one step of the lock table: a lock taken again is never removed",
            advice);
    }

    /** What the target lacks for the advice (null: it has the shape of 5.3.2 to 5.5.1). */
    static String incompatibility(TypeDescription type) {
        boolean tryLock = !type.getDeclaredMethods().filter(named("tryLock").and(takesArgument(0, String.class))
            .and(takesArguments(1).or(takesArguments(2).and(takesArgument(1, String.class))))).isEmpty();
        boolean remove = !type.getDeclaredMethods().filter(named("removeTimeout").and(takesArguments(0))).isEmpty();
        boolean fields = !type.getDeclaredFields().filter(named("lockTable")).isEmpty()
            && !type.getDeclaredFields().filter(named("timeout")).isEmpty();
        if (tryLock && remove && fields) {
            return null;
        }
        return "has no " + (!tryLock ? "tryLock(String) or tryLock(String, String)" : !remove ? "removeTimeout()"
            : "lockTable and timeout fields");
    }

    /** Inlined into tryLock(String key): the answer of LockRecheck.tryLock, or the broker's own when it has none. */
    public static final class TryLockAdvice {
        private TryLockAdvice() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static Boolean enter(@Advice.This Object service, @Advice.Argument(0) String key) {
            return LockRecheck.tryLock(service, key);
        }

        @Advice.OnMethodExit
        public static void exit(@Advice.Enter Boolean taken, @Advice.Return(readOnly = false) boolean result) {
            if (taken != null) {
                result = taken;
            }
        }
    }

    /** Inlined into tryLock(String group, String topic): the same, for the key the broker makes of the two. */
    public static final class TryLockPairAdvice {
        private TryLockPairAdvice() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static Boolean enter(@Advice.This Object service, @Advice.Argument(0) String group,
                                    @Advice.Argument(1) String topic) {
            return LockRecheck.tryLock(service, LockRecheck.key(group, topic));
        }

        @Advice.OnMethodExit
        public static void exit(@Advice.Enter Boolean taken, @Advice.Return(readOnly = false) boolean result) {
            if (taken != null) {
                result = taken;
            }
        }
    }

    /** Inlined into removeTimeout(): LockRecheck's cleanup instead of the broker's, unless it cannot reach the table. */
    public static final class RemoveTimeoutAdvice {
        private RemoveTimeoutAdvice() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static boolean enter(@Advice.This Object service) {
            return LockRecheck.removeTimeout(service);
        }
    }
}
