package dev.rmqharness.patches.probe;

/** Why the current thread is waking pop requests: set by the notify methods, read by wakeUp. */
public final class WakeContext {
    public static final String RETRY = "retry";
    public static final String MESSAGE = "message";
    public static final String CALLBACK = "lag_callback";
    private static final ThreadLocal<String[]> CURRENT = new ThreadLocal<>();

    private WakeContext() {
    }

    /** Enter a context {kind, retry topic}; returns the previous one for {@link #restore}. */
    public static String[] enter(String kind, String retryTopic) {
        String[] previous = CURRENT.get();
        CURRENT.set(new String[] {kind, retryTopic});
        return previous;
    }

    /** Enter only when no outer context is set (a retry notification calls the plain notify inside). */
    public static String[] enterIfNone(String kind) {
        String[] previous = CURRENT.get();
        if (previous == null) {
            CURRENT.set(new String[] {kind, null});
        }
        return previous;
    }

    public static void restore(String[] previous) {
        if (previous == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(previous);
        }
    }

    public static String[] current() {
        return CURRENT.get();
    }
}
