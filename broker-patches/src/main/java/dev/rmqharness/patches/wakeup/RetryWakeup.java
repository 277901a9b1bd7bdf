package dev.rmqharness.patches.wakeup;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Reflect;
import dev.rmqharness.patches.common.RetryTopics;
import dev.rmqharness.patches.common.RetryTopics.Target;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.matcher.ElementMatchers;

/** What the advice calls: resolve the retry topic's owners and notify exactly their polls. */
public final class RetryWakeup {
    private static volatile Field topicCidMap;
    private static volatile Method notifyOne;

    private RetryWakeup() {
    }

    /** Why the agent cannot patch this class version, or null when it can. */
    static String incompatibility(TypeDescription type) {
        if (!RetryWakeupAgent.declares(type, "topicCidMap")) {
            return "has no topicCidMap field";
        }
        boolean hook = !type.getDeclaredMethods()
            .filter(ElementMatchers.<MethodDescription>named("notifyMessageArrivingWithRetryTopic")
                .and(ElementMatchers.takesArguments(7))).isEmpty();
        if (!hook) {
            return "has no notifyMessageArrivingWithRetryTopic(String,int,long,Long,long,byte[],Map)";
        }
        boolean notify = !type.getDeclaredMethods()
            .filter(ElementMatchers.<MethodDescription>named("notifyMessageArriving")
                .and(ElementMatchers.takesArguments(8))
                .and(ElementMatchers.takesArgument(2, String.class))).isEmpty();
        return notify ? null : "has no notifyMessageArriving(String,int,String,boolean,Long,long,byte[],Map)";
    }

    /** Returns true when the retry message was handled (the original method body is then skipped). */
    public static boolean handle(Object service, String topic, int queueId, Long tagsCode, long msgStoreTime,
                                 byte[] filterBitMap, Map<String, String> properties) {
        if (!RetryTopics.isRetry(topic)) {
            return false; // every other topic takes the upstream path untouched
        }
        try {
            bind(service.getClass());
            List<Target> targets = RetryTopics.resolve(topic, Reflect.pollers(topicCidMap.get(service)));
            for (Target t : targets) {
                // Pop requests that do not pin a queue (all gRPC pops) wait under queue id -1. force: the
                // request's tag filter was written for the original topic, not for the retry copy.
                notifyOne.invoke(service, t.topic, -1, t.group, true, tagsCode, msgStoreTime, filterBitMap,
                    properties);
                if (queueId >= 0) {
                    notifyOne.invoke(service, t.topic, queueId, t.group, true, tagsCode, msgStoreTime,
                        filterBitMap, properties);
                }
            }
            return true;
        } catch (ReflectiveOperationException | RuntimeException e) {
            AgentLog.once(RetryWakeupAgent.NAME, "failure", "failed (" + e + "); falling back to the broker's own code");
            return false;
        }
    }

    private static void bind(Class<?> type) throws ReflectiveOperationException {
        if (notifyOne == null) {
            topicCidMap = Reflect.field(type, "topicCidMap");
            notifyOne = Reflect.method(type, "notifyMessageArriving", String.class, int.class, String.class,
                boolean.class, Long.class, long.class, byte[].class, Map.class);
        }
    }
}
