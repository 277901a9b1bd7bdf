package dev.rmqharness.patches.probe;

import com.sun.net.httpserver.HttpServer;
import dev.rmqharness.patches.common.AgentLog;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/** /metrics over the JDK's own HTTP server (no dependencies inside the broker). */
final class MetricsServer {
    private MetricsServer() {
    }

    static HttpServer start(String host, int port) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 0);
        server.createContext("/metrics", exchange -> {
            byte[] body = ProbeState.render().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream os = exchange.getResponseBody()) {
                os.write(body);
            }
        });
        server.setExecutor(Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "pop-wakeup-probe-http");
            t.setDaemon(true);
            return t;
        }));
        server.start();
        AgentLog.info(WakeupProbeAgent.NAME, "serving http://" + host + ":" + port + "/metrics");
        return server;
    }
}
