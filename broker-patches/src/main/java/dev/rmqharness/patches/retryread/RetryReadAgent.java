package dev.rmqharness.patches.retryread;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.Patch;
import java.lang.instrument.Instrumentation;
import net.bytebuddy.asm.Advice;

/**
 * The fix for retries that wait a whole long poll on brokers with V2 retry topics: with
 * {@code enableRetryTopicV2} and {@code retrieveMessageFromPopRetryTopicV1} both on (the second is the
 * default), each pop reads the V1 or the V2 retry topic by a coin and counts only the one it read before
 * deciding to suspend. A request that reads the empty V1 topic while its retries sit in the V2 one
 * suspends with nothing to wake it. This agent makes the pop read the retry topic that has messages:
 * when the coin picked a retry topic with no backlog and the other one has some, it reads the other.
 * One retry type per response, as upstream requires, and with both or neither holding messages, the
 * coin decides as before.
 */
public final class RetryReadAgent {
    static final String NAME = "pop-retry-read";
    static final String TARGET = "org.apache.rocketmq.broker.processor.PopMessageProcessor";
    static final String METHOD = "popMsgFromTopic";
    static final int ARITY = 13;

    private RetryReadAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        Patch.install(inst, NAME, TARGET, RetryRead::incompatibility,
            "a pop reads the retry topic (V1 or V2) that has messages instead of a coin's pick",
            Advice.to(ReadAdvice.class).on(named(METHOD).and(takesArguments(ARITY)).and(takesArgument(0, String.class))));
    }

    /** Inlined into PopMessageProcessor.popMsgFromTopic(String topic, boolean isRetry, ..., header as the 4th, ...). */
    public static final class ReadAdvice {
        private ReadAdvice() {
        }

        @Advice.OnMethodEnter
        public static void enter(@Advice.This Object processor,
                                 @Advice.Argument(value = 0, readOnly = false) String topic,
                                 @Advice.Argument(1) boolean isRetry,
                                 @Advice.Argument(3) Object requestHeader) {
            if (isRetry) {
                topic = RetryRead.choose(processor, topic, requestHeader);
            }
        }
    }
}
