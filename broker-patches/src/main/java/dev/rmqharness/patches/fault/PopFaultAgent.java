package dev.rmqharness.patches.fault;

import static net.bytebuddy.matcher.ElementMatchers.isAbstract;
import static net.bytebuddy.matcher.ElementMatchers.isNative;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.namedOneOf;
import static net.bytebuddy.matcher.ElementMatchers.not;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Agents;
import java.lang.instrument.Instrumentation;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.method.MethodList;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.utility.JavaModule;

/**
 * A fault injector, never a fix: plants a failure (or a delay) in a named broker method so the harness can
 * reproduce upstream defects that follow a failure (e.g. apache/rocketmq#10985, revive losing a retry after an
 * asynchronous read of the original message failed) or a slow step. Arguments: {@link FaultOptions}.
 *
 * <p>Every overload of the method's name that the class declares (with a body, and for {@code fail} returning
 * a supertype of CompletableFuture, for {@code false} returning boolean, for {@code return_null} an object, for
 * {@code return_empty} a List, Collection, Iterable, Set, Map or String) gets the plant's advice
 * ({@link FaultAdvice}); the counters are {@link Faults}. Lines on the broker's output, prefixed
 * {@code [pop-fault] } like every agent's: {@code waiting for Class#method} at premain (so the agent is never
 * silent), {@code installed: Class#method (k overloads), mode m[, delay_ms D][, exception X[(code C)]], calls N, skip M,
 * after_ms T[, thread S]} once the class was transformed, {@code not installed: ...} when the options or the class do not fit (the
 * harness treats that as an error), {@code planted failure k/N in Class#method} per failed call (and once per plant
 * {@code planted failure: cannot make X(...): why; threw RuntimeException instead} when exception=X cannot be made),
 * {@code planted delay k/N of D ms in Class#method (thread name)} per delayed call.
 */
public final class PopFaultAgent {
    static final String NAME = "pop-fault";
    /** Installed lines waiting for their class's transformation to succeed, by class name. */
    private static final Map<String, List<String>> PENDING = new ConcurrentHashMap<>();

