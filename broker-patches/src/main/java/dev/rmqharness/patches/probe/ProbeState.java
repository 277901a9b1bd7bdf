package dev.rmqharness.patches.probe;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Reflect;
import dev.rmqharness.patches.common.RetryBacklog;
import dev.rmqharness.patches.common.RetryTopics;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;

/** What the probe has seen, keyed by the pop request's command object (weakly: no leak). */
public final class ProbeState {
    static final Counters WAKEUPS = new Counters("rmq_probe_pop_wakeups_total",
        "Suspended pop requests woken, by cause (retry_owner, retry_other, message, lag_callback, timeout, other).",
        "topic", "group", "cause");
    static final Counters EMPTY_WAKEUPS = new Counters("rmq_probe_pop_empty_wakeups_total",
        "Woken pop requests that found nothing and were suspended again, by the cause of the wakeup.",
        "topic", "group", "cause");
    static final Counters SUSPENDS = new Counters("rmq_probe_pop_suspends_total",
        "Pop requests suspended in a long poll (new or re-suspended).", "topic", "group");

    static final Counters RETRY_READS = new Counters("rmq_probe_pop_retry_reads_total",
        "Pop requests' reads of one of their group's retry topics, by which (v1, v2).", "topic", "group", "read");
    static final Counters SUSPENDS_UNREAD = new Counters("rmq_probe_pop_suspends_unread_retry_total",
        "Pop requests suspended after reading one retry topic while the other held messages for the group: "
            + "no notification is coming for those, so the request waits for its poll to expire.",
        "topic", "group", "read");

    /** The retry read of the pop request running on this thread: {processor, topic, group, read}. */
    private static final ThreadLocal<Object[]> LAST_READ = new ThreadLocal<>();
    private static final Map<Object, String[]> POLLER = Collections.synchronizedMap(new WeakHashMap<>());
    private static final Map<Object, String> WOKEN_BY = Collections.synchronizedMap(new WeakHashMap<>());

    private ProbeState() {
    }

    public static void onPollingStart(Object command, Object header) {
        if (command == null || header == null) {
            return;
        }
        Object topic = Reflect.get(header, "getTopic");
        Object group = Reflect.get(header, "getConsumerGroup");
        POLLER.put(command, new String[] {String.valueOf(topic), String.valueOf(group)});
    }

    public static void onProcessStart() {
        LAST_READ.remove();
    }

    /** A pop request read {@code retryTopic} (the pop request's header names its topic and group). */
    public static void onRetryRead(Object processor, String retryTopic, Object header) {
        Object topic = Reflect.get(header, "getTopic");
        Object group = Reflect.get(header, "getConsumerGroup");
        if (!(topic instanceof String) || !(group instanceof String)) {
            return;
        }
        String read = RetryTopics.kindOf(retryTopic, (String) topic, (String) group);
        if (read == null) {
            return;
        }
        RETRY_READS.inc((String) topic, (String) group, read);
        SUSPENDS_UNREAD.touch((String) topic, (String) group, read);
        LAST_READ.set(new Object[] {processor, retryTopic, topic, group, read});
    }

    public static void onPollingResult(Object command, Object result) {
        Object[] read = LAST_READ.get();
        LAST_READ.remove();
        if (command == null || result == null || !"POLLING_SUC".equals(result.toString())) {
            return;
        }
        String[] tg = POLLER.get(command);
        if (tg == null) {
            return;
        }
        SUSPENDS.inc(tg[0], tg[1]);
        if (read != null && tg[0].equals(read[2]) && tg[1].equals(read[3]) && unreadHasMessages(read)) {
            SUSPENDS_UNREAD.inc(tg[0], tg[1], (String) read[4]);
        }
        String cause = WOKEN_BY.remove(command);
        if (cause != null) {
            EMPTY_WAKEUPS.inc(tg[0], tg[1], cause);
        }
    }

    public static void onWakeUp(Object popRequest, boolean woke) {
        if (!woke || popRequest == null) {
            return;
        }
        Object command = Reflect.get(popRequest, "getRemotingCommand");
        String[] tg = command == null ? null : POLLER.get(command);
        String topic = tg == null ? "unknown" : tg[0];
        String group = tg == null ? "unknown" : tg[1];
        String cause = cause(topic, group);
        WAKEUPS.inc(topic, group, cause);
        EMPTY_WAKEUPS.touch(topic, group, cause); // a 0 series: "none found nothing" is data too
        if (command != null) {
            WOKEN_BY.put(command, cause);
        }
    }

    static String cause(String topic, String group) {
        String[] ctx = WakeContext.current();
        if (ctx != null) {
            if (WakeContext.RETRY.equals(ctx[0])) {
                return RetryTopics.isRetry(ctx[1])
                    ? (RetryTopics.isOwner(ctx[1], topic, group) ? "retry_owner" : "retry_other")
                    : WakeContext.MESSAGE; // a plain topic passes through the retry-aware entry point too
            }
            return ctx[0];
        }
        return Thread.currentThread().getName().startsWith("PopLongPollingService") ? "timeout" : "other";
    }

    private static boolean unreadHasMessages(Object[] read) {
        String other = RetryTopics.other((String) read[1], (String) read[2], (String) read[3]);
        try {
            return other != null && RetryBacklog.has(RetryBacklog.controller(read[0]), (String) read[3], other);
        } catch (ReflectiveOperationException | RuntimeException e) {
            AgentLog.once(WakeupProbeAgent.NAME, "backlog", "cannot read retry backlogs (" + e + "); "
                + "rmq_probe_pop_suspends_unread_retry_total stays 0");
            return false;
        }
    }

    static String render() {
        return WAKEUPS.render() + EMPTY_WAKEUPS.render() + SUSPENDS.render() + RETRY_READS.render()
            + SUSPENDS_UNREAD.render();
    }
}
