package dev.rmqharness.patches.probe;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** A labelled counter family rendered in the Prometheus text exposition format. */
final class Counters {
    private final String name;
    private final String help;
    private final String[] labels;
    private final Map<String, LongAdder> values = new ConcurrentHashMap<>();

    Counters(String name, String help, String... labels) {
        this.name = name;
        this.help = help;
        this.labels = labels;
    }

    void inc(String... labelValues) {
        values.computeIfAbsent(key(labelValues), k -> new LongAdder()).increment();
    }

    /** Create the series at 0 if it does not exist yet. */
    void touch(String... labelValues) {
        values.computeIfAbsent(key(labelValues), k -> new LongAdder());
    }

    private String key(String... labelValues) {
        StringBuilder key = new StringBuilder();
        for (int i = 0; i < labels.length; i++) {
            if (i > 0) {
                key.append(',');
            }
            key.append(labels[i]).append("=\"").append(escape(i < labelValues.length ? labelValues[i] : ""))
                .append('"');
        }
        return key.toString();
    }

    long get(String... labelValues) {
        LongAdder v = values.get(key(labelValues));
        return v == null ? 0 : v.sum();
    }

    String render() {
        StringBuilder out = new StringBuilder();
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(" counter\n");
        for (Map.Entry<String, LongAdder> e : new TreeMap<>(values).entrySet()) {
            out.append(name).append('{').append(e.getKey()).append("} ").append(e.getValue().sum()).append('\n');
        }
        return out.toString();
    }

    static String escape(String v) {
        return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }
}
