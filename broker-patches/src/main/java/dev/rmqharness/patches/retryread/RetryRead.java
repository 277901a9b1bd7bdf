package dev.rmqharness.patches.retryread;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Reflect;
import dev.rmqharness.patches.common.RetryBacklog;
import dev.rmqharness.patches.common.RetryTopics;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.matcher.ElementMatchers;

/** What the advice calls: which retry topic a pop reads. */
public final class RetryRead {
    private RetryRead() {
    }

    /** Why the agent cannot patch this class version, or null when it can. */
    static String incompatibility(TypeDescription type) {
        boolean hook = !type.getDeclaredMethods()
            .filter(ElementMatchers.<MethodDescription>named(RetryReadAgent.METHOD)
                .and(ElementMatchers.takesArguments(RetryReadAgent.ARITY))
                .and(ElementMatchers.takesArgument(0, String.class))
                .and(ElementMatchers.takesArgument(1, boolean.class))).isEmpty();
        if (!hook) {
            return "has no " + RetryReadAgent.METHOD + "(String, boolean, ...) of " + RetryReadAgent.ARITY + " arguments";
        }
        boolean controller = !type.getDeclaredFields().filter(ElementMatchers.named("brokerController")).isEmpty();
        return controller ? null : "has no brokerController field";
    }

    /**
     * The retry topic to read: {@code picked} (the coin's), unless the coin is in play, {@code picked} is
     * one of this request's two retry topics, it has no backlog and the other one has.
     */
    public static String choose(Object processor, String picked, Object requestHeader) {
        try {
            Object topic = Reflect.get(requestHeader, "getTopic");
            Object group = Reflect.get(requestHeader, "getConsumerGroup");
            if (!(topic instanceof String) || !(group instanceof String)) {
                return picked;
            }
            String other = RetryTopics.other(picked, (String) topic, (String) group);
            if (other == null) {
                return picked;
            }
            Object controller = RetryBacklog.controller(processor);
            if (!RetryBacklog.readsOneOfTwo(controller)
                || RetryBacklog.has(controller, (String) group, picked)
                || !RetryBacklog.has(controller, (String) group, other)) {
                return picked;
            }
            return other;
        } catch (ReflectiveOperationException | RuntimeException e) {
            AgentLog.once(RetryReadAgent.NAME, "failure", "failed (" + e + "); the coin's pick is read");
            return picked;
        }
    }
}
