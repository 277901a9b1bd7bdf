package dev.rmqharness.patches.delay;

/**
 * The agent's argument: {@code delay_ms=N}, a whole number of milliseconds from 0 to {@link #MAX_DELAY_MS}.
 *
 * <p>The bound keeps the control a pure latency shift. Expired polls are delayed too, so a delay near
 * the clients' deadline slack (the RPC request timeout added to the long-polling time: 3 s by default in
 * the RocketMQ clients) would turn late answers into deadline errors; and the broker's fast-failure
 * check drops tasks older than {@code waitTimeMillsInPullQueue} (5 s) from the pull queue, counting
 * from the wakeup.
 */
final class DelayOptions {
    static final String DELAY_MS = "delay_ms";
    static final long MAX_DELAY_MS = 2000;

    private DelayOptions() {
    }

    /** The delay in milliseconds; IllegalArgumentException naming the bad option otherwise. */
    static long parse(String args) {
        if (args == null || args.trim().isEmpty()) {
            throw new IllegalArgumentException("missing option " + DELAY_MS + " (e.g. " + DELAY_MS + "=50)");
        }
        Long delay = null;
        for (String raw : args.split(",")) {
            String part = raw.trim();
            int eq = part.indexOf('=');
            String key = eq < 0 ? part : part.substring(0, eq).trim();
            if (!DELAY_MS.equals(key)) {
                throw new IllegalArgumentException("unknown option '" + part + "' (expected " + DELAY_MS + "=N)");
            }
            if (delay != null) {
                throw new IllegalArgumentException("option " + DELAY_MS + " given twice in '" + args + "'");
            }
            String value = eq < 0 ? "" : part.substring(eq + 1).trim();
            long v;
            try {
                v = Long.parseLong(value);
            } catch (NumberFormatException e) {
                v = -1;
            }
            if (v < 0 || v > MAX_DELAY_MS || !value.matches("[0-9]+")) {
                throw new IllegalArgumentException("malformed option '" + part + "' (expected " + DELAY_MS
                    + "=N, N a whole number of milliseconds from 0 to " + MAX_DELAY_MS + ")");
            }
            delay = v;
        }
        return delay;
    }
}
