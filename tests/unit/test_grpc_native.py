"""The native gRPC driver against an in-process fake proxy on 127.0.0.1 (pure logic: no broker, no JVM): the
settings handshake, receive/ack/nack with receipt handles, and the settings sent again after a proxy restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures

import gevent
import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol import service_pb2_grpc as rpc

from harness.client import grpc_native
from harness.client.driver import NotReady
from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import ReceiveOptions

OK = pb.Status(code=pb.Code.OK, message="OK")
LOST = 'Cannot invoke "apache.rocketmq.v2.Settings.getSubscription()" because "settings" is null'


class FakeProxy(rpc.MessagingServiceServicer):
    """What the proxy does with a client's settings, and a queue of messages to hand out."""

    def __init__(self) -> None:
        self.settings: dict[str, pb.Settings] = {}
        self.headers: list[dict[str, str]] = []
        self.inbox: list[pb.Message] = []
        self.acked: list[str] = []
        self.changed: list[tuple[str, int]] = []
        self.renewed: list[bool] = []  # each receive's auto_renew
        self.remaining: list[float | None] = []  # each receive's time left by its deadline (None: it had none)

    def _client(self, context: grpc.ServicerContext) -> str:
        h = dict(context.invocation_metadata())
        self.headers.append(h)
        return h["x-mq-client-id"]

    def Telemetry(self, request_iterator: Iterator, context: grpc.ServicerContext) -> Iterator:  # noqa: N802
        cid = self._client(context)
        for command in request_iterator:
            self.settings[cid] = command.settings
            yield svc.TelemetryCommand(status=OK, settings=command.settings)

    def Heartbeat(self, request, context):  # noqa: N802
        if self._client(context) not in self.settings:
            return svc.HeartbeatResponse(status=pb.Status(code=pb.Code.UNRECOGNIZED_CLIENT_TYPE, message="none"))
        return svc.HeartbeatResponse(status=OK)

    def QueryRoute(self, request, context):  # noqa: N802
        self._client(context)
        q = pb.MessageQueue(topic=request.topic, id=0, permission=pb.Permission.READ_WRITE,
                            broker=pb.Broker(name="broker-a", id=0))
        return svc.QueryRouteResponse(status=OK, message_queues=[q])

    def ReceiveMessage(self, request, context):  # noqa: N802
        self.remaining.append(context.time_remaining())
        self.renewed.append(request.auto_renew)
        if self._client(context) not in self.settings:
            yield svc.ReceiveMessageResponse(status=pb.Status(code=pb.Code.INTERNAL_SERVER_ERROR, message=LOST))
            return
        batch, self.inbox = self.inbox[:request.batch_size], self.inbox[request.batch_size:]
        yield svc.ReceiveMessageResponse(status=OK if batch else pb.Status(code=pb.Code.MESSAGE_NOT_FOUND))
        for m in batch:
            yield svc.ReceiveMessageResponse(message=m)

    def AckMessage(self, request, context):  # noqa: N802
        self._client(context)
        self.acked += [e.receipt_handle for e in request.entries]
        return svc.AckMessageResponse(status=OK, entries=[
            svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=OK)
            for e in request.entries])

    def ChangeInvisibleDuration(self, request, context):  # noqa: N802
        self._client(context)
        self.changed.append((request.receipt_handle, request.invisible_duration.seconds))
        return svc.ChangeInvisibleDurationResponse(status=OK, receipt_handle=request.receipt_handle + "-2")

    def SendMessage(self, request, context):  # noqa: N802
        self._client(context)
        m = request.messages[0]
        return svc.SendMessageResponse(status=OK, entries=[svc.SendResultEntry(status=OK,
                                                                               message_id=m.system_properties.message_id)])

    def NotifyClientTermination(self, request, context):  # noqa: N802
        self.settings.pop(self._client(context), None)
        return svc.NotifyClientTerminationResponse(status=OK)


def _serve(fake: FakeProxy, port: int = 0) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    rpc.add_MessagingServiceServicer_to_server(fake, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


def _message(handle: str, attempt: int = 1) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name="T"), body=b"{}")
    sp = m.system_properties
    sp.message_id, sp.receipt_handle, sp.delivery_attempt = f"id-{handle}", handle, attempt
    sp.store_timestamp.FromMilliseconds(1_795_327_650_162)
    sp.born_timestamp.FromMilliseconds(1_795_327_650_000)
    return m


