package dev.rmqharness.patches.loopback;

import static net.bytebuddy.matcher.ElementMatchers.isConstructor;
import static net.bytebuddy.matcher.ElementMatchers.isStatic;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import dev.rmqharness.patches.common.AgentLog;
import dev.rmqharness.patches.common.Agents;
import java.lang.instrument.Instrumentation;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.implementation.bytecode.assign.Assigner;

/**
 * Binds the listeners RocketMQ offers no bind-address setting for to the loopback address: the proxy's
 * gRPC server (grpc NettyServerBuilder.forPort), the proxy's remoting server (NettyServerConfig's
 * default bind address) and the broker's HA port (DefaultHAService's accept socket). For test rigs on
 * shared machines; it changes where sockets listen and nothing else.
 */
public final class LoopbackBindAgent {
    static final String NAME = "loopback-bind";
    static final String GRPC_BUILDER = "io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder";
    static final String SERVER_CONFIG = "org.apache.rocketmq.remoting.netty.NettyServerConfig";
    static final String HA_ACCEPT = "org.apache.rocketmq.store.ha.DefaultHAService$AcceptSocketService";

    private LoopbackBindAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        Agents.builder(GRPC_BUILDER, SERVER_CONFIG, HA_ACCEPT)
            .type(named(GRPC_BUILDER))
            .transform((b, type, loader, module, domain) -> b.visit(Advice.to(GrpcForPort.class)
                .on(named("forPort").and(isStatic()).and(takesArguments(int.class)))))
            .type(named(SERVER_CONFIG))
            .transform((b, type, loader, module, domain) -> b.visit(Advice.to(ServerConfigDefault.class)
                .on(isConstructor().and(takesArguments(0)))))
            .type(named(HA_ACCEPT))
            .transform((b, type, loader, module, domain) -> b.visit(Advice.to(HaBeginAccept.class)
                .on(named("beginAccept").and(takesArguments(0)))))
            .installOn(inst);
        AgentLog.info(NAME, "gRPC, remoting and HA listeners default to " + loopback().getHostAddress());
    }

    public static InetAddress loopback() {
        return InetAddress.getLoopbackAddress();
    }

    /** forPort(port) becomes forAddress(127.0.0.1:port). */
    public static final class GrpcForPort {
        private GrpcForPort() {
        }

        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static Object enter(@Advice.Origin Class<?> type, @Advice.Argument(0) int port) {
            try {
                return type.getMethod("forAddress", java.net.SocketAddress.class)
                    .invoke(null, new InetSocketAddress(LoopbackBindAgent.loopback(), port));
            } catch (ReflectiveOperationException | RuntimeException e) {
                AgentLog.once(NAME, "grpc", "gRPC stays on all interfaces: " + e);
                return null;
            }
        }

        @Advice.OnMethodExit
        public static void exit(@Advice.Enter Object replacement,
                                @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object builder) {
            if (replacement != null) {
                builder = replacement;
            }
        }
    }

    /** New NettyServerConfig objects start on loopback; a config file's bindAddress still wins. */
    public static final class ServerConfigDefault {
        private ServerConfigDefault() {
        }

        @Advice.OnMethodExit
        public static void exit(@Advice.This Object config) {
            try {
                config.getClass().getMethod("setBindAddress", String.class)
                    .invoke(config, LoopbackBindAgent.loopback().getHostAddress());
            } catch (ReflectiveOperationException | RuntimeException e) {
                AgentLog.once(NAME, "remoting", "remoting servers keep their default bind address: " + e);
            }
        }
    }

    /** The HA accept socket listens on a wildcard address built from the port alone. */
    public static final class HaBeginAccept {
        private HaBeginAccept() {
        }

        @Advice.OnMethodEnter
        public static void enter(@Advice.This Object service) {
            try {
                Class<?> c = service.getClass();
                Field f = null;
                for (; c != null && f == null; c = c.getSuperclass()) {
                    try {
                        f = c.getDeclaredField("socketAddressListen");
                    } catch (NoSuchFieldException ignored) {
                        // declared on a superclass
                    }
                }
                if (f == null) {
                    AgentLog.once(NAME, "ha", "HA port stays on all interfaces: no socketAddressListen field");
                    return;
                }
                f.setAccessible(true);
                Object current = f.get(service);
                if (current instanceof InetSocketAddress && ((InetSocketAddress) current).getAddress().isAnyLocalAddress()) {
                    f.set(service, new InetSocketAddress(LoopbackBindAgent.loopback(),
                        ((InetSocketAddress) current).getPort()));
                }
            } catch (ReflectiveOperationException | RuntimeException e) {
                AgentLog.once(NAME, "ha", "HA port stays on all interfaces: " + e);
            }
        }
    }
}
