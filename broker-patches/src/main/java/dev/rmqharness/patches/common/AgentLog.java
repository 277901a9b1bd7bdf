package dev.rmqharness.patches.common;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** One-line messages on the broker's stderr (its .out file), each distinct key logged once. */
public final class AgentLog {
    private static final Set<String> ONCE = ConcurrentHashMap.newKeySet();

    private AgentLog() {
    }

    public static void info(String agent, String message) {
        System.err.println("[" + agent + "] " + message);
    }

    public static void once(String agent, String key, String message) {
        if (ONCE.add(agent + "/" + key)) {
            info(agent, message);
        }
    }
}