def _until(check, timeout_s: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        gevent.sleep(0.05)  # the driver's greenlets (its connection's reader, its streams) run meanwhile
    return False


def _endpoints(port: int) -> Endpoints:
    """A proxy on ``port`` of this machine; nothing else is reached."""
    return Endpoints(variant="v", version="5.3.3", grpc=f"127.0.0.1:{port}", remoting="127.0.0.1:1",
                     broker="127.0.0.1:1", namesrv="127.0.0.1:1", metrics="http://127.0.0.1:1/metrics")


@pytest.fixture
def proxy():
    fake = FakeProxy()
    server, port = _serve(fake)
    driver = grpc_native.NativeGrpcDriver(_endpoints(port))
    yield fake, server, port, driver
    driver.close()
    server.stop(0)


def test_a_consumer_sends_its_settings_before_it_returns_and_receives_acks_and_nacks(proxy):
    fake, _, _, driver = proxy
    consumer = driver.pop_consumer("G", "T", 5, tags="a||b")
    (settings,) = fake.settings.values()
    assert settings.subscription.group.name == "G" and settings.client_type == pb.ClientType.SIMPLE_CONSUMER
    assert all(h["x-mq-language"] == "PYTHON" and h["x-mq-client-id"] for h in fake.headers)
    fake.inbox = [_message("h1", attempt=2), _message("h2")]
    received = consumer.receive(32, 15)
    d1, d2 = received.deliveries
    assert (d1.delivery_attempt, d1.store_ts_ms, d1.born_ts_ms) == (2, 1_795_327_650_162, 1_795_327_650_000)
    consumer.change_invisible(d1, 3)
    assert fake.changed == [("h1", 3)] and d1.handle.handle == "h1-2"  # the new handle replaces the old
    assert consumer.ack_all([d1, d2]) == [None, None] and fake.acked == ["h1-2", "h2"]
    assert consumer.receive(32, 15).deliveries == []


def test_a_consumer_without_a_deadline_or_with_auto_renew_says_so_in_its_receives(proxy):
    fake, _, _, driver = proxy
    fake.inbox = [_message("h1")]
    assert len(driver.pop_consumer("G", "T", 5).receive(32, 15).deliveries) == 1
    assert fake.remaining[-1] is not None and 0 < fake.remaining[-1] <= 5 + grpc_native.REQUEST_TIMEOUT_S
    fake.inbox = [_message("h2")]
    no_deadline = driver.pop_consumer("G2", "T", 5, options=ReceiveOptions(deadline=False))
    assert len(no_deadline.receive(32, 15).deliveries) == 1
    assert fake.remaining[-1] is None or fake.remaining[-1] > 1e9  # no grpc-timeout: no deadline (grpcio: "forever")
    fake.inbox = [_message("h3")]
    renewed = driver.pop_consumer("G3", "T", 5, options=ReceiveOptions(auto_renew=True))
    assert len(renewed.receive(32, 15).deliveries) == 1
    assert fake.renewed == [False, False, True]  # only the consumer that asks for it asks the proxy to renew


def test_a_producer_sends(proxy):
    fake, _, _, driver = proxy
    producer = driver.producer("T")
    assert producer.send_all([(b"a", "t", None, None), (b"b", None, None, None)])[0]
    assert _until(lambda: any(s.client_type == pb.ClientType.PRODUCER for s in fake.settings.values()))


def test_settings_the_proxy_lost_are_sent_again_on_the_live_stream(proxy):
    fake, _, _, driver = proxy
    consumer = driver.pop_consumer("G", "T", 5)
    fake.settings.clear()  # the proxy forgot them (GrpcClientSettingsManager's cleaner, a restart behind a balancer)
    with pytest.raises(NotReady, match="settings"):
        consumer.receive(32, 15)
    assert _until(lambda: len(fake.settings) == 1)
    assert consumer.receive(32, 15).deliveries == []


def test_a_heartbeat_answered_without_settings_sends_them_again(proxy):
    fake, _, _, driver = proxy
    driver.pop_consumer("G", "T", 5)
    (session,) = driver._sessions
    fake.settings.clear()
    session.heartbeat()
    assert _until(lambda: len(fake.settings) == 1)


def test_after_a_proxy_restart_the_stream_is_opened_again_with_the_settings(proxy):
    fake, server, port, driver = proxy
    consumer = driver.pop_consumer("G", "T", 5)
    (session,) = driver._sessions
    server.stop(0).wait()
    restarted = FakeProxy()  # a proxy started again knows no client
    again, _ = _serve(restarted, port)
    try:
        assert _until(lambda: session.client_id in restarted.settings)
        assert session.streams >= 2
        restarted.inbox = [_message("h9")]
        assert _until(lambda: _receives(consumer))
    finally:
        again.stop(0)


def _receives(consumer: grpc_native.NativePopConsumer) -> bool:
    try:
        return len(consumer.receive(32, 15).deliveries) == 1
    except Exception:  # noqa: BLE001 - not yet
        return False


def test_the_registry_picks_the_client_it_is_given_and_refuses_an_unknown_one():
    from harness.client import registry

    assert registry.GRPC_DRIVERS["native"][1] == "NativeGrpcDriver"
    assert tuple(registry.GRPC_DRIVERS) == ("official", "native")
    assert registry.DEFAULT_GRPC_CLIENT == "official"
    ep = Endpoints(variant="v", version="x", grpc="127.0.0.1:1", remoting="r", broker="b", namesrv="n", metrics="m")
    with pytest.raises(ValueError, match="no gRPC client 'java'"):
        registry.driver("grpc", ep, client="java")


# A Locust worker's process: gevent patches all but threads and queues (harness.workload.launch); the driver's
# calls run in the greenlets themselves.
_WORKER = """
import sys, threading, time
from gevent import monkey
monkey.patch_all(thread=False, queue=False)
import gevent
from harness.client import grpc_native
from harness.contracts.endpoints import Endpoints
from harness.workload import gevent_bridge
ep = Endpoints(variant="v", version="x", grpc=sys.argv[1], remoting="r", broker="b", namesrv="n", metrics="m")
gevent_bridge.ensure_threads(16)
d = grpc_native.NativeGrpcDriver(ep, offload=gevent_bridge.offload)
consumers = [d.pop_consumer("G", "T", 5) for _ in range(4)]
ticks = []
def tick():
    while True:
        ticks.append(time.monotonic())
        gevent.sleep(0.01)
gevent.spawn(tick)
gevent.sleep(0.05)
start = time.monotonic()
gevent.joinall([gevent.spawn(c.receive, 32, 15) for c in consumers], raise_error=True)
took = time.monotonic() - start
print(took, max(b - a for a, b in zip(ticks, ticks[1:])), threading.active_count())
d.close()
"""


class SlowPoll(FakeProxy):
    """Every receive is a long poll that finds nothing after POLL_S."""

    POLL_S = 1.0

    def ReceiveMessage(self, request, context):  # noqa: N802
        time.sleep(self.POLL_S)
        yield from super().ReceiveMessage(request, context)


def test_long_polls_of_a_gevent_worker_wait_together_and_the_hub_keeps_running(tmp_path):
    import os
    import subprocess
    import sys

    from harness.core.paths import REPO_ROOT

    server, port = _serve(SlowPoll())
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    try:
        out = subprocess.run([sys.executable, "-c", _WORKER, f"127.0.0.1:{port}"], env=env, capture_output=True,
                             text=True, timeout=30, cwd=tmp_path)
    finally:
        server.stop(0)
    assert out.returncode == 0, out.stderr[-2000:]
    took, longest_gap, threads = out.stdout.split()
    assert float(took) < 1.8 * SlowPoll.POLL_S  # four 1 s polls side by side, not one after another
    assert float(longest_gap) < 0.5  # no greenlet (the ticker) was held up by a poll
    assert threads == "1"  # every poll, stream and heartbeat in a greenlet: no thread of its own, none of a pool


class CountingProxy(FakeProxy):
    """Holds each send until `gather` are in flight at once (or 5 s pass), counting the most in flight.

    Holding, not a fixed pause, because the count must say what the client did, not how quickly a loaded
    machine woke the server's threads: a pause of 50 ms once saw 7 of 8 sends that the client had all begun
    together (CI, stop 58). A client that sends one after another never gathers more than one: each send
    waits out the 5 s and `most` stays 1.
    """

    def __init__(self) -> None:
        super().__init__()
        self.cond, self.now, self.most, self.order, self.gather = threading.Condition(), 0, 0, [], 1

    def SendMessage(self, request, context):  # noqa: N802
        with self.cond:
            self.now += 1
            self.most = max(self.most, self.now)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.now >= self.gather or self.most >= self.gather, timeout=5)
        time.sleep(0.05)  # long enough for a second send of a FIFO group, were it sent early, to be seen
        with self.cond:
            self.now -= 1
            self.order.append(request.messages[0].body)
        return super().SendMessage(request, context)


def test_a_chunk_goes_out_at_once_and_a_fifo_group_one_after_another():
    fake = CountingProxy()
    server, port = _serve(fake)
    driver = grpc_native.NativeGrpcDriver(_endpoints(port))
    try:
        producer = driver.producer("T")
        fake.gather = 8
        ids = producer.send_all([(f"m{i}".encode(), None, None, None) for i in range(8)])
        assert len(ids) == 8 and all(isinstance(i, str) and len(i) == 32 for i in ids) and len(set(ids)) == 8
        assert fake.most == 8  # all eight in flight together: one round trip, not eight
        fake.most, fake.order, fake.gather = 0, [], 1
        fifo = [(f"f{i}".encode(), None, "g1", None) for i in range(4)]
        assert all(isinstance(i, str) for i in producer.send_all(fifo))
        assert fake.most == 1 and fake.order == [b"f0", b"f1", b"f2", b"f3"]
        server.stop(0)
        failed = producer.send_all([(b"x", None, None, None), (b"y", None, None, None)])
        assert all(isinstance(e, grpc_native.TransportError) for e in failed)  # each failure is data
    finally:
        driver.close()
        server.stop(0)
