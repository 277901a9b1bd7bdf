package dev.rmqharness.patches.common;

import static net.bytebuddy.matcher.ElementMatchers.named;

import java.lang.instrument.Instrumentation;
import java.util.function.Function;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.description.type.TypeDescription;

/** How a fix agent installs: on one broker class, only when it has the shape the advice expects. */
public final class Patch {
    private Patch() {
    }

    /**
     * Advise {@code target} with {@code advice}; a class without the expected shape ({@code incompatibility}
     * names what is missing) is left alone with one line saying the broker runs unpatched.
     */
    public static void install(Instrumentation inst, String agent, String target,
                               Function<TypeDescription, String> incompatibility, String what,
                               AsmVisitorWrapper advice) {
        Agents.builder(target)
            .type(named(target))
            .transform((builder, type, loader, module, domain) -> {
                String missing = incompatibility.apply(type);
                if (missing != null) {
                    AgentLog.once(agent, "incompatible", "not installed: " + target + " " + missing
                        + "; the broker runs unpatched");
                    return builder;
                }
                AgentLog.once(agent, "installed", "installed on " + target + ": " + what);
                return builder.visit(advice);
            })
            .installOn(inst);
    }
}
