package dev.rmqharness.patches.common;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.lang.instrument.ClassFileTransformer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.utility.JavaModule;
import org.junit.jupiter.api.Test;

/** What the agents' builder looks at: a class it is not told to patch is passed over by its name alone. */
class AgentsTest {
    /** A class to patch. */
    public static class Target {
    }

    private static final String TARGET = Target.class.getName();

    /** The builder's events, in order: "ignored NAME", "transformed NAME", "error NAME". */
    private static final class Events extends AgentBuilder.Listener.Adapter {
        final List<String> seen = new ArrayList<>();

        @Override
        public void onIgnored(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded) {
            seen.add("ignored " + type.getName());
        }

        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            seen.add("transformed " + type.getName());
        }

        @Override
        public void onError(String name, ClassLoader loader, JavaModule module, boolean loaded, Throwable error) {
            seen.add("error " + name);
        }
    }

    private static byte[] bytesOf(Class<?> type) throws Exception {
        String file = type.getName().substring(type.getName().lastIndexOf('.') + 1) + ".class";
        try (InputStream in = type.getResourceAsStream(file)) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buffer = new byte[4096];
            for (int n = in.read(buffer); n > 0; n = in.read(buffer)) {
                out.write(buffer, 0, n);
            }
            return out.toByteArray();
        }
    }

    private static ClassFileTransformer transformer(Events events) {
        return Agents.builder(TARGET)
            .with(events)
            .type(named(TARGET))
            .transform((builder, type, loader, module, domain) -> builder)
            .makeRaw();
    }

    @Test
    void anotherClassIsPassedOverWithoutReadingItsClassFile() throws Exception {
        Events events = new Events();
        // Not a class file: Byte Buddy's default rule (is it synthetic?) would parse it and fail.
        byte[] notAClass = {1, 2, 3};
        assertNull(transformer(events).transform(getClass().getClassLoader(), "org/example/Other", null, null,
            notAClass));
        assertEquals(Collections.singletonList("ignored org.example.Other"), events.seen);
    }

    @Test
    void theTargetIsTransformed() throws Exception {
        Events events = new Events();
        byte[] bytes = bytesOf(Target.class);
        transformer(events).transform(getClass().getClassLoader(), TARGET.replace('.', '/'), null, null, bytes);
        assertEquals(Collections.singletonList("transformed " + TARGET), events.seen);
    }
}
