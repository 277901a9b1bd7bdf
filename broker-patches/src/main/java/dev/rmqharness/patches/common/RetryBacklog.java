package dev.rmqharness.patches.common;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Whether a pop retry topic holds messages a group has not consumed, read from the broker's own
 * structures (topic config, consume queue max offset, committed consumer offset) by reflection, as the
 * agents are built without the broker on their classpath.
 *
 * <p>The committed offset of a pop group lags behind what is popped and in flight, so "has a backlog"
 * may be true for messages already handed out: callers treat it as "may have something", which is the
 * safe side for both of them (the fix then behaves as upstream does; the probe's count is an upper bound).
 */
public final class RetryBacklog {
    private static final Map<String, Method> METHODS = new ConcurrentHashMap<>();
    private static volatile Field controllerField;

    private RetryBacklog() {
    }

    /** The BrokerController of a PopMessageProcessor (its private {@code brokerController} field). */
    public static Object controller(Object processor) throws ReflectiveOperationException {
        Field f = controllerField;
        if (f == null || !f.getDeclaringClass().isInstance(processor)) {
            f = Reflect.field(processor.getClass(), "brokerController");
            controllerField = f;
        }
        return f.get(processor);
    }

    /**
     * Whether the broker reads either the V1 or the V2 retry topic on each pop, by a coin
     * ({@code enableRetryTopicV2} and {@code retrieveMessageFromPopRetryTopicV1} both true).
     */
    public static boolean readsOneOfTwo(Object controller) throws ReflectiveOperationException {
        Object config = call(controller, "getBrokerConfig");
        return Boolean.TRUE.equals(call(config, "isEnableRetryTopicV2"))
            && Boolean.TRUE.equals(call(config, "isRetrieveMessageFromPopRetryTopicV1"));
    }

    /** Whether {@code retryTopic} exists and one of its queues has messages past {@code group}'s offset. */
    public static boolean has(Object controller, String group, String retryTopic) throws ReflectiveOperationException {
        Object topicConfig = call(call(controller, "getTopicConfigManager"), "selectTopicConfig", retryTopic);
        if (topicConfig == null) {
            return false;
        }
        int queues = (Integer) call(topicConfig, "getReadQueueNums");
        Object store = call(controller, "getMessageStore");
        Object offsets = call(controller, "getConsumerOffsetManager");
        for (int q = 0; q < queues; q++) {
            long max = (Long) call(store, "getMaxOffsetInQueue", retryTopic, q);
            long done = (Long) call(offsets, "queryOffset", group, retryTopic, q);
            if (done < 0) {
                done = (Long) call(store, "getMinOffsetInQueue", retryTopic, q);
            }
            if (max > done) {
                return true;
            }
        }
        return false;
    }

    private static Object call(Object target, String name, Object... args) throws ReflectiveOperationException {
        Class<?>[] types = new Class<?>[args.length];
        StringBuilder key = new StringBuilder(target.getClass().getName()).append('#').append(name);
        for (int i = 0; i < args.length; i++) {
            types[i] = args[i] instanceof Integer ? int.class : args[i].getClass();
            key.append(',').append(types[i].getName());
        }
        Method m = METHODS.get(key.toString());
        if (m == null) {
            m = target.getClass().getMethod(name, types);
            METHODS.put(key.toString(), m);
        }
        return m.invoke(target, args);
    }
}
