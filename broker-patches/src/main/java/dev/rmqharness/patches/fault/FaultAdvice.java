package dev.rmqharness.patches.fault;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.implementation.bytecode.assign.Assigner;

/** The advice inlined into planted methods, one class per mode; {@link PlantId} is bound to the plant's index. */
final class FaultAdvice {
    private FaultAdvice() {
    }

    /** The index of the plant in {@link Faults}, a constant bound at install. */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.PARAMETER)
    @interface PlantId {
    }

    /**
     * mode=throw: the call throws on entry, the body does not run; the exception (exception=X, checked or not) is
     * made from the planted class's loader ({@link Advice.Origin} is that class).
     */
    static final class Throw {
        private Throw() {
        }

        @Advice.OnMethodEnter
        static void enter(@PlantId int id, @Advice.Origin Class<?> origin) {
            if (Faults.hit(id)) {
                throw Faults.failure(id, origin);
            }
        }
    }

    /** mode=delay: the call sleeps delay_ms on entry, then the body runs (any return type). */
    static final class Delay {
        private Delay() {
        }

        @Advice.OnMethodEnter
        static void enter(@PlantId int id) {
            Faults.delay(id);
        }
    }

    /**
     * mode=delay_after: the body runs, then the call sleeps delay_ms before it returns (what it read is older than
     * it looks when its caller goes on: a check-then-act window made wide).
     */
    static final class DelayAfter {
        private DelayAfter() {
        }

        @Advice.OnMethodExit
        static void exit(@PlantId int id) {
            Faults.delay(id);
        }
    }

    /** mode=false: the body is skipped, and a skipped boolean method returns its default, false. */
    static final class False {
        private False() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        static boolean enter(@PlantId int id) {
            return Faults.hit(id);
        }

        @Advice.OnMethodExit
        static void exit(@Advice.Enter boolean planted,
                         @Advice.Return(readOnly = false) boolean returned) {
            if (planted) {
                returned = false;
            }
        }
    }

    /** mode=fail: the body runs; the future it returned is replaced by a failed one. */
    static final class Fail {
        private Fail() {
        }

        @Advice.OnMethodExit
        static void exit(@PlantId int id, @Advice.Origin Class<?> origin,
                         @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object returned) {
            if (Faults.hit(id)) {
                returned = Faults.failedFuture(id, origin);
            }
        }
    }

    /** mode=return_null: the body runs; the object it returned is replaced by null (reference return types). */
    static final class ReturnNull {
        private ReturnNull() {
        }

        @Advice.OnMethodExit
        static void exit(@PlantId int id,
                         @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object returned) {
            if (Faults.hit(id)) {
                returned = null;
            }
        }
    }

    /**
     * mode=return_empty: the body runs; what it returned is replaced by an empty value of the declared type
     * ({@link Faults#empty}: a list, set, map, or string).
     */
    static final class ReturnEmpty {
        private ReturnEmpty() {
        }

        @Advice.OnMethodExit
        static void exit(@PlantId int id, @Advice.Origin("#r") String declared,
                         @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object returned) {
            if (Faults.hit(id)) {
                returned = Faults.empty(declared);
            }
        }
    }
}
