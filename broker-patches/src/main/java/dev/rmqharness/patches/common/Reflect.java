package dev.rmqharness.patches.common;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

/** Small reflective reads of broker objects whose fields are private at 5.3.3. */
public final class Reflect {
    private Reflect() {
    }

    public static Field field(Class<?> type, String name) throws NoSuchFieldException {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f;
            } catch (NoSuchFieldException ignored) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(type.getName() + "." + name);
    }

    public static Method method(Class<?> type, String name, Class<?>... params) throws NoSuchMethodException {
        Method m = type.getMethod(name, params);
        m.setAccessible(true);
        return m;
    }

    /** Call a public no-argument getter by name; null when absent or failing. */
    public static Object get(Object target, String getter) {
        if (target == null) {
            return null;
        }
        try {
            return target.getClass().getMethod(getter).invoke(target);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** A copy of {@code topic -> (group -> any)} as {@code topic -> groups}. */
    @SuppressWarnings("unchecked")
    public static Map<String, Collection<String>> pollers(Object topicCidMap) {
        Map<String, Collection<String>> out = new HashMap<>();
        if (!(topicCidMap instanceof Map)) {
            return out;
        }
        for (Map.Entry<String, ?> e : ((Map<String, ?>) topicCidMap).entrySet()) {
            Object cids = e.getValue();
            if (cids instanceof Map) {
                out.put(e.getKey(), ((Map<String, ?>) cids).keySet());
            }
        }
        return out;
    }
}
