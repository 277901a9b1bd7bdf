package dev.rmqharness.patches.common;

import static net.bytebuddy.matcher.ElementMatchers.any;
import static net.bytebuddy.matcher.ElementMatchers.isBootstrapClassLoader;
import static net.bytebuddy.matcher.ElementMatchers.namedOneOf;
import static net.bytebuddy.matcher.ElementMatchers.not;

import net.bytebuddy.agent.builder.AgentBuilder;

/** The Byte Buddy agent builder every agent here starts from. */
public final class Agents {
    private Agents() {
    }

    /**
     * A builder that looks only at the classes named {@code targets}, by name alone, and changes no class format.
     * Byte Buddy's default ignore rule asks whether each class is synthetic, which has it parse the class file of
     * every class the JVM loads (about 7,600 in a proxy hosting a broker) once per agent installed: that was most
     * of what the agents added to a broker JVM's start. Classes of the bootstrap loader stay ignored, as by default.
     */
    public static AgentBuilder builder(String... targets) {
        return new AgentBuilder.Default()
            .disableClassFormatChanges()
            .ignore(not(namedOneOf(targets))).or(any(), isBootstrapClassLoader())
            .with(AgentBuilder.Listener.StreamWriting.toSystemError().withErrorsOnly());
    }
}
