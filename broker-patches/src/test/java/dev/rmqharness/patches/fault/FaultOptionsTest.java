package dev.rmqharness.patches.fault;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class FaultOptionsTest {
    private static final String REVIVE = "org.apache.rocketmq.broker.processor.PopReviveService";

    @Test
    void aPlantWithDefaults() {
        List<FaultOptions.Spec> specs = FaultOptions.parse("method=" + REVIVE + "#getBizMessage,mode=fail");
        assertEquals(1, specs.size());
        FaultOptions.Spec s = specs.get(0);
        assertEquals(REVIVE, s.className);
        assertEquals("getBizMessage", s.methodName);
        assertEquals(FaultOptions.Mode.FAIL, s.mode);
        assertEquals(1, s.calls);
        assertEquals(0, s.skip);
        assertEquals(0, s.afterMs);
        assertEquals("mode fail, calls 1, skip 0, after_ms 0", s.settings());
    }

    @Test
    void everyOptionAndSeveralPlants() {
        List<FaultOptions.Spec> specs = FaultOptions.parse(
            " method=" + REVIVE + "#getBizMessage, mode=fail, calls=3, after_ms=5000 ;"
                + "mode=false,method=org.apache.rocketmq.broker.pop.PopConsumerService#reviveRetry,skip=2,calls=10;"
                + "method=a.B$Inner#m_1,mode=throw");
        assertEquals(3, specs.size());
        assertEquals(3, specs.get(0).calls);
        assertEquals(5000, specs.get(0).afterMs);
        assertEquals(FaultOptions.Mode.FALSE, specs.get(1).mode);
        assertEquals("reviveRetry", specs.get(1).methodName);
        assertEquals(2, specs.get(1).skip);
        assertEquals(10, specs.get(1).calls);
        assertEquals(FaultOptions.Mode.THROW, specs.get(2).mode);
        assertEquals("a.B$Inner#m_1", specs.get(2).target());
    }

    @Test
    void badOptionsSayWhatIsWrong() {
        String m = "method=" + REVIVE + "#getBizMessage";
        assertBad(null, "no plant");
        assertBad("  ", "no plant");
        assertBad("mode=fail", "missing option method");
        assertBad(m, "missing option mode");
        assertBad(m + ",mode=explode", "mode=explode");
        assertBad(m + ",mode=FAIL", "mode=FAIL");
        assertBad(m + ",mode=fail,calls=0", "calls=0");
        assertBad(m + ",mode=fail,calls=-1", "calls=-1");
        assertBad(m + ",mode=fail,calls=2x", "calls=2x");
        assertBad(m + ",mode=fail,calls=99999999999999999999", "calls=");
        assertBad(m + ",mode=fail,calls=", "calls=");
        assertBad(m + ",mode=fail,skip=-3", "skip=-3");
        assertBad(m + ",mode=fail,after_ms=1.5", "after_ms=1.5");
        assertBad(m + ",mode=fail,after_ms=86400001", "after_ms=86400001");
        assertBad(m + ",mode=fail,delay_ms=5", "unknown option 'delay_ms'");
        assertBad(m + ",mode=fail,mode=throw", "mode given twice");
        assertBad(m + ",mode=fail,", "malformed option ''");
        assertBad(m + ",mode=fail,calls", "malformed option 'calls'");
        assertBad(m + ",mode=fail;", "plant 2");
        assertBad(m + ",mode=fail;;" + m + ",mode=throw", "plant 2");
        assertBad("method=" + REVIVE + ",mode=fail", "expected method=<fully.qualified.Class>#<methodName>");
        assertBad("method=#getBizMessage,mode=fail", "method=#getBizMessage");
        assertBad("method=" + REVIVE + "#,mode=fail", "malformed option 'method=");
        assertBad("method=a..B#m,mode=fail", "a..B#m");
        assertBad("method=a.B#m(int),mode=fail", "a.B#m(int)");
        assertBad("method=a.B#<init>,mode=throw", "<init>");
    }

    private static void assertBad(String args, String said) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FaultOptions.parse(args),
            String.valueOf(args));
        assertTrue(e.getMessage().contains(said), e.getMessage() + " does not say " + said);
    }
}
