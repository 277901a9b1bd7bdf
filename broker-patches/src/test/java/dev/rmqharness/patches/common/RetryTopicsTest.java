package dev.rmqharness.patches.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rmqharness.patches.common.RetryTopics.Target;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RetryTopicsTest {
    private static Map<String, Collection<String>> pollers(String... topicGroup) {
        Map<String, Collection<String>> m = new HashMap<>();
        for (int i = 0; i < topicGroup.length; i += 2) {
            m.computeIfAbsent(topicGroup[i], k -> new HashSet<>()).add(topicGroup[i + 1]);
        }
        return m;
    }

    @Test
    void v1NameResolvesToThePollingPair() {
        List<Target> t = RetryTopics.resolve("%RETRY%PopBurstGroup_PopBurstTopic",
            pollers("PopBurstTopic", "PopBurstGroup", "PopBurstTopic", "OtherGroup", "Else", "PopBurstGroup"));
        assertEquals(Collections.singletonList(new Target("PopBurstTopic", "PopBurstGroup")), t);
    }

    @Test
    void v1CollisionWakesEveryCandidateNeverNone() {
        // (Order_Topic, MyConsumerGroup) and (Topic, MyConsumerGroup_Order) share one V1 name.
        List<Target> t = RetryTopics.resolve("%RETRY%MyConsumerGroup_Order_Topic",
            pollers("Order_Topic", "MyConsumerGroup", "Topic", "MyConsumerGroup_Order", "Topic", "MyConsumerGroup"));
        assertEquals(new HashSet<>(Arrays.asList(new Target("Order_Topic", "MyConsumerGroup"),
            new Target("Topic", "MyConsumerGroup_Order"))), new HashSet<>(t));
    }

    @Test
    void v1NameWithNobodyPollingResolvesToNothing() {
        assertTrue(RetryTopics.resolve("%RETRY%G_T", pollers("T", "H", "U", "G")).isEmpty());
    }

    @Test
    void v2NameParsesToItsOwnerOnly() {
        List<Target> t = RetryTopics.resolve("%RETRY%Group_A+Topic_X", pollers("Topic_X", "Group_B"));
        assertEquals(Collections.singletonList(new Target("Topic_X", "Group_A")), t);
    }

    @Test
    void unknownNamesAreNotRetryTopics() {
        assertTrue(RetryTopics.resolve("PopBurstTopic", pollers("PopBurstTopic", "G")).isEmpty());
        assertTrue(RetryTopics.resolve("%RETRY%", pollers("T", "G")).isEmpty());
        assertTrue(RetryTopics.resolve(null, pollers("T", "G")).isEmpty());
        assertTrue(RetryTopics.resolve("%DLQ%G", pollers("T", "G")).isEmpty());
        assertFalse(RetryTopics.isRetry("%DLQ%G"));
    }

    @Test
    void retryTopicsBeingPolledThemselvesAreNotCandidates() {
        assertTrue(RetryTopics.resolve("%RETRY%G_T", pollers("%RETRY%G_T", "G")).isEmpty());
    }

    @Test
    void ownership() {
        assertTrue(RetryTopics.isOwner("%RETRY%G_T", "T", "G"));
        assertTrue(RetryTopics.isOwner("%RETRY%G+T", "T", "G"));
        assertFalse(RetryTopics.isOwner("%RETRY%G+T", "T", "H"));
        assertTrue(RetryTopics.isV2("%RETRY%G+T"));
        assertFalse(RetryTopics.isV2("%RETRY%G_T"));
        assertEquals("%RETRY%G_T", RetryTopics.v1Name("T", "G"));
        assertEquals("%RETRY%G+T", RetryTopics.v2Name("T", "G"));
    }
}
