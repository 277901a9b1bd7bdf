package dev.rmqharness.patches.retryread;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import net.bytebuddy.description.type.TypeDescription;
import org.junit.jupiter.api.Test;

/**
 * Which retry topic a pop reads, on stand-ins shaped like the 5.3.3 / 5.4.0 broker classes the agent
 * reads by reflection (the logic only; the agent on a real broker is tested by the harness's runs).
 */
public class RetryReadTest {
    public static final String V1 = "%RETRY%G_T";
    public static final String V2 = "%RETRY%G+T";

    /** A broker where {@code topic} holds {@code stored} messages, {@code consumed} of them committed by G. */
    public static Controller controller(String topic, long stored, long consumed) {
        return new Controller().with(topic, stored, consumed);
    }

    public static final class Config {
        public boolean v2 = true;
        public boolean retrieveV1 = true;

        public boolean isEnableRetryTopicV2() {
            return v2;
        }

        public boolean isRetrieveMessageFromPopRetryTopicV1() {
            return retrieveV1;
        }
    }

    public static final class TopicConfig {
        public int getReadQueueNums() {
            return 1;
        }
    }

    public static final class Topics {
        public final Map<String, TopicConfig> topics = new HashMap<>();

        public TopicConfig selectTopicConfig(String topic) {
            return topics.get(topic);
        }
    }

    public static final class Store {
        public final Map<String, Long> max = new HashMap<>();

        public long getMaxOffsetInQueue(String topic, int queueId) {
            return max.getOrDefault(topic, 0L);
        }

        public long getMinOffsetInQueue(String topic, int queueId) {
            return 0L;
        }
    }

    public static final class Offsets {
        public final Map<String, Long> committed = new HashMap<>();

        public long queryOffset(String group, String topic, int queueId) {
            return committed.getOrDefault(group + "@" + topic, -1L);
        }
    }

    public static final class Controller {
        public final Config config = new Config();
        public final Topics topics = new Topics();
        public final Store store = new Store();
        public final Offsets offsets = new Offsets();

        public Config getBrokerConfig() {
            return config;
        }

        public Topics getTopicConfigManager() {
            return topics;
        }

        public Store getMessageStore() {
            return store;
        }

        public Offsets getConsumerOffsetManager() {
            return offsets;
        }

        /** {@code topic} exists with {@code stored} messages, {@code consumed} of them committed by G. */
        Controller with(String topic, long stored, long consumed) {
            topics.topics.put(topic, new TopicConfig());
            store.max.put(topic, stored);
            offsets.committed.put("G@" + topic, consumed);
            return this;
        }
    }

    @SuppressWarnings("unused")
    static final class ShapedLikePopMessageProcessor {
        private final Controller brokerController;

        ShapedLikePopMessageProcessor(Controller c) {
            this.brokerController = c;
        }

        private Object popMsgFromTopic(String topic, boolean isRetry, Object getMessageResult, Object header,
                                       int queueId, Object channel, long popTime, Object filter,
                                       StringBuilder startOffsetInfo, StringBuilder msgOffsetInfo,
                                       StringBuilder orderCountInfo, int randomQ, Object future) {
            return null;
        }
    }

    public static final class Header {
        public String getTopic() {
            return "T";
        }

        public String getConsumerGroup() {
            return "G";
        }
    }

    static String choose(Controller c, String picked) {
        return RetryRead.choose(new ShapedLikePopMessageProcessor(c), picked, new Header());
    }

    @Test
    void theCoinsEmptyV1PickReadsTheV2TopicThatHasTheRetries() {
        Controller c = new Controller().with(V2, 5, 3);
        assertEquals(V2, choose(c, V1)); // V1 was never created: the usual case with V2 on from the start
        c.with(V1, 4, 4);
        assertEquals(V2, choose(c, V1)); // V1 exists but is consumed
    }

    @Test
    void andTheOtherWayRoundForRetriesLeftInV1() {
        assertEquals(V1, choose(new Controller().with(V1, 2, 0).with(V2, 1, 1), V2));
    }

    @Test
    void theCoinStillDecidesWhenBothOrNeitherHoldMessages() {
        Controller both = new Controller().with(V1, 2, 1).with(V2, 7, 6);
        assertEquals(V1, choose(both, V1));
        assertEquals(V2, choose(both, V2));
        Controller neither = new Controller().with(V2, 3, 3);
        assertEquals(V1, choose(neither, V1));
    }

    @Test
    void aGroupThatNeverCommittedCountsFromTheQueuesStart() {
        Controller c = new Controller().with(V2, 2, 0);
        c.offsets.committed.remove("G@" + V2); // queryOffset answers -1
        assertEquals(V2, choose(c, V1));
    }

    @Test
    void withoutTheCoinNothingChanges() {
        Controller v1Only = new Controller().with(V2, 5, 0);
        v1Only.config.retrieveV1 = false;
        assertEquals(V1, choose(v1Only, V1));
        Controller v2Off = new Controller().with(V2, 5, 0);
        v2Off.config.v2 = false;
        assertEquals(V1, choose(v2Off, V1));
    }

    @Test
    void topicsOfOtherGroupsAndBrokenShapesAreLeftAlone() {
        Controller c = new Controller().with(V2, 5, 0);
        assertEquals("%RETRY%H_T", choose(c, "%RETRY%H_T"));
        assertEquals("T", choose(c, "T"));
        assertEquals(V1, RetryRead.choose(new Object(), V1, new Header())); // no brokerController: unpatched
    }

    @Test
    void installsOnlyOnTheKnownShape() {
        assertNull(RetryRead.incompatibility(TypeDescription.ForLoadedType.of(ShapedLikePopMessageProcessor.class)));
        assertTrue(RetryRead.incompatibility(TypeDescription.ForLoadedType.of(Header.class))
            .contains("popMsgFromTopic"));
    }
}
