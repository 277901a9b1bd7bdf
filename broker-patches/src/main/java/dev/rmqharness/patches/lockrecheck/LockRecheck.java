package dev.rmqharness.patches.lockrecheck;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Reflect;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.concurrent.ConcurrentMap;

/**
 * The lock table of a {@code PopConsumerLockService} (its {@code lockTable}: group@topic -> TimedLock, and its
 * {@code timeout} in ms), reached by reflection: TimedLock is a package-private class of the broker's.
 * Taking a lock happens inside the table's {@code compute} of its key and the cleanup's check-and-remove inside
 * {@code computeIfPresent}, so the two never interleave on one key: the cleanup reads the lock's time after any
 * take that came first, and a take that comes after finds the entry gone and makes the only new lock.
 */
public final class LockRecheck {
    private static volatile Access access;

    private LockRecheck() {
    }

    /** The lock table's key of a group and topic, as the broker makes it (PopAckConstants.SPLIT between). */
    public static String key(String group, String topic) {
        return group + "@" + topic;
    }

    /** The service's tryLock(key); null when the table cannot be reached (the broker's own then runs). */
    public static Boolean tryLock(Object service, String key) {
        Access a = access(service);
        if (a == null) {
            return null;
        }
        ConcurrentMap<String, Object> table = a.table(service);
        boolean[] taken = new boolean[1];
        table.compute(key, (k, lock) -> {
            Object held = lock != null ? lock : a.newLock();
            taken[0] = a.take(held);
            return held;
        });
        return taken[0];
    }

    /** The service's removeTimeout(): true when done here (the broker's own is skipped). */
    public static boolean removeTimeout(Object service) {
        Access a = access(service);
        if (a == null) {
            return false;
        }
        ConcurrentMap<String, Object> table = a.table(service);
        long timeout = a.timeout(service);
        for (String key : new ArrayList<>(table.keySet())) {
            table.computeIfPresent(key, (k, lock) ->
                System.currentTimeMillis() - a.lockTime(lock) > timeout ? null : lock);
        }
        return true;
    }

    static Access access(Object service) {
        Access a = access;
        if (a != null && a.service == service.getClass()) {
            return a;
        }
        try {
            a = new Access(service.getClass());
            access = a;
            return a;
        } catch (ReflectiveOperationException | RuntimeException e) {
            AgentLog.once(LockRecheckAgent.NAME, "unreachable", "cannot reach " + service.getClass().getName()
                + "'s lock table (" + e + "); the broker's own tryLock and removeTimeout run");
            return null;
        }
    }

    /** The reflective handles, made once per service class. */
    static final class Access {
        final Class<?> service;
        private final Field table;
        private final Field timeout;
        private final Constructor<?> make;
        private final Method take;
        private final Method lockTime;

        Access(Class<?> service) throws ReflectiveOperationException {
            this.service = service;
            this.table = Reflect.field(service, "lockTable");
            this.timeout = Reflect.field(service, "timeout");
            Class<?> lock = Class.forName(service.getName() + "$TimedLock", true, service.getClassLoader());
            this.make = lock.getDeclaredConstructor();
            this.make.setAccessible(true);
            this.take = lock.getDeclaredMethod("tryLock");
            this.take.setAccessible(true);
            this.lockTime = lock.getDeclaredMethod("getLockTime");
            this.lockTime.setAccessible(true);
        }

        @SuppressWarnings("unchecked")
        ConcurrentMap<String, Object> table(Object s) {
            try {
                return (ConcurrentMap<String, Object>) table.get(s);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        long timeout(Object s) {
            try {
                return timeout.getLong(s);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        Object newLock() {
            return call(() -> make.newInstance());
        }

        boolean take(Object lock) {
            return (Boolean) call(() -> take.invoke(lock));
        }

        long lockTime(Object lock) {
            return (Long) call(() -> lockTime.invoke(lock));
        }

        private interface Reflective {
            Object run() throws ReflectiveOperationException;
        }

        private static Object call(Reflective r) {
            try {
                return r.run();
            } catch (java.lang.reflect.InvocationTargetException e) {
                // What the broker's own method threw (a planted failure or delay's interrupt): as if called directly.
                Throwable cause = e.getCause();
                if (cause instanceof RuntimeException) {
                    throw (RuntimeException) cause;
                }
                if (cause instanceof Error) {
                    throw (Error) cause;
                }
                throw new IllegalStateException(cause);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
