package dev.rmqharness.patches.wakeup;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.Patch;
import java.lang.instrument.Instrumentation;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;

/**
 * The pop retry wakeup fix: when a retry message is dispatched, wake the long polls of the
 * (topic, group) it belongs to. Upstream 5.3.3 maps only V2 retry names back to the topic (and then
 * wakes every group of it); a V1 name wakes nobody, so the retry waits for the poll to expire.
 */
public final class RetryWakeupAgent {
    static final String NAME = "pop-retry-wakeup";
    static final String TARGET = "org.apache.rocketmq.broker.longpolling.PopLongPollingService";

    private RetryWakeupAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        Patch.install(inst, NAME, TARGET, RetryWakeup::incompatibility,
            "retry messages wake only their own (topic, group); V1 names resolved from polling registrations",
            Advice.to(NotifyRetryAdvice.class).on(named("notifyMessageArrivingWithRetryTopic").and(takesArguments(7))));
    }

    /** Inlined into PopLongPollingService.notifyMessageArrivingWithRetryTopic(String,int,long,Long,long,byte[],Map). */
    public static final class NotifyRetryAdvice {
        private NotifyRetryAdvice() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static boolean enter(@Advice.This Object service,
                                    @Advice.Argument(0) String topic,
                                    @Advice.Argument(1) int queueId,
                                    @Advice.Argument(3) Long tagsCode,
                                    @Advice.Argument(4) long msgStoreTime,
                                    @Advice.Argument(5) byte[] filterBitMap,
                                    @Advice.Argument(6) java.util.Map<String, String> properties) {
            // true = handled here, skip the original body
            return RetryWakeup.handle(service, topic, queueId, tagsCode, msgStoreTime, filterBitMap, properties);
        }
    }

    static boolean declares(TypeDescription type, String field) {
        return !type.getDeclaredFields().filter(named(field)).isEmpty();
    }
}
