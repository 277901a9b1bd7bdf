package dev.rmqharness.patches.fault;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import net.bytebuddy.ByteBuddy;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.dynamic.loading.ClassLoadingStrategy;
import net.bytebuddy.dynamic.scaffold.subclass.ConstructorStrategy;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The plants' advice on stand-in classes redefined with ByteBuddy (no agent installation), and their counters. */
class PopFaultTest {
    /** Stand-in for a broker service: an asynchronous read (three overloads), a boolean step, a plain method. */
    public static class Service {
        public final AtomicInteger bodyRuns = new AtomicInteger();

        public CompletableFuture<String> read(int offset) {
            bodyRuns.incrementAndGet();
            return CompletableFuture.completedFuture("msg" + offset);
        }

        public CompletionStage<String> read(String key) {
            bodyRuns.incrementAndGet();
            return CompletableFuture.completedFuture(key);
        }

        public String read(long offset) {
            bodyRuns.incrementAndGet();
            return "sync" + offset;
        }

        public boolean revive(String what) {
            bodyRuns.incrementAndGet();
            return true;
        }

        public int count() {
            bodyRuns.incrementAndGet();
            return 7;
        }

        public List<Long> offsets() {
            bodyRuns.incrementAndGet();
            return new ArrayList<>(Arrays.asList(3L, 4L));
        }

        public String info(int queue) {
            bodyRuns.incrementAndGet();
            return "0 1 " + queue;
        }

        public java.util.Map<String, List<Long>> table() {
            bodyRuns.incrementAndGet();
            java.util.Map<String, List<Long>> m = new java.util.HashMap<>();
            m.put("0@0", new ArrayList<>(Arrays.asList(1L)));
            return m;
        }
    }

    /** A future subtype: a CompletableFuture cannot be returned in its place. */
    public static class MyFuture<T> extends CompletableFuture<T> {
    }

    public static class Odd {
        public MyFuture<String> read() {
            return new MyFuture<>();
        }

        public Future<String> poll() {
            return CompletableFuture.completedFuture("x");
        }

        public Object any() {
            return null;
        }
    }

    public abstract static class Abstract {
        public abstract CompletableFuture<String> read();
    }

    /** A checked exception with a code and no (String) constructor, as MQBrokerException. */
    public static class CodedException extends Exception {
        public final int code;

        public CodedException(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    /** A checked exception with a (String) constructor only. */
    public static class PlainException extends Exception {
        public PlainException(String message) {
            super(message);
        }
    }

    /** An unchecked one. */
    public static class PlainRuntimeException extends IllegalStateException {
        public PlainRuntimeException(String message) {
            super(message);
        }
    }

    private static final String SERVICE = Service.class.getName();
    private final PrintStream err = System.err;
    private final ByteArrayOutputStream said = new ByteArrayOutputStream();

    @AfterEach
    void cleanUp() {
        Faults.uninstall();
        System.setErr(err);
    }

    private static FaultOptions.Spec spec(String options) {
        return FaultOptions.parse(options).get(0);
    }

    /** Installs the plants (ids in order) and returns Service redefined with every plant's advice. */
    private static Class<?> planted(long installedAtNanos, String options) {
        List<FaultOptions.Spec> specs = FaultOptions.parse(options);
        Faults.install(specs, installedAtNanos);
        DynamicType.Builder<?> builder = new ByteBuddy().redefine(Service.class);
        for (int id = 0; id < specs.size(); id++) {
            assertNull(PopFaultAgent.plan(TypeDescription.ForLoadedType.of(Service.class), specs.get(id)).refusal);
            builder = builder.visit(PopFaultAgent.advice(specs.get(id), id));
        }
        return builder.make().load(PopFaultTest.class.getClassLoader(), ClassLoadingStrategy.Default.CHILD_FIRST)
            .getLoaded();
    }

    private static Class<?> planted(String options) {
        return planted(System.nanoTime(), options);
    }

    private void captureErr() {
        System.setErr(new PrintStream(said, true));
    }

    private List<String> lines() {
        return Arrays.stream(new String(said.toByteArray(), StandardCharsets.UTF_8).split("\\R"))
            .filter(l -> !l.isEmpty()).collect(Collectors.toList());
    }

    private static int bodyRuns(Object service) throws Exception {
        return ((AtomicInteger) service.getClass().getField("bodyRuns").get(service)).get();
    }

    private static Throwable failureOf(Object future) {
        ExecutionException e = assertThrows(ExecutionException.class,
            () -> ((CompletableFuture<?>) future).get(1, TimeUnit.SECONDS));
        return e.getCause();
    }

    @Test
    void failRunsTheBodyAndFailsTheReturnedFutureForTheCountedCallsOnly() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#read,mode=fail,calls=2,skip=1");
        Object service = type.getConstructor().newInstance();
        Method read = type.getMethod("read", int.class);

        assertEquals("msg1", ((CompletableFuture<?>) read.invoke(service, 1)).get()); // skipped
        Throwable second = failureOf(read.invoke(service, 2));
        assertSame(RuntimeException.class, second.getClass());
        assertEquals("rmq-harness planted failure", second.getMessage());
        Object third = type.getMethod("read", String.class).invoke(service, "k"); // another overload, same plant
        assertEquals("rmq-harness planted failure", failureOf(third).getMessage());
        assertEquals("msg4", ((CompletableFuture<?>) read.invoke(service, 4)).get());
        assertEquals("sync5", type.getMethod("read", long.class).invoke(service, 5L)); // not a future: untouched
        assertEquals(5, bodyRuns(service), "fail lets the body run");
        assertEquals(2, Faults.planted(0));
        assertEquals(Arrays.asList(
            "[pop-fault] planted failure 1/2 in " + SERVICE + "#read",
            "[pop-fault] planted failure 2/2 in " + SERVICE + "#read"), lines());
    }

