package dev.rmqharness.patches.probe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rmqharness.patches.retryread.RetryReadTest;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ProbeTest {
    @Test
    void causeFollowsTheNotificationContext() {
        String[] outer = WakeContext.enter(WakeContext.RETRY, "%RETRY%G1+T");
        try {
            assertEquals("retry_owner", ProbeState.cause("T", "G1"));
            assertEquals("retry_other", ProbeState.cause("T", "G2"));
            String[] inner = WakeContext.enterIfNone(WakeContext.MESSAGE); // nested plain notify keeps "retry"
            assertEquals("retry_other", ProbeState.cause("T", "G2"));
            WakeContext.restore(inner);
        } finally {
            WakeContext.restore(outer);
        }
        assertNull(WakeContext.current());
        String[] prev = WakeContext.enterIfNone(WakeContext.CALLBACK);
        assertEquals("lag_callback", ProbeState.cause("T", "G1"));
        WakeContext.restore(prev);
        assertEquals("other", ProbeState.cause("T", "G1"));
    }

    @Test
    void countersRenderPrometheusText() {
        Counters c = new Counters("x_total", "help text", "topic", "group");
        c.inc("T", "G\"1");
        c.inc("T", "G\"1");
        String text = c.render();
        assertTrue(text.contains("# TYPE x_total counter\n"));
        assertTrue(text.contains("x_total{topic=\"T\",group=\"G\\\"1\"} 2\n"), text);
        assertEquals(2, c.get("T", "G\"1"));
    }

    @Test
    void agentArguments() {
        Map<String, String> o = WakeupProbeAgent.parse("port=20058, host=127.0.0.1");
        assertEquals("20058", o.get("port"));
        assertEquals("127.0.0.1", o.get("host"));
        assertTrue(WakeupProbeAgent.parse(null).isEmpty());
    }

    /** A processor shaped like PopMessageProcessor: the probe reads backlogs through its brokerController. */
    @SuppressWarnings("unused")
    static final class Processor {
        private final RetryReadTest.Controller brokerController;

        Processor(RetryReadTest.Controller c) {
            this.brokerController = c;
        }
    }

    @Test
    void aSuspendAfterReadingTheEmptyRetryTopicWhileTheOtherHoldsMessagesIsCounted() {
        RetryReadTest.Controller broker = RetryReadTest.controller(RetryReadTest.V2, 3, 1);
        Processor processor = new Processor(broker);
        RetryReadTest.Header header = new RetryReadTest.Header();
        long before = ProbeState.SUSPENDS_UNREAD.get("T", "G", "v1");
        long readsV2 = ProbeState.RETRY_READS.get("T", "G", "v2");
        for (String read : new String[] {RetryReadTest.V1, RetryReadTest.V2}) {
            Object command = new Object();
            ProbeState.onProcessStart();
            ProbeState.onPollingStart(command, header);
            ProbeState.onRetryRead(processor, read, header);
            ProbeState.onPollingResult(command, "POLLING_SUC");
        }
        assertEquals(before + 1, ProbeState.SUSPENDS_UNREAD.get("T", "G", "v1"));
        assertEquals(0, ProbeState.SUSPENDS_UNREAD.get("T", "G", "v2")); // V1 has nothing: nothing unread
        assertEquals(readsV2 + 1, ProbeState.RETRY_READS.get("T", "G", "v2"));
        // A request that found messages is not suspended: its read must not count for the next one.
        ProbeState.onRetryRead(processor, RetryReadTest.V1, header);
        Object next = new Object();
        ProbeState.onProcessStart();
        ProbeState.onPollingStart(next, header);
        ProbeState.onPollingResult(next, "POLLING_SUC");
        assertEquals(before + 1, ProbeState.SUSPENDS_UNREAD.get("T", "G", "v1"));
    }
}
