package dev.rmqharness.patches.lockrecheck;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A stand-in shaped like the broker's PopConsumerLockService of 5.3.2-5.5.1 (the fields and the package-private
 * TimedLock the agent reaches by reflection, and the broker's own removeTimeout, check then remove), with a way to
 * hold one getLockTime call after it read the time: the moment upstream's report (#10750) describes.
 */
public class PopConsumerLockService {
    static volatile CountDownLatch paused;
    static volatile CountDownLatch resume;

    private final long timeout;
    private final ConcurrentMap<String, TimedLock> lockTable = new ConcurrentHashMap<>();

    public PopConsumerLockService(long timeout) {
        this.timeout = timeout;
    }

    /** The next getLockTime call, after it read the time, waits until {@link #release()}. */
    static void pauseNextLockTimeRead() {
        paused = new CountDownLatch(1);
        resume = new CountDownLatch(1);
    }

    static void release() {
        resume.countDown();
    }

    public boolean tryLock(String key) {
        return lockTable.computeIfAbsent(key, s -> new TimedLock()).tryLock();
    }

    public void unlock(String key) {
        TimedLock lock = lockTable.get(key);
        if (lock != null) {
            lock.unlock();
        }
    }

    public void removeTimeout() {
        Iterator<Map.Entry<String, TimedLock>> iterator = lockTable.entrySet().iterator();
        while (iterator.hasNext()) {
            Map.Entry<String, TimedLock> entry = iterator.next();
            if (System.currentTimeMillis() - entry.getValue().getLockTime() > timeout) {
                iterator.remove();
            }
        }
    }

    void putStale(String key) {
        TimedLock lock = new TimedLock();
        lock.lockTime = System.currentTimeMillis() - 10 * timeout;
        lockTable.put(key, lock);
    }

    static class TimedLock {
        private volatile long lockTime;
        private final AtomicBoolean lock;

        TimedLock() {
            this.lockTime = System.currentTimeMillis();
            this.lock = new AtomicBoolean(false);
        }

        public boolean tryLock() {
            if (lock.compareAndSet(false, true)) {
                this.lockTime = System.currentTimeMillis();
                return true;
            }
            return false;
        }

        public void unlock() {
            lock.set(false);
        }

        public long getLockTime() {
            long read = lockTime;
            CountDownLatch p = paused;
            if (p != null && p.getCount() > 0) {
                paused = null;
                p.countDown();
                try {
                    resume.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return read;
        }
    }
}
