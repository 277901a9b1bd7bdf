package dev.rmqharness.patches.fault;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
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
        assertEquals(0, s.delayMs);
        assertNull(s.thread);
        assertEquals("mode fail, calls 1, skip 0, after_ms 0", s.settings());
    }

    @Test
    void aDelayPlantWithAThreadFilter() {
        FaultOptions.Spec s = FaultOptions.parse("method=org.apache.rocketmq.broker.pop.PopConsumerCache#cleanupRecords,"
            + " mode=delay, delay_ms=3000, calls=5, thread=PopConsumerCache").get(0);
        assertEquals(FaultOptions.Mode.DELAY, s.mode);
        assertEquals(3000, s.delayMs);
        assertEquals(5, s.calls);
        assertEquals("PopConsumerCache", s.thread);
        assertEquals("mode delay, delay_ms 3000, calls 5, skip 0, after_ms 0, thread PopConsumerCache", s.settings());
        assertTrue(s.onThread("PopConsumerCache"));
        assertTrue(s.onThread("xPopConsumerCache-1"));
        assertFalse(s.onThread("main"));
        assertFalse(s.onThread(null));

        assertEquals(600000, FaultOptions.parse("method=a.B#m,mode=delay,delay_ms=600000").get(0).delayMs);
        assertEquals(1, FaultOptions.parse("method=a.B#m,mode=delay,delay_ms=1").get(0).delayMs);
        FaultOptions.Spec thrown = FaultOptions.parse("method=a.B#m,mode=throw,thread=Revive Service").get(0);
        assertEquals("Revive Service", thrown.thread);
        assertEquals("mode throw, calls 1, skip 0, after_ms 0, thread Revive Service", thrown.settings());
        assertTrue(FaultOptions.parse("method=a.B#m,mode=fail").get(0).onThread("anything"));
        assertEquals(FaultOptions.Mode.RETURN_NULL, FaultOptions.parse("method=a.B#m,mode=return_null").get(0).mode);
        FaultOptions.Spec empty = FaultOptions.parse("method=a.B#m,mode=return_empty,thread=PopConsumerService").get(0);
        assertEquals("mode return_empty, calls 1, skip 0, after_ms 0, thread PopConsumerService", empty.settings());
        FaultOptions.Spec armed = FaultOptions.parse("method=a.B#m,mode=throw,arm_file=/tmp/x/plants-armed").get(0);
        assertEquals("/tmp/x/plants-armed", armed.armFile);
        assertTrue(armed.settings().endsWith(", armed by /tmp/x/plants-armed"));
        assertThrows(IllegalArgumentException.class, () -> FaultOptions.parse("method=a.B#m,mode=throw,arm_file="));
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
    void anExceptionAndItsCode() {
        String mq = "org.apache.rocketmq.client.exception.MQBrokerException";
        FaultOptions.Spec s = FaultOptions.parse("method=org.apache.rocketmq.proxy.processor.ConsumerProcessor"
            + "#changeInvisibleTime,mode=fail,exception=" + mq + ",code=1,thread=GrpcConsumerThreadPool").get(0);
        assertEquals(FaultOptions.Mode.FAIL, s.mode);
        assertEquals(mq, s.exception);
        assertEquals(Integer.valueOf(1), s.code);
        assertEquals("mode fail, exception " + mq + "(code 1), calls 1, skip 0, after_ms 0, thread "
            + "GrpcConsumerThreadPool", s.settings());

        FaultOptions.Spec plain = FaultOptions.parse("method=a.B#m, mode=throw, exception=a.B$Failed").get(0);
        assertEquals("a.B$Failed", plain.exception);
        assertNull(plain.code);
        assertEquals("mode throw, exception a.B$Failed, calls 1, skip 0, after_ms 0", plain.settings());
        assertEquals(Integer.valueOf(-2147483648),
            FaultOptions.parse("method=a.B#m,mode=throw,code=-2147483648,exception=E").get(0).code);
        assertEquals(Integer.valueOf(2147483647),
            FaultOptions.parse("method=a.B#m,mode=fail,exception=E,code=2147483647").get(0).code);
        FaultOptions.Spec none = FaultOptions.parse("method=a.B#m,mode=fail").get(0);
        assertNull(none.exception);
        assertNull(none.code);
    }

    @Test
    void badExceptionsSayWhatIsWrong() {
        String m = "method=a.B#m";
        assertBad(m + ",mode=false,exception=a.E", "option exception is only for mode=throw or mode=fail (not mode=false)");
        assertBad(m + ",mode=delay,delay_ms=5,exception=a.E", "only for mode=throw or mode=fail (not mode=delay)");
        assertBad(m + ",mode=throw,code=3", "option code needs exception=<Class>");
        assertBad(m + ",mode=false,code=3", "option code needs exception=<Class>");
        assertBad(m + ",mode=throw,exception=", "malformed option 'exception='");
        assertBad(m + ",mode=throw,exception=a..E", "malformed option 'exception=a..E'");
        assertBad(m + ",mode=throw,exception=1a.E", "malformed option 'exception=1a.E'");
        assertBad(m + ",mode=throw,exception=a.E(int)", "malformed option 'exception=a.E(int)'");
        assertBad(m + ",mode=throw,exception=a.E#x", "malformed option 'exception=a.E#x'");
        assertBad(m + ",mode=throw,exception=a.E,code=", "malformed option 'code='");
        assertBad(m + ",mode=throw,exception=a.E,code=1.5", "malformed option 'code=1.5'");
        assertBad(m + ",mode=throw,exception=a.E,code=0x10", "malformed option 'code=0x10'");
        assertBad(m + ",mode=throw,exception=a.E,code=2147483648", "malformed option 'code=2147483648'");
        assertBad(m + ",mode=throw,exception=a.E,code=-2147483649", "malformed option 'code=-2147483649'");
        assertBad(m + ",mode=throw,exception=a.E,code=99999999999", "malformed option 'code=99999999999'");
        assertBad(m + ",mode=throw,exception=a.E,exception=b.E", "exception given twice");
        assertBad(m + ",mode=throw,exception=a.E,code=1,code=2", "code given twice");
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
        assertBad(m + ",mode=fail,delay=5", "unknown option 'delay'");
        assertBad(m + ",mode=fail,delay_ms=5", "option delay_ms is only for mode=delay or mode=delay_after (not mode=fail)");
        assertBad(m + ",mode=throw,delay_ms=5", "option delay_ms is only for mode=delay");
        assertBad(m + ",mode=delay", "missing option delay_ms=D (required with mode=delay)");
        assertBad(m + ",mode=delay_after", "missing option delay_ms=D (required with mode=delay_after)");
        assertBad(m + ",mode=delay,delay_ms=0", "delay_ms=0");
        assertBad(m + ",mode=delay,delay_ms=600001", "delay_ms=600001");
        assertBad(m + ",mode=delay,delay_ms=", "delay_ms=");
        assertBad(m + ",mode=delay,delay_ms=1s", "delay_ms=1s");
        assertBad(m + ",mode=delay,delay_ms=5,delay_ms=6", "delay_ms given twice");
        assertBad(m + ",mode=delay,delay_ms=5,thread=a,thread=b", "thread given twice");
        assertBad(m + ",mode=fail,thread=", "malformed option 'thread='");
        assertBad(m + ",mode=fail,thread=  ", "malformed option 'thread='");
        assertBad(m + ",mode=fail,thread=a=b", "malformed option 'thread=a=b'");
        assertBad(m + ",mode=fail,thread=" + new String(new char[101]).replace('\0', 'x'), "1 to 100 characters");
        assertBad(m + ",mode=fail,thread=a,b", "malformed option 'b'");
        assertBad(m + ",mode=Delay,delay_ms=5", "mode=Delay");
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
