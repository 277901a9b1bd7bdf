package dev.rmqharness.patches.lockrecheck;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import net.bytebuddy.description.type.TypeDescription;
import org.junit.jupiter.api.Test;

/**
 * The interleaving of apache/rocketmq#10750 on the stand-in: the cleanup has read a stale lock time; a pop takes the
 * lock; the cleanup removes the entry; another pop takes a new lock. The broker's own code gives two holders; with
 * LockRecheck's, the take waits for the cleanup's decision and there is one.
 */
public class LockRecheckTest {
    private static final String KEY = "G@T";

    /** The race with these tryLock and removeTimeout: whether a second pop, after the first, also holds the key. */
    private static boolean secondHolder(BiFunction<PopConsumerLockService, String, Boolean> tryLock,
                                        Consumer<PopConsumerLockService> removeTimeout) throws Exception {
        PopConsumerLockService service = new PopConsumerLockService(1_000);
        service.putStale(KEY);
        PopConsumerLockService.pauseNextLockTimeRead();
        CompletableFuture<Void> cleanup = CompletableFuture.runAsync(() -> removeTimeout.accept(service));
        assertTrue(PopConsumerLockService.paused == null || PopConsumerLockService.paused.await(5, TimeUnit.SECONDS));
        CompletableFuture<Boolean> first = CompletableFuture.supplyAsync(() -> tryLock.apply(service, KEY));
        try {
            first.get(300, TimeUnit.MILLISECONDS);  // the broker's: taken while the cleanup waits
        } catch (java.util.concurrent.TimeoutException waits) {
            // LockRecheck's: the take waits for the cleanup's decision on the key
        }
        PopConsumerLockService.release();
        cleanup.get(5, TimeUnit.SECONDS);
        assertTrue(first.get(5, TimeUnit.SECONDS), "the first pop takes the lock");
        return tryLock.apply(service, KEY);
    }

    @Test
    public void theBrokersOwnCodeGivesTheKeyASecondHolder() throws Exception {
        assertTrue(secondHolder(PopConsumerLockService::tryLock, PopConsumerLockService::removeTimeout));
    }

    @Test
    public void withTheRecheckTheKeyHasOneHolder() throws Exception {
        assertFalse(secondHolder(LockRecheck::tryLock, LockRecheck::removeTimeout));
    }

    @Test
    public void aStaleFreeLockIsStillRemovedAndAFreshOneKept() {
        PopConsumerLockService service = new PopConsumerLockService(1_000);
        service.putStale("old@T");
        assertTrue(LockRecheck.tryLock(service, "new@T"));
        assertTrue(LockRecheck.removeTimeout(service));
        assertTrue(LockRecheck.tryLock(service, "old@T"), "removed, so a new lock is made and taken");
        assertFalse(LockRecheck.tryLock(service, "new@T"), "kept, still held");
        service.unlock("new@T");
        assertTrue(LockRecheck.tryLock(service, "new@T"));
    }

    /** A class without the lock table: the broker's own methods run. */
    public static final class Elsewhere {
    }

    @Test
    public void withoutALockTableTheBrokersOwnRuns() {
        assertNull(LockRecheck.tryLock(new Elsewhere(), KEY));
        assertFalse(LockRecheck.removeTimeout(new Elsewhere()));
    }

    @Test
    public void installsOnlyOnTheShapeItExpects() {
        assertNull(LockRecheckAgent.incompatibility(TypeDescription.ForLoadedType.of(PopConsumerLockService.class)));
        assertNull(LockRecheckAgent.incompatibility(TypeDescription.ForLoadedType.of(PairOnly.class)));
        assertEquals("has no tryLock(String) or tryLock(String, String)",
            LockRecheckAgent.incompatibility(TypeDescription.ForLoadedType.of(Elsewhere.class)));
    }

    /** The shape up to 5.5.0: tryLock(group, topic) only. */
    public static final class PairOnly {
        private final long timeout = 1;
        private final java.util.concurrent.ConcurrentMap<String, Object> lockTable =
            new java.util.concurrent.ConcurrentHashMap<>();

        public boolean tryLock(String group, String topic) {
            return lockTable.isEmpty() && timeout > 0;
        }

        public void removeTimeout() {
        }
    }

    @Test
    public void aGroupAndTopicMakeTheBrokersKey() {
        assertEquals("G@T", LockRecheck.key("G", "T"));
    }
}