    private PopFaultAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        List<FaultOptions.Spec> specs;
        try {
            specs = FaultOptions.parse(args);
        } catch (IllegalArgumentException e) {
            AgentLog.info(NAME, "not installed: " + e.getMessage() + "; no failure is planted");
            return;
        }
        try {
            Faults.install(specs);
            Set<String> classes = new LinkedHashSet<>();
            for (FaultOptions.Spec spec : specs) {
                classes.add(spec.className);
                AgentLog.info(NAME, "waiting for " + spec.className + " to load (plant " + spec.target() + ", "
                    + spec.settings() + ")");
            }
            String[] targets = classes.toArray(new String[0]);
            Agents.builder(targets)
                .with(new Report())
                .type(namedOneOf(targets))
                .transform((builder, type, loader, module, domain) -> {
                    List<String> installed = new ArrayList<>();
                    PENDING.put(type.getName(), installed);
                    for (int id = 0; id < specs.size(); id++) {
                        FaultOptions.Spec spec = specs.get(id);
                        if (!spec.className.equals(type.getName())) {
                            continue;
                        }
                        Plan plan = plan(type, spec);
                        if (plan.refusal != null) {
                            AgentLog.once(NAME, "refused/" + id, "not installed: " + plan.refusal);
                            continue;
                        }
                        builder = builder.visit(advice(spec, id));
                        installed.add(plan.installed);
                    }
                    return builder;
                })
                .installOn(inst);
        } catch (RuntimeException | LinkageError e) {
            AgentLog.info(NAME, "not installed: " + e + "; no failure is planted");
        }
    }

    /** What a plant does to a class: the installed line, or why it is refused. */
    static final class Plan {
        final String installed;
        final String refusal;
        final int overloads;

        private Plan(String installed, String refusal, int overloads) {
            this.installed = installed;
            this.refusal = refusal;
            this.overloads = overloads;
        }
    }

    /** Which methods of {@code type} the plant takes, and the line saying so (or why none). */
    static Plan plan(TypeDescription type, FaultOptions.Spec spec) {
        MethodList<MethodDescription.InDefinedShape> named = type.getDeclaredMethods().filter(named(spec.methodName));
        if (named.isEmpty()) {
            return new Plan(null, type.getName() + " has no method " + spec.methodName, 0);
        }
        MethodList<MethodDescription.InDefinedShape> bodies = named.filter(not(isAbstract()).and(not(isNative())));
        if (bodies.isEmpty()) {
            return new Plan(null, spec.target() + " has no body to plant a failure in (abstract or native)", 0);
        }
        MethodList<MethodDescription.InDefinedShape> taken = bodies.filter(targets(spec));
        if (taken.isEmpty()) {
            String want;
            switch (spec.mode) {
                case FAIL:
                    want = "a CompletableFuture";
                    break;
                case RETURN_NULL:
                    want = "an object";
                    break;
                case RETURN_EMPTY:
                    want = "a List, Collection, Iterable, Set, Map or String";
                    break;
                default:
                    want = "boolean";
            }
            return new Plan(null, spec.target() + " does not return " + want + " (mode " + spec.mode.word() + ")", 0);
        }
        int k = taken.size();
        String line = "installed: " + spec.target() + " (" + k + (k == 1 ? " overload" : " overloads") + "), "
            + spec.settings();
        int left = named.size() - k;
        if (left > 0) {
            line += "; " + left + " other overload" + (left == 1 ? "" : "s")
                + " of that name run untouched (abstract, native, or of another return type)";
        }
        return new Plan(line, null, k);
    }

    /** The methods a plant's advice goes on: the name, a body, and for fail and false the return type. */
    static ElementMatcher.Junction<MethodDescription> targets(FaultOptions.Spec spec) {
        ElementMatcher.Junction<MethodDescription> m = named(spec.methodName).<MethodDescription>and(not(isAbstract()))
            .and(not(isNative()));
        switch (spec.mode) {
            case FAIL:
                return m.and(PopFaultAgent::returnsAFuture);
            case FALSE:
                return m.and(md -> md.getReturnType().represents(boolean.class));
            case RETURN_NULL:
                return m.and(md -> !md.getReturnType().isPrimitive());
            case RETURN_EMPTY:
                return m.and(md -> Faults.EMPTIABLE.contains(md.getReturnType().asErasure().getName()));
            default:
                return m;
        }
    }

    /** Whether a CompletableFuture can be returned in place of this method's result (Object excepted). */
    static boolean returnsAFuture(MethodDescription method) {
        TypeDescription returned = method.getReturnType().asErasure();
        return !returned.represents(Object.class) && !returned.isPrimitive()
            && returned.isAssignableFrom(CompletableFuture.class);
    }

    /** The plant's advice on its methods, bound to plant {@code id} in {@link Faults}. */
    static AsmVisitorWrapper advice(FaultOptions.Spec spec, int id) {
        Class<?> mode;
        switch (spec.mode) {
            case FAIL:
                mode = FaultAdvice.Fail.class;
                break;
            case FALSE:
                mode = FaultAdvice.False.class;
                break;
            case DELAY:
                mode = FaultAdvice.Delay.class;
                break;
            case DELAY_AFTER:
                mode = FaultAdvice.DelayAfter.class;
                break;
            case RETURN_NULL:
                mode = FaultAdvice.ReturnNull.class;
                break;
            case RETURN_EMPTY:
                mode = FaultAdvice.ReturnEmpty.class;
                break;
            default:
                mode = FaultAdvice.Throw.class;
        }
        return Advice.withCustomMapping().bind(FaultAdvice.PlantId.class, id).to(mode).on(targets(spec));
    }

    /** Prints a class's installed lines once its transformation succeeded; a failed one says not installed. */
    private static final class Report extends AgentBuilder.Listener.Adapter {
        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            List<String> lines = PENDING.remove(type.getName());
            if (lines != null) {
                for (String line : lines) {
                    AgentLog.once(NAME, line, line);
                }
            }
        }

        @Override
        public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded,
                            Throwable error) {
            if (PENDING.remove(typeName) != null) {
                AgentLog.once(NAME, "failed/" + typeName, "not installed: " + typeName + " could not be transformed ("
                    + error + "); no failure is planted there");
            }
        }
    }
}
