package dev.rmqharness.patches.delay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import net.bytebuddy.ByteBuddy;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.loading.ClassLoadingStrategy;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The agent patches only a PopLongPollingService shaped like 5.3.3's (and 5.4.0's) and stays out of
 * the way otherwise; on that shape the rewrite defers the hand-off and nothing else.
 */
class CompatibilityTest {
    /** Stand-in for PopRequest: completes once. */
    public static class Request {
        public final CountDownLatch processed = new CountDownLatch(1);
        public final AtomicInteger processedTimes = new AtomicInteger();
        private final AtomicBoolean complete = new AtomicBoolean();

        public boolean complete() {
            return complete.compareAndSet(false, true);
        }
    }

    /** Stand-in for CommandCallback. */
    public interface Callback {
    }

    /** Claims the request, then hands a task re-running it to an executor, like 5.3.3's wakeUp. */
    public static class ShapedLike533 {
        private final ExecutorService pullExecutor;

        public ShapedLike533(ExecutorService pullExecutor) {
            this.pullExecutor = pullExecutor;
        }

        public boolean wakeUp(Request request) {
            return wakeUp(request, null);
        }

        public boolean wakeUp(Request request, Callback callback) {
            if (request == null || !request.complete()) {
                return false;
            }
            Runnable rerun = () -> {
                request.processedTimes.incrementAndGet();
                request.processed.countDown();
            };
            pullExecutor.submit(rerun);
            return true;
        }
    }

    /** Same signature, but runs the request with execute(): nothing for the rewrite to hook. */
    public static class ExecutesInstead {
        private final ExecutorService pullExecutor = Executors.newSingleThreadExecutor();

        public boolean wakeUp(Request request, Callback callback) {
            pullExecutor.execute(() -> request.processed.countDown());
            return true;
        }
    }

    /** Only the one-argument wakeUp (older releases). */
    public static class WithoutCallbackVariant {
        public boolean wakeUp(Request request) {
            return true;
        }
    }

    /** Right name and arity, wrong return type. */
    public static class VoidWakeUp {
        public void wakeUp(Request request, Callback callback) {
        }
    }

    @AfterEach
    void cleanUp() {
        WakeupDelay.uninstall();
    }

    @Test
    void installsOnTheKnownShape() {
        assertNull(WakeupDelayAgent.incompatibility(TypeDescription.ForLoadedType.of(ShapedLike533.class)));
        assertNull(WakeupDelayAgent.incompatibility(TypeDescription.ForLoadedType.of(ExecutesInstead.class)));
    }

    @Test
    void namesWhatIsMissingOtherwise() {
        assertTrue(WakeupDelayAgent.incompatibility(TypeDescription.ForLoadedType.of(WithoutCallbackVariant.class))
            .contains("wakeUp(PopRequest, CommandCallback)"));
        assertTrue(WakeupDelayAgent.incompatibility(TypeDescription.ForLoadedType.of(VoidWakeUp.class))
            .contains("wakeUp(PopRequest, CommandCallback)"));
        assertTrue(WakeupDelayAgent.incompatibility(TypeDescription.ForLoadedType.of(Object.class))
            .contains("wakeUp"));
    }

    @Test
    void theRewriteRefusesAWakeUpWithoutASubmit() {
        assertThrows(IllegalStateException.class, () -> new ByteBuddy().redefine(ExecutesInstead.class)
            .visit(WakeupDelayAgent.handOffRewrite()).make());
    }

    @Test
    void theRewrittenWakeUpClaimsAndReturnsAtOnceAndRunsTheRequestOnceLater() throws Exception {
        long delayMs = 150;
        WakeupDelay.install(delayMs);
        Class<?> rewritten = new ByteBuddy().redefine(ShapedLike533.class)
            .visit(WakeupDelayAgent.handOffRewrite())
            .make()
            .load(getClass().getClassLoader(), ClassLoadingStrategy.Default.CHILD_FIRST)
            .getLoaded();
        ExecutorService pull = Executors.newSingleThreadExecutor();
        try {
            Object service = rewritten.getConstructor(ExecutorService.class).newInstance(pull);
            Method wakeUp = rewritten.getMethod("wakeUp", Request.class);
            Request request = new Request();

            long start = System.nanoTime();
            assertEquals(true, wakeUp.invoke(service, request), "woken: the caller must not re-suspend it");
            long returnedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(returnedAfterMs < delayMs / 3, "wakeUp blocked for " + returnedAfterMs + " ms");
            assertFalse(request.complete(), "claimed at the original moment, by wakeUp itself");
            assertEquals(false, wakeUp.invoke(service, request), "a claimed request is not woken twice");
            assertEquals(0, request.processedTimes.get());

            assertTrue(request.processed.await(5, TimeUnit.SECONDS));
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= delayMs);
            Thread.sleep(2 * delayMs);
            assertEquals(1, request.processedTimes.get());
        } finally {
            pull.shutdownNow();
        }
    }

    @Test
    void withZeroDelayTheRewrittenWakeUpBehavesAsBefore() throws Exception {
        WakeupDelay.install(0);
        Class<?> rewritten = new ByteBuddy().redefine(ShapedLike533.class)
            .visit(WakeupDelayAgent.handOffRewrite())
            .make()
            .load(getClass().getClassLoader(), ClassLoadingStrategy.Default.CHILD_FIRST)
            .getLoaded();
        AtomicReference<Thread> submitter = new AtomicReference<>();
        ExecutorService inline = new WakeupDelayTest.Inline() {
            @Override
            public void execute(Runnable command) {
                submitter.set(Thread.currentThread());
                command.run();
            }
        };
        Object service = rewritten.getConstructor(ExecutorService.class).newInstance(inline);
        Request request = new Request();
        assertEquals(true, rewritten.getMethod("wakeUp", Request.class).invoke(service, request));
        assertEquals(1, request.processedTimes.get());
        assertEquals(Thread.currentThread(), submitter.get());
    }
}
