package dev.rmqharness.patches.fault;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The agent's argument: one or more plants separated by {@code ;}, each {@code key=value} pairs separated
 * by {@code ,}:
 * <pre>
 *   method=&lt;fully.qualified.Class&gt;#&lt;methodName&gt;   required; every overload of that name the class declares
 *   mode=throw|fail|false|delay|delay_after|return_null|return_empty   required
 *   delay_ms=D   mode=delay and delay_after only, and required there: each planted call sleeps D ms on entry (or
 *                before it returns) (1 to 600000)
 *   calls=N      how many calls fail (or are delayed) (default 1; 1 to 1000000)
 *   skip=M       the first M qualifying calls pass through untouched (default 0)
 *   after_ms=T   calls within T ms of the agent's install pass through and are not counted (default 0)
 *   thread=S     only calls on a thread whose name contains S qualify; others pass through and are not counted
 *                (default: every thread; 1 to 100 characters, no {@code , ; =})
 *   exception=X  mode=throw and mode=fail only: the planted exception is a new fully.qualified.X (loaded, at the
 *                moment of failure, by the planted method's class's loader) instead of RuntimeException; its
 *                constructor (String), or (int, String) with code
 *   code=C       with exception only: the int passed to X(int, String) (-2147483648 to 2147483647)
 *   arm_file=F   no call qualifies until the file F exists (looked for at most every 100 ms); after_ms then counts
 *                from when it was first seen instead of from install: the harness creates it when its load starts,
 *                so start-up and readiness traffic are not planted (a path without , ; =)
 * </pre>
 * e.g. {@code method=org.apache.rocketmq.broker.processor.PopReviveService#getBizMessage,mode=fail,calls=3,after_ms=5000}
 * or {@code method=org.apache.rocketmq.broker.pop.PopConsumerCache#cleanupRecords,mode=delay,delay_ms=3000,
 * thread=PopConsumerCache}. Keys are case-sensitive; a key given twice, an unknown key, a blank plant, a malformed
 * value, delay_ms without mode=delay or mode=delay without delay_ms, exception with mode=false or mode=delay, or code
 * without exception is an error.
 */
final class FaultOptions {
    static final int MAX_CALLS = 1_000_000;
    static final long MAX_SKIP = 1_000_000_000L;
    static final long MAX_AFTER_MS = 86_400_000L; // a day
    static final long MAX_DELAY_MS = 600_000L; // ten minutes
    static final int MAX_THREAD = 100;
    private static final String IDENT = "[A-Za-z_$][A-Za-z0-9_$]*";
    private static final Pattern CLASS_NAME = Pattern.compile(IDENT + "(\\." + IDENT + ")*");
    private static final Pattern METHOD_NAME = Pattern.compile(IDENT);
    private static final Pattern WHOLE = Pattern.compile("[0-9]+");
    private static final Pattern INT = Pattern.compile("-?[0-9]{1,10}");
    private static final String GRAMMAR = "method=<Class>#<method>,mode=throw|fail|false|delay|delay_after|"
        + "return_null|return_empty[,delay_ms=D]"
        + "[,calls=N][,skip=M][,after_ms=T][,thread=S][,exception=<Class>[,code=C]][,arm_file=F], plants separated "
        + "by ';'";

    private FaultOptions() {
    }

    /** How a planted method fails. */
    enum Mode {
        /** Throws RuntimeException (or exception=X) on entry; the body does not run. */
        THROW,
        /** The body runs; the CompletableFuture it returns is replaced by one completed exceptionally (RuntimeException
         * or exception=X). */
        FAIL,
        /** The body does not run; the method returns false (boolean methods only). */
        FALSE,
        /** The body runs after a sleep of delay_ms on entry (any return type). */
        DELAY,
        /** The body runs, then a sleep of delay_ms before the call returns (any return type). */
        DELAY_AFTER,
        /** The body runs; it returns null instead (reference return types). */
        RETURN_NULL,
        /** The body runs; it returns an empty list, set, map or string instead (those return types). */
        RETURN_EMPTY;

        String word() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** One plant as given: where, how, how often. */
    static final class Spec {
        final String className;
        final String methodName;
        final Mode mode;
        final int calls;
        final long skip;
        final long afterMs;
        /** The sleep of mode=delay, ms; 0 for the other modes. */
        final long delayMs;
        /** The part of a thread's name a qualifying call's thread has; null: every thread. */
        final String thread;
        /** The planted exception's class name (throw, fail); null: RuntimeException. */
        final String exception;
        /** The int its (int, String) constructor gets; null: its (String) constructor. */
        final Integer code;
        /** The file whose existence arms the plant; null: armed at install. */
        final String armFile;

        Spec(String className, String methodName, Mode mode, int calls, long skip, long afterMs) {
            this(className, methodName, mode, calls, skip, afterMs, 0, null);
        }

        Spec(String className, String methodName, Mode mode, int calls, long skip, long afterMs, long delayMs,
             String thread) {
            this(className, methodName, mode, calls, skip, afterMs, delayMs, thread, null, null);
        }

        Spec(String className, String methodName, Mode mode, int calls, long skip, long afterMs, long delayMs,
             String thread, String exception, Integer code) {
            this(className, methodName, mode, calls, skip, afterMs, delayMs, thread, exception, code, null);
        }

        Spec(String className, String methodName, Mode mode, int calls, long skip, long afterMs, long delayMs,
             String thread, String exception, Integer code, String armFile) {
            this.className = className;
            this.methodName = methodName;
            this.mode = mode;
            this.calls = calls;
            this.skip = skip;
            this.afterMs = afterMs;
            this.delayMs = delayMs;
            this.thread = thread;
            this.exception = exception;
            this.code = code;
            this.armFile = armFile;
        }

        /** Whether a call on the thread named {@code threadName} qualifies (the thread filter, if any). */
        boolean onThread(String threadName) {
            return thread == null || (threadName != null && threadName.contains(thread));
        }

        String target() {
            return className + "#" + methodName;
        }

        String settings() {
            return "mode " + mode.word() + (delayMs > 0 ? ", delay_ms " + delayMs : "")
                + (exception == null ? "" : ", exception " + exception + (code == null ? "" : "(code " + code + ")"))
                + ", calls " + calls
                + ", skip " + skip + ", after_ms " + afterMs + (thread == null ? "" : ", thread " + thread)
                + (armFile == null ? "" : ", armed by " + armFile);
        }
    }

    /** The plants, in the order given; IllegalArgumentException saying what is wrong otherwise. */
    static List<Spec> parse(String args) {
        if (args == null || args.trim().isEmpty()) {
            throw new IllegalArgumentException("no plant given (expected " + GRAMMAR + ")");
        }
        List<Spec> specs = new ArrayList<>();
        String[] plants = args.split(";", -1);
        for (int i = 0; i < plants.length; i++) {
            String plant = plants[i].trim();
            if (plant.isEmpty()) {
                throw new IllegalArgumentException("plant " + (i + 1) + " of '" + args + "' is empty (expected "
                    + GRAMMAR + ")");
            }
            specs.add(parsePlant(plant));
        }
        return Collections.unmodifiableList(specs);
    }

    private static Spec parsePlant(String plant) {
        Map<String, String> values = new LinkedHashMap<>();
        for (String raw : plant.split(",", -1)) {
            String part = raw.trim();
            int eq = part.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("malformed option '" + part + "' in '" + plant
                    + "' (expected key=value; " + GRAMMAR + ")");
            }
            String key = part.substring(0, eq).trim();
            String value = part.substring(eq + 1).trim();
            switch (key) {
                case "method":
                case "mode":
                case "calls":
                case "skip":
                case "after_ms":
                case "delay_ms":
                case "thread":
                case "exception":
                case "code":
                case "arm_file":
                    break;
                default:
                    throw new IllegalArgumentException("unknown option '" + key + "' in '" + plant + "' (expected "
                        + GRAMMAR + ")");
            }
            if (values.put(key, value) != null) {
                throw new IllegalArgumentException("option " + key + " given twice in '" + plant + "'");
            }
        }
        String method = values.get("method");
        if (method == null) {
            throw new IllegalArgumentException("missing option method=<Class>#<method> in '" + plant + "'");
        }
        int hash = method.indexOf('#');
        String className = hash < 0 ? method : method.substring(0, hash);
        String methodName = hash < 0 ? "" : method.substring(hash + 1);
        if (!CLASS_NAME.matcher(className).matches() || !METHOD_NAME.matcher(methodName).matches()) {
            throw new IllegalArgumentException("malformed option 'method=" + method
                + "' (expected method=<fully.qualified.Class>#<methodName>)");
        }
        String modeWord = values.get("mode");
        if (modeWord == null) {
            throw new IllegalArgumentException("missing option mode=throw|fail|false|delay|delay_after|return_null|return_empty in '"
                + plant + "'");
        }
        Mode mode;
        switch (modeWord) {
            case "throw":
                mode = Mode.THROW;
                break;
            case "fail":
                mode = Mode.FAIL;
                break;
            case "false":
                mode = Mode.FALSE;
                break;
            case "delay":
                mode = Mode.DELAY;
                break;
            case "delay_after":
                mode = Mode.DELAY_AFTER;
                break;
            case "return_null":
                mode = Mode.RETURN_NULL;
                break;
            case "return_empty":
                mode = Mode.RETURN_EMPTY;
                break;
            default:
                throw new IllegalArgumentException("malformed option 'mode=" + modeWord
                    + "' (expected mode=throw, mode=fail, mode=false, mode=delay, mode=delay_after, mode=return_null "
                    + "or mode=return_empty)");
        }
        long delayMs = 0;
        if (mode == Mode.DELAY || mode == Mode.DELAY_AFTER) {
            if (!values.containsKey("delay_ms")) {
                throw new IllegalArgumentException("missing option delay_ms=D (required with mode=" + modeWord + ") in '"
                    + plant + "'");
            }
            delayMs = number(values, "delay_ms", 0, 1, MAX_DELAY_MS);
        } else if (values.containsKey("delay_ms")) {
            throw new IllegalArgumentException("option delay_ms is only for mode=delay or mode=delay_after (not mode="
                + modeWord
                + ") in '" + plant + "'");
        }
        long calls = number(values, "calls", 1, 1, MAX_CALLS);
        long skip = number(values, "skip", 0, 0, MAX_SKIP);
        long afterMs = number(values, "after_ms", 0, 0, MAX_AFTER_MS);
        String thread = values.get("thread");
        if (thread != null && (thread.isEmpty() || thread.length() > MAX_THREAD || thread.indexOf(',') >= 0
            || thread.indexOf(';') >= 0 || thread.indexOf('=') >= 0)) {
            throw new IllegalArgumentException("malformed option 'thread=" + thread + "' (expected part of a thread's"
                + " name, 1 to " + MAX_THREAD + " characters without , ; =)");
        }
        String exception = values.get("exception");
        if (exception != null) {
            if (mode != Mode.THROW && mode != Mode.FAIL) {
                throw new IllegalArgumentException("option exception is only for mode=throw or mode=fail (not mode="
                    + modeWord + ") in '" + plant + "'");
            }
            if (!CLASS_NAME.matcher(exception).matches()) {
                throw new IllegalArgumentException("malformed option 'exception=" + exception
                    + "' (expected exception=<fully.qualified.ExceptionClass>)");
            }
        }
        Integer code = null;
        String codeWord = values.get("code");
        if (codeWord != null) {
            if (exception == null) {
                throw new IllegalArgumentException("option code needs exception=<Class> (the code goes to its (int, "
                    + "String) constructor) in '" + plant + "'");
            }
            long c = INT.matcher(codeWord).matches() ? Long.parseLong(codeWord) : Long.MAX_VALUE;
            if (c < Integer.MIN_VALUE || c > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("malformed option 'code=" + codeWord + "' (expected a whole number"
                    + " from " + Integer.MIN_VALUE + " to " + Integer.MAX_VALUE + ")");
            }
            code = (int) c;
        }
        String armFile = values.get("arm_file");
        if (armFile != null && armFile.isEmpty()) {
            throw new IllegalArgumentException("malformed option 'arm_file=' (expected a file's path)");
        }
        return new Spec(className, methodName, mode, (int) calls, skip, afterMs, delayMs, thread, exception, code,
            armFile);
    }

    private static long number(Map<String, String> values, String key, long dflt, long min, long max) {
        String value = values.get(key);
        if (value == null) {
            return dflt;
        }
        long v = -1;
        if (WHOLE.matcher(value).matches() && value.length() <= 12) {
            v = Long.parseLong(value);
        }
        if (v < min || v > max) {
            throw new IllegalArgumentException("malformed option '" + key + "=" + value + "' (expected a whole number"
                + " from " + min + " to " + max + ")");
        }
        return v;
    }
}
