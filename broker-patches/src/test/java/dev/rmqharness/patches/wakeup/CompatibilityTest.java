package dev.rmqharness.patches.wakeup;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import net.bytebuddy.description.type.TypeDescription;
import org.junit.jupiter.api.Test;

/** The agent patches only a PopLongPollingService shaped like 5.3.3's and stays out of the way otherwise. */
class CompatibilityTest {
    @SuppressWarnings("unused")
    static class ShapedLike533 {
        private final Map<String, Map<String, Byte>> topicCidMap = null;

        public void notifyMessageArrivingWithRetryTopic(String topic, int queueId, long offset, Long tagsCode,
                                                        long msgStoreTime, byte[] filterBitMap,
                                                        Map<String, String> properties) {
        }

        public boolean notifyMessageArriving(String topic, int queueId, String cid, boolean force, Long tagsCode,
                                             long msgStoreTime, byte[] filterBitMap, Map<String, String> properties) {
            return false;
        }
    }

    @SuppressWarnings("unused")
    static class WithoutRegistry {
        public void notifyMessageArrivingWithRetryTopic(String topic, int queueId, long offset, Long tagsCode,
                                                        long msgStoreTime, byte[] filterBitMap,
                                                        Map<String, String> properties) {
        }
    }

    @SuppressWarnings("unused")
    static class WithoutHook {
        private final Map<String, Map<String, Byte>> topicCidMap = null;
    }

    @Test
    void installsOnTheKnownShape() {
        assertNull(RetryWakeup.incompatibility(TypeDescription.ForLoadedType.of(ShapedLike533.class)));
    }

    @Test
    void namesWhatIsMissingOtherwise() {
        assertTrue(RetryWakeup.incompatibility(TypeDescription.ForLoadedType.of(WithoutRegistry.class))
            .contains("topicCidMap"));
        assertTrue(RetryWakeup.incompatibility(TypeDescription.ForLoadedType.of(WithoutHook.class))
            .contains("notifyMessageArrivingWithRetryTopic"));
    }

    @Test
    void otherTopicsAreLeftToTheBroker() {
        assertTrue(!RetryWakeup.handle(new Object(), "PlainTopic", 0, null, 0L, null, null));
    }
}
