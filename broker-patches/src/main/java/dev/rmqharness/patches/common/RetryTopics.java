package dev.rmqharness.patches.common;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Which (topic, consumer group) a pop retry topic belongs to.
 *
 * <p>V2 names ({@code %RETRY%group+topic}) parse exactly: topic names cannot contain '+'. V1 names
 * ({@code %RETRY%group_topic}) do not: "_" may sit inside both the group and the topic, so
 * ({@code Order_Topic}, {@code G}) and ({@code Topic}, {@code G_Order}) share a name. A V1 name is
 * therefore resolved against the (topic, group) pairs that are polling right now, and every pair that
 * builds the same name is a candidate.
 */
public final class RetryTopics {
    public static final String PREFIX = "%RETRY%";
    private static final char V2_SEPARATOR = '+';
    private static final char V1_SEPARATOR = '_';

    private RetryTopics() {
    }

    /** A topic and the consumer group polling it. */
    public static final class Target {
        public final String topic;
        public final String group;

        public Target(String topic, String group) {
            this.topic = topic;
            this.group = group;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Target)) {
                return false;
            }
            Target t = (Target) o;
            return topic.equals(t.topic) && group.equals(t.group);
        }

        @Override
        public int hashCode() {
            return Objects.hash(topic, group);
        }

        @Override
        public String toString() {
            return topic + "/" + group;
        }
    }

    public static boolean isRetry(String topic) {
        return topic != null && topic.startsWith(PREFIX) && topic.length() > PREFIX.length();
    }

    public static boolean isV2(String topic) {
        return isRetry(topic) && topic.indexOf(V2_SEPARATOR, PREFIX.length()) >= 0;
    }

    public static String v1Name(String topic, String group) {
        return PREFIX + group + V1_SEPARATOR + topic;
    }

    public static String v2Name(String topic, String group) {
        return PREFIX + group + V2_SEPARATOR + topic;
    }

    /** "v1" or "v2" when {@code retryTopic} is that retry topic of (topic, group); else null. */
    public static String kindOf(String retryTopic, String topic, String group) {
        if (v1Name(topic, group).equals(retryTopic)) {
            return "v1";
        }
        return v2Name(topic, group).equals(retryTopic) ? "v2" : null;
    }

    /** The other retry topic of (topic, group) when {@code retryTopic} is one of its two; else null. */
    public static String other(String retryTopic, String topic, String group) {
        String kind = kindOf(retryTopic, topic, group);
        if (kind == null) {
            return null;
        }
        return "v1".equals(kind) ? v2Name(topic, group) : v1Name(topic, group);
    }

    /**
     * The (topic, group) pairs a retry message of {@code retryTopic} is for.
     *
     * @param pollers topics with suspended pop requests, each mapped to the groups polling it
     * @return for a V2 name its one owner; for a V1 name every polling pair whose V1 name it is;
     *     empty for a name that is not a retry topic
     */
    public static List<Target> resolve(String retryTopic, Map<String, ? extends Collection<String>> pollers) {
        if (!isRetry(retryTopic)) {
            return Collections.emptyList();
        }
        String body = retryTopic.substring(PREFIX.length());
        int plus = body.lastIndexOf(V2_SEPARATOR);
        if (plus > 0 && plus < body.length() - 1) {
            return Collections.singletonList(new Target(body.substring(plus + 1), body.substring(0, plus)));
        }
        List<Target> out = new ArrayList<>(1);
        for (Map.Entry<String, ? extends Collection<String>> e : pollers.entrySet()) {
            String topic = e.getKey();
            if (topic == null || isRetry(topic) || body.length() <= topic.length() + 1) {
                continue;
            }
            if (!body.endsWith(topic) || body.charAt(body.length() - topic.length() - 1) != V1_SEPARATOR) {
                continue;
            }
            String group = body.substring(0, body.length() - topic.length() - 1);
            if (e.getValue() != null && e.getValue().contains(group)) {
                out.add(new Target(topic, group));
            }
        }
        return out;
    }

    /** Whether a retry message of {@code retryTopic} is meant for {@code group} polling {@code topic}. */
    public static boolean isOwner(String retryTopic, String topic, String group) {
        if (!isRetry(retryTopic) || topic == null || group == null) {
            return false;
        }
        return retryTopic.equals(v1Name(topic, group)) || retryTopic.equals(v2Name(topic, group));
    }
}