    @Test
    void throwThrowsOnEntryWithoutRunningTheBody() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#count,mode=throw,calls=1");
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        InvocationTargetException e = assertThrows(InvocationTargetException.class, () -> count.invoke(service));
        assertSame(RuntimeException.class, e.getCause().getClass());
        assertEquals("rmq-harness planted failure", e.getCause().getMessage());
        assertEquals(0, bodyRuns(service));
        assertEquals(7, count.invoke(service));
        assertEquals(1, bodyRuns(service));
    }

    @Test
    void falseSkipsTheBodyAndReturnsFalse() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#revive,mode=false,calls=2");
        Object service = type.getConstructor().newInstance();
        Method revive = type.getMethod("revive", String.class);
        assertEquals(false, revive.invoke(service, "a"));
        assertEquals(false, revive.invoke(service, "b"));
        assertEquals(0, bodyRuns(service));
        assertEquals(true, revive.invoke(service, "c"));
        assertEquals(1, bodyRuns(service));
    }

    @Test
    void callsBeforeAfterMsPassAndAreNotCounted() throws Exception {
        Class<?> early = planted(System.nanoTime(), "method=" + SERVICE + "#count,mode=throw,after_ms=60000");
        Object service = early.getConstructor().newInstance();
        for (int i = 0; i < 5; i++) {
            assertEquals(7, early.getMethod("count").invoke(service));
        }
        assertEquals(0, Faults.planted(0));

        long longAgo = System.nanoTime() - TimeUnit.SECONDS.toNanos(61);
        Class<?> late = planted(longAgo, "method=" + SERVICE + "#count,mode=throw,after_ms=60000,skip=1");
        Object again = late.getConstructor().newInstance();
        assertEquals(7, late.getMethod("count").invoke(again)); // the one skipped: counting began now, not earlier
        assertThrows(InvocationTargetException.class, () -> late.getMethod("count").invoke(again));
        assertEquals(7, late.getMethod("count").invoke(again));
    }

    @Test
    void severalPlantsOnOneClassCountApart() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#count,mode=throw;method=" + SERVICE + "#revive,mode=false");
        Object service = type.getConstructor().newInstance();
        assertThrows(InvocationTargetException.class, () -> type.getMethod("count").invoke(service));
        assertEquals(false, type.getMethod("revive", String.class).invoke(service, "x"));
        assertEquals(7, type.getMethod("count").invoke(service));
        assertEquals(true, type.getMethod("revive", String.class).invoke(service, "x"));
        assertEquals(1, Faults.planted(0));
        assertEquals(1, Faults.planted(1));
    }

    @Test
    void exactlyNCallsFailUnderConcurrentCalls() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#read,mode=fail,calls=50,skip=100");
        Object service = type.getConstructor().newInstance();
        Method read = type.getMethod("read", int.class);
        AtomicInteger failed = new AtomicInteger();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            Thread thread = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 500; i++) {
                        if (((CompletableFuture<?>) read.invoke(service, i)).isCompletedExceptionally()) {
                            failed.incrementAndGet();
                        }
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            thread.start();
            threads.add(thread);
        }
        start.countDown();
        for (Thread thread : threads) {
            thread.join(10_000);
        }
        assertEquals(50, failed.get());
        assertEquals(4000, bodyRuns(service));
        List<String> lines = lines();
        assertEquals(50, lines.size());
        for (int k = 1; k <= 50; k++) {
            assertTrue(lines.contains("[pop-fault] planted failure " + k + "/50 in " + SERVICE + "#read"), "k=" + k);
        }
    }

    /** Runs {@code call} on a thread of that name and returns what it returned (or threw). */
    private static Object onThread(String name, java.util.concurrent.Callable<Object> call) throws Exception {
        Object[] out = new Object[1];
        Thread thread = new Thread(() -> {
            try {
                out[0] = call.call();
            } catch (Exception e) {
                out[0] = e;
            }
        }, name);
        thread.start();
        thread.join(10_000);
        assertFalse(thread.isAlive());
        return out[0];
    }

    private static long msOf(java.util.concurrent.Callable<Object> call, Object expected) throws Exception {
        long start = System.nanoTime();
        assertEquals(expected, call.call());
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    @Test
    void delaySleepsOnEntryThenRunsTheBodyForTheCountedCallsOnly() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#read,mode=delay,delay_ms=250,calls=2,skip=1");
        Object service = type.getConstructor().newInstance();
        Method sync = type.getMethod("read", long.class);
        Method async = type.getMethod("read", int.class);
        String me = Thread.currentThread().getName();

        assertEquals("sync1", sync.invoke(service, 1L)); // skipped
        assertEquals(0, Faults.planted(0));
        assertTrue(msOf(() -> sync.invoke(service, 2L), "sync2") >= 250, "the first delayed call");
        assertTrue(msOf(() -> ((CompletableFuture<?>) async.invoke(service, 3)).get(), "msg3") >= 250,
            "another overload (any return type), same plant");
        assertEquals("sync4", sync.invoke(service, 4L)); // past calls: untouched
        assertEquals(4, bodyRuns(service), "delay lets the body run");
        assertEquals(2, Faults.planted(0));
        assertEquals(Arrays.asList(
            "[pop-fault] planted delay 1/2 of 250 ms in " + SERVICE + "#read (thread " + me + ")",
            "[pop-fault] planted delay 2/2 of 250 ms in " + SERVICE + "#read (thread " + me + ")"), lines());
    }

    @Test
    void aDelayInterruptedEndsEarlyWithTheInterruptFlagSetAgain() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#count,mode=delay,delay_ms=600000");
        Object service = type.getConstructor().newInstance();
        Thread.currentThread().interrupt();
        Object returned;
        try {
            returned = type.getMethod("count").invoke(service);
        } finally {
            assertTrue(Thread.interrupted(), "the interrupt flag is set again (and cleared here)");
        }
        assertEquals(7, returned);
        assertEquals(1, bodyRuns(service));
        assertEquals(1, Faults.planted(0));
    }

    @Test
    void callsOnAnotherThreadAreNotDelayedNorCounted() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#count,mode=delay,delay_ms=200,skip=1,thread=FaultWorker");
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        for (int i = 0; i < 3; i++) {
            assertEquals(7, onThread("other-" + i, () -> count.invoke(service))); // skip is not spent here
        }
        assertEquals(0, Faults.planted(0));
        assertTrue(lines().isEmpty(), String.valueOf(lines()));
        assertEquals(7, onThread("PopFaultWorker-1", () -> count.invoke(service))); // the one skipped
        assertEquals(0, Faults.planted(0));
        assertEquals(7, onThread("other", () -> count.invoke(service)));
        Object took = onThread("PopFaultWorker-2", () -> msOf(() -> count.invoke(service), 7));
        assertTrue((Long) took >= 200, "the delayed call took " + took + " ms");
        assertEquals(7, onThread("PopFaultWorker-3", () -> count.invoke(service))); // past calls
        assertEquals(1, Faults.planted(0));
        assertEquals(7, bodyRuns(service));
        assertEquals(Arrays.asList("[pop-fault] planted delay 1/1 of 200 ms in " + SERVICE
            + "#count (thread PopFaultWorker-2)"), lines());
    }

    @Test
    void theThreadFilterHoldsForEveryMode() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#count,mode=throw,calls=1,thread=Revive");
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        assertEquals(7, count.invoke(service)); // this thread's name has no "Revive"
        assertEquals(7, onThread("revive", () -> count.invoke(service))); // case-sensitive
        Object thrown = onThread("PopReviveService", () -> count.invoke(service));
        assertTrue(thrown instanceof InvocationTargetException, String.valueOf(thrown));
        assertEquals("rmq-harness planted failure", ((InvocationTargetException) thrown).getCause().getMessage());
        assertEquals(1, Faults.planted(0));
    }

    @Test
    void installLinesCountTheOverloadsTaken() {
        TypeDescription service = TypeDescription.ForLoadedType.of(Service.class);
        PopFaultAgent.Plan fail = PopFaultAgent.plan(service, spec("method=" + SERVICE + "#read,mode=fail,calls=3"));
        assertEquals(2, fail.overloads);
        assertTrue(fail.installed.startsWith("installed: " + SERVICE + "#read (2 overloads), mode fail, calls 3, "
            + "skip 0, after_ms 0; 1 other overload"), fail.installed);
        PopFaultAgent.Plan thrown = PopFaultAgent.plan(service, spec("method=" + SERVICE + "#read,mode=throw"));
        assertEquals("installed: " + SERVICE + "#read (3 overloads), mode throw, calls 1, skip 0, after_ms 0",
            thrown.installed);
        assertEquals("installed: " + SERVICE + "#revive (1 overload), mode false, calls 1, skip 0, after_ms 0",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#revive,mode=false")).installed);
        assertEquals("installed: " + SERVICE + "#read (3 overloads), mode delay, delay_ms 50, calls 2, skip 0, "
            + "after_ms 0, thread PopConsumerCache", PopFaultAgent.plan(service,
            spec("method=" + SERVICE + "#read,mode=delay,delay_ms=50,calls=2,thread=PopConsumerCache")).installed);
        assertEquals("installed: " + SERVICE + "#count (1 overload), mode throw, calls 1, skip 0, after_ms 0, "
            + "thread x", PopFaultAgent.plan(service, spec("method=" + SERVICE + "#count,mode=throw,thread=x"))
            .installed);
    }

    @Test
    void refusesWhatItCannotPlant() {
        TypeDescription service = TypeDescription.ForLoadedType.of(Service.class);
        assertEquals(SERVICE + " has no method nothing",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#nothing,mode=throw")).refusal);
        assertEquals(SERVICE + "#revive does not return a CompletableFuture (mode fail)",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#revive,mode=fail")).refusal);
        assertEquals(SERVICE + "#count does not return boolean (mode false)",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#count,mode=false")).refusal);
        assertEquals(SERVICE + "#read does not return boolean (mode false)",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#read,mode=false")).refusal);

        TypeDescription odd = TypeDescription.ForLoadedType.of(Odd.class);
        String o = Odd.class.getName();
        assertTrue(PopFaultAgent.plan(odd, spec("method=" + o + "#read,mode=fail")).refusal
            .endsWith("does not return a CompletableFuture (mode fail)"), "a subtype of CompletableFuture");
        assertTrue(PopFaultAgent.plan(odd, spec("method=" + o + "#any,mode=fail")).refusal
            .endsWith("does not return a CompletableFuture (mode fail)"), "Object");
        assertNull(PopFaultAgent.plan(odd, spec("method=" + o + "#poll,mode=fail")).refusal, "a Future");

        String a = Abstract.class.getName();
        assertTrue(PopFaultAgent.plan(TypeDescription.ForLoadedType.of(Abstract.class),
            spec("method=" + a + "#read,mode=fail")).refusal.contains("no body"));
    }

    @Test
    void aFutureReturningSupertypeGetsTheFailedFuture() throws Exception {
        String o = Odd.class.getName();
        List<FaultOptions.Spec> specs = FaultOptions.parse("method=" + o + "#poll,mode=fail");
        Faults.install(specs, System.nanoTime());
        Class<?> type = new ByteBuddy().redefine(Odd.class).visit(PopFaultAgent.advice(specs.get(0), 0)).make()
            .load(PopFaultTest.class.getClassLoader(), ClassLoadingStrategy.Default.CHILD_FIRST).getLoaded();
        Object odd = type.getConstructor().newInstance();
        Object first = type.getMethod("poll").invoke(odd);
        assertEquals("rmq-harness planted failure", failureOf(first).getMessage());
        assertFalse(((CompletableFuture<?>) type.getMethod("poll").invoke(odd)).isCompletedExceptionally());
    }

    private static final String CODED = CodedException.class.getName();
    private static final String PLAIN = PlainException.class.getName();

    @Test
    void throwThrowsTheNamedExceptionCheckedOrNotWithOrWithoutACode() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#count,mode=throw,calls=2,exception=" + CODED + ",code=17;"
            + "method=" + SERVICE + "#revive,mode=throw,exception=" + PLAIN + ";"
            + "method=" + SERVICE + "#read,mode=throw,exception=" + PlainRuntimeException.class.getName());
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        for (int i = 0; i < 2; i++) {
            Throwable coded = assertThrows(InvocationTargetException.class, () -> count.invoke(service)).getCause();
            assertSame(CodedException.class, coded.getClass());
            assertEquals(17, ((CodedException) coded).code);
            assertEquals("rmq-harness planted failure", coded.getMessage());
        }
        Throwable plain = assertThrows(InvocationTargetException.class,
            () -> type.getMethod("revive", String.class).invoke(service, "x")).getCause();
        assertSame(PlainException.class, plain.getClass());
        assertEquals("rmq-harness planted failure", plain.getMessage());
        Throwable unchecked = assertThrows(InvocationTargetException.class,
            () -> type.getMethod("read", long.class).invoke(service, 1L)).getCause();
        assertSame(PlainRuntimeException.class, unchecked.getClass());
        assertEquals(7, count.invoke(service));
        assertEquals(1, bodyRuns(service));
        assertEquals(Arrays.asList(
            "[pop-fault] planted failure 1/2 in " + SERVICE + "#count",
            "[pop-fault] planted failure 2/2 in " + SERVICE + "#count",
            "[pop-fault] planted failure 1/1 in " + SERVICE + "#revive",
            "[pop-fault] planted failure 1/1 in " + SERVICE + "#read"), lines());
    }

    @Test
    void failCompletesTheFutureWithTheNamedExceptionWithOrWithoutACode() throws Exception {
        captureErr();
        Class<?> coded = planted("method=" + SERVICE + "#read,mode=fail,exception=" + CODED + ",code=-3");
        Object service = coded.getConstructor().newInstance();
        Throwable first = failureOf(coded.getMethod("read", int.class).invoke(service, 1));
        assertSame(CodedException.class, first.getClass());
        assertEquals(-3, ((CodedException) first).code);
        assertEquals("rmq-harness planted failure", first.getMessage());
        assertEquals("msg2", ((CompletableFuture<?>) coded.getMethod("read", int.class).invoke(service, 2)).get());

        Faults.uninstall();
        Class<?> plain = planted("method=" + SERVICE + "#read,mode=fail,exception=" + PLAIN);
        Object other = plain.getConstructor().newInstance();
        Throwable second = failureOf(plain.getMethod("read", String.class).invoke(other, "k"));
        assertSame(PlainException.class, second.getClass());
        assertEquals("rmq-harness planted failure", second.getMessage());
        assertEquals(1, bodyRuns(other), "fail lets the body run");
        assertEquals(Arrays.asList(
            "[pop-fault] planted failure 1/1 in " + SERVICE + "#read",
            "[pop-fault] planted failure 1/1 in " + SERVICE + "#read"), lines());
    }

    @Test
    void anExceptionThatCannotBeMadeFallsBackToRuntimeExceptionAndSaysSoOnce() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#count,mode=throw,calls=2,exception=no.such.Missing;"
            + "method=" + SERVICE + "#read,mode=fail,calls=2,exception=" + PLAIN + ",code=5;"
            + "method=" + SERVICE + "#revive,mode=throw,exception=java.lang.String");
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        for (int i = 0; i < 2; i++) {
            Throwable t = assertThrows(InvocationTargetException.class, () -> count.invoke(service)).getCause();
            assertSame(RuntimeException.class, t.getClass());
            assertEquals("rmq-harness planted failure", t.getMessage());
        }
        for (int i = 0; i < 2; i++) {
            Throwable f = failureOf(type.getMethod("read", int.class).invoke(service, i));
            assertSame(RuntimeException.class, f.getClass(), "PlainException has no (int, String) constructor");
        }
        Throwable notThrowable = assertThrows(InvocationTargetException.class,
            () -> type.getMethod("revive", String.class).invoke(service, "x")).getCause();
        assertSame(RuntimeException.class, notThrowable.getClass());
        List<String> lines = lines();
        assertEquals(8, lines.size(), String.valueOf(lines));
        List<String> fallbacks = lines.stream().filter(l -> l.contains("cannot make")).collect(Collectors.toList());
        assertEquals(3, fallbacks.size(), String.valueOf(lines));
        assertTrue(fallbacks.get(0).startsWith("[pop-fault] planted failure: cannot make no.such.Missing(String): "
            + "class not found by the loader of " + SERVICE + " ("), fallbacks.get(0));
        assertTrue(fallbacks.get(0).endsWith("; threw RuntimeException instead"), fallbacks.get(0));
        assertEquals("[pop-fault] planted failure: cannot make " + PLAIN + "(int, String): no public constructor "
            + "(int, String); threw RuntimeException instead", fallbacks.get(1));
        assertEquals("[pop-fault] planted failure: cannot make java.lang.String(String): not a Throwable; threw "
            + "RuntimeException instead", fallbacks.get(2));
        assertEquals("[pop-fault] planted failure 1/2 in " + SERVICE + "#count", lines.get(0));
    }

    @Test
    void theExceptionComesFromThePlantedClasssLoaderNotTheAgents() throws Exception {
        String hidden = "dev.rmqharness.hidden.HiddenException";
        assertThrows(ClassNotFoundException.class, () -> Class.forName(hidden));
        DynamicType.Unloaded<?> exception = new ByteBuddy()
            .subclass(Exception.class, ConstructorStrategy.Default.IMITATE_SUPER_CLASS_PUBLIC).name(hidden).make();
        List<FaultOptions.Spec> specs = FaultOptions.parse("method=" + SERVICE + "#count,mode=throw,exception="
            + hidden + ";method=" + SERVICE + "#read,mode=fail,exception=" + hidden);
        Faults.install(specs, System.nanoTime());
        Class<?> type = new ByteBuddy().redefine(Service.class).visit(PopFaultAgent.advice(specs.get(0), 0))
            .visit(PopFaultAgent.advice(specs.get(1), 1)).make().include(exception)
            .load(PopFaultTest.class.getClassLoader(), ClassLoadingStrategy.Default.CHILD_FIRST).getLoaded();
        Object service = type.getConstructor().newInstance();
        Throwable thrown = assertThrows(InvocationTargetException.class,
            () -> type.getMethod("count").invoke(service)).getCause();
        assertEquals(hidden, thrown.getClass().getName());
        assertSame(type.getClassLoader(), thrown.getClass().getClassLoader());
        assertEquals("rmq-harness planted failure", thrown.getMessage());
        Throwable failed = failureOf(type.getMethod("read", int.class).invoke(service, 1));
        assertEquals(hidden, failed.getClass().getName());
    }

    @Test
    void installLinesSayTheException() {
        TypeDescription service = TypeDescription.ForLoadedType.of(Service.class);
        assertEquals("installed: " + SERVICE + "#read (2 overloads), mode fail, exception " + CODED + "(code 1), "
            + "calls 1, skip 0, after_ms 0; 1 other overload of that name run untouched (abstract, native, or of "
            + "another return type)", PopFaultAgent.plan(service,
            spec("method=" + SERVICE + "#read,mode=fail,exception=" + CODED + ",code=1")).installed);
        assertEquals("installed: " + SERVICE + "#count (1 overload), mode throw, exception " + PLAIN + ", calls 1, "
            + "skip 0, after_ms 0", PopFaultAgent.plan(service,
            spec("method=" + SERVICE + "#count,mode=throw,exception=" + PLAIN)).installed);
    }

    @Test
    void returnNullRunsTheBodyAndReturnsNullForTheCountedCalls() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#info,mode=return_null,calls=2,skip=1");
        Object service = type.getConstructor().newInstance();
        Method info = type.getMethod("info", int.class);
        assertEquals("0 1 1", info.invoke(service, 1));
        assertNull(info.invoke(service, 2));
        assertNull(info.invoke(service, 3));
        assertEquals("0 1 4", info.invoke(service, 4));
        assertEquals(4, bodyRuns(service), "return_null lets the body run");
        assertEquals(Arrays.asList(
            "[pop-fault] planted failure 1/2 in " + SERVICE + "#info",
            "[pop-fault] planted failure 2/2 in " + SERVICE + "#info"), lines());
    }

    @Test
    @SuppressWarnings("unchecked")
    void returnEmptyGivesAnEmptyMutableValueOfTheDeclaredType() throws Exception {
        Class<?> type = planted("method=" + SERVICE + "#offsets,mode=return_empty,calls=1;method=" + SERVICE
            + "#table,mode=return_empty;method=" + SERVICE + "#info,mode=return_empty");
        Object service = type.getConstructor().newInstance();
        List<?> offsets = (List<?>) type.getMethod("offsets").invoke(service);
        assertTrue(offsets.isEmpty());
        ((List<Object>) offsets).add(1L); // the broker's own lists are mutable; so is the planted one
        assertEquals(Arrays.asList(3L, 4L), type.getMethod("offsets").invoke(service));
        assertTrue(((java.util.Map<?, ?>) type.getMethod("table").invoke(service)).isEmpty());
        assertEquals("", type.getMethod("info", int.class).invoke(service, 9));
        assertEquals(4, bodyRuns(service));
    }

    @Test
    void theReturnModesRefuseReturnTypesTheyCannotServe() {
        TypeDescription service = TypeDescription.ForLoadedType.of(Service.class);
        assertEquals(SERVICE + "#count does not return an object (mode return_null)",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#count,mode=return_null")).refusal);
        assertEquals(SERVICE + "#revive does not return a List, Collection, Iterable, Set, Map or String (mode "
            + "return_empty)", PopFaultAgent.plan(service, spec("method=" + SERVICE + "#revive,mode=return_empty"))
            .refusal);
        assertEquals("installed: " + SERVICE + "#read (3 overloads), mode return_null, calls 1, skip 0, after_ms 0",
            PopFaultAgent.plan(service, spec("method=" + SERVICE + "#read,mode=return_null")).installed);
        assertTrue(PopFaultAgent.plan(service, spec("method=" + SERVICE + "#read,mode=return_empty")).installed
            .startsWith("installed: " + SERVICE + "#read (1 overload), mode return_empty"));
    }

    @Test
    void aPlantWithAnArmFileCountsNoCallUntilTheFileExistsAndItsAfterMsFromThen() throws Exception {
        captureErr();
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("arm");
        java.nio.file.Path arm = dir.resolve("plants-armed");
        Class<?> type = planted(System.nanoTime() - TimeUnit.SECONDS.toNanos(60), "method=" + SERVICE
            + "#count,mode=throw,calls=1,after_ms=300,arm_file=" + arm);
        Object service = type.getConstructor().newInstance();
        Method count = type.getMethod("count");
        for (int i = 0; i < 5; i++) {
            assertEquals(7, count.invoke(service)); // long past after_ms since install, but not armed
        }
        java.nio.file.Files.createFile(arm);
        Thread.sleep(150); // past the look-again interval
        assertEquals(7, count.invoke(service)); // armed now; after_ms counts from here
        assertEquals(7, count.invoke(service));
        Thread.sleep(400);
        assertThrows(InvocationTargetException.class, () -> count.invoke(service));
        assertEquals(7, count.invoke(service));
        assertEquals(Arrays.asList("[pop-fault] armed: " + SERVICE + "#count (" + arm + " exists)",
            "[pop-fault] planted failure 1/1 in " + SERVICE + "#count"), lines());
        java.nio.file.Files.delete(arm);
        java.nio.file.Files.delete(dir);
    }

    @Test
    void delayAfterRunsTheBodyThenSleepsBeforeItReturns() throws Exception {
        captureErr();
        Class<?> type = planted("method=" + SERVICE + "#info,mode=delay_after,delay_ms=300,calls=1");
        Object service = type.getConstructor().newInstance();
        Method info = type.getMethod("info", int.class);
        long t0 = System.nanoTime();
        assertEquals("0 1 5", info.invoke(service, 5));
        assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(300), "slept before returning");
        assertEquals(1, bodyRuns(service));
        t0 = System.nanoTime();
        assertEquals("0 1 6", info.invoke(service, 6));
        assertTrue(System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(300), "one call only");
        assertTrue(lines().get(0).startsWith("[pop-fault] planted delay 1/1 of 300 ms in " + SERVICE + "#info"));
    }
}
