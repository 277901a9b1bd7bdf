package dev.rmqharness.patches.delay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class DelayOptionsTest {
    @Test
    void goodValues() {
        assertEquals(50, DelayOptions.parse("delay_ms=50"));
        assertEquals(200, DelayOptions.parse(" delay_ms = 200 "));
        assertEquals(DelayOptions.MAX_DELAY_MS, DelayOptions.parse("delay_ms=" + DelayOptions.MAX_DELAY_MS));
    }

    @Test
    void zeroMeansInstallWithoutDelay() {
        assertEquals(0, DelayOptions.parse("delay_ms=0"));
    }

    @Test
    void missingOptionIsNamed() {
        for (String args : new String[] {null, "", "  "}) {
            String message = assertThrows(IllegalArgumentException.class, () -> DelayOptions.parse(args)).getMessage();
            assertTrue(message.startsWith("missing option delay_ms"), message);
        }
    }

    @Test
    void malformedOptionIsNamed() {
        for (String args : new String[] {"delay_ms=", "delay_ms", "delay_ms=abc", "delay_ms=-5", "delay_ms=+5",
            "delay_ms=1.5", "delay_ms=99999999999999999999", "delay_ms=" + (DelayOptions.MAX_DELAY_MS + 1)}) {
            String message = assertThrows(IllegalArgumentException.class, () -> DelayOptions.parse(args)).getMessage();
            assertTrue(message.startsWith("malformed option '" + args + "'"), message);
        }
    }

    @Test
    void unknownOrRepeatedOptionsAreRejected() {
        String unknown = assertThrows(IllegalArgumentException.class, () -> DelayOptions.parse("delay=50")).getMessage();
        assertTrue(unknown.contains("unknown option 'delay=50'"), unknown);
        String extra = assertThrows(IllegalArgumentException.class,
            () -> DelayOptions.parse("delay_ms=50,port=1")).getMessage();
        assertTrue(extra.contains("'port=1'"), extra);
        String twice = assertThrows(IllegalArgumentException.class,
            () -> DelayOptions.parse("delay_ms=50,delay_ms=60")).getMessage();
        assertTrue(twice.contains("given twice"), twice);
    }
}
