package dev.rmqharness.patches.probe;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Agents;
import java.io.IOException;
import java.lang.instrument.Instrumentation;
import java.util.HashMap;
import java.util.Map;
import net.bytebuddy.asm.Advice;

/**
 * Observes pop long polling without changing it: counts wakeups of suspended pop requests per
 * (topic, group, cause) and the wakeups that found nothing and suspended again, served in Prometheus
 * text format on 127.0.0.1. Agent arguments: {@code port=N[,host=127.0.0.1]}.
 *
 * <p>List it after any agent that changes the same methods: the last agent's advice wraps the others,
 * so the probe then sees what the patched code does.
 */
public final class WakeupProbeAgent {
    static final String NAME = "pop-wakeup-probe";
    static final String TARGET = "org.apache.rocketmq.broker.longpolling.PopLongPollingService";
    static final String PROCESSOR = "org.apache.rocketmq.broker.processor.PopMessageProcessor";

    private WakeupProbeAgent() {
    }

    public static void premain(String args, Instrumentation inst) throws IOException {
        Map<String, String> opts = parse(args);
        int port = Integer.parseInt(opts.getOrDefault("port", "5558"));
        String host = opts.getOrDefault("host", "127.0.0.1");
        MetricsServer.start(host, port);
        Agents.builder(TARGET, PROCESSOR)
            .type(named(TARGET))
            .transform((builder, type, loader, module, domain) -> {
                AgentLog.once(NAME, "installed", "observing " + TARGET + "; metrics on http://" + host + ":" + port
                    + "/metrics");
                return builder
                    .visit(Advice.to(RetryNotifyAdvice.class)
                        .on(named("notifyMessageArrivingWithRetryTopic").and(takesArguments(7))))
                    .visit(Advice.to(NotifyAdvice.class).on(named("notifyMessageArriving").and(takesArguments(9))))
                    .visit(Advice.to(WakeUpAdvice.class).on(named("wakeUp").and(takesArguments(2))))
                    .visit(Advice.to(PollingAdvice.class).on(named("polling").and(takesArguments(5))));
            })
            .type(named(PROCESSOR))
            .transform((builder, type, loader, module, domain) -> {
                AgentLog.once(NAME, "installed-reads", "observing " + PROCESSOR + ": which retry topic each pop reads");
                return builder
                    .visit(Advice.to(ProcessAdvice.class).on(named("processRequest").and(takesArguments(2))))
                    .visit(Advice.to(RetryReadAdvice.class).on(named("popMsgFromTopic").and(takesArguments(13))
                        .and(takesArgument(0, String.class))));
            })
            .installOn(inst);
    }

    static Map<String, String> parse(String args) {
        Map<String, String> out = new HashMap<>();
        if (args == null) {
            return out;
        }
        for (String part : args.split(",")) {
            int eq = part.indexOf('=');
            if (eq > 0) {
                out.put(part.substring(0, eq).trim(), part.substring(eq + 1).trim());
            }
        }
        return out;
    }

    public static final class RetryNotifyAdvice {
        private RetryNotifyAdvice() {
        }

        @Advice.OnMethodEnter
        public static String[] enter(@Advice.Argument(0) String topic) {
            return WakeContext.enter(WakeContext.RETRY, topic);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.Enter String[] previous) {
            WakeContext.restore(previous);
        }
    }

    public static final class NotifyAdvice {
        private NotifyAdvice() {
        }

        @Advice.OnMethodEnter
        public static String[] enter(@Advice.Argument(8) Object callback) {
            return WakeContext.enterIfNone(callback != null ? WakeContext.CALLBACK : WakeContext.MESSAGE);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.Enter String[] previous) {
            WakeContext.restore(previous);
        }
    }

    public static final class WakeUpAdvice {
        private WakeUpAdvice() {
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.Argument(0) Object request, @Advice.Return boolean woke) {
            ProbeState.onWakeUp(request, woke);
        }
    }

    public static final class PollingAdvice {
        private PollingAdvice() {
        }

        @Advice.OnMethodEnter
        public static void enter(@Advice.Argument(1) Object command, @Advice.Argument(2) Object header) {
            ProbeState.onPollingStart(command, header);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.Argument(1) Object command, @Advice.Return Object result) {
            ProbeState.onPollingResult(command, result);
        }
    }

    public static final class ProcessAdvice {
        private ProcessAdvice() {
        }

        @Advice.OnMethodEnter
        public static void enter() {
            ProbeState.onProcessStart();
        }
    }

    /** On exit: the topic argument then is the one read, after any patch agent's advice changed it. */
    public static final class RetryReadAdvice {
        private RetryReadAdvice() {
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.This Object processor, @Advice.Argument(0) String topic,
                                @Advice.Argument(1) boolean isRetry, @Advice.Argument(3) Object header) {
            if (isRetry) {
                ProbeState.onRetryRead(processor, topic, header);
            }
        }
    }
}
