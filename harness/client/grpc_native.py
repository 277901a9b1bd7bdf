"""The native gRPC driver: the proxy's MessagingService called over the harness's own HTTP/2 transport
(harness.client.grpc_h2: greenlets, one connection), without rocketmq-python-client's asyncio thread, its message
objects or its schedulers, and without grpcio's threads.

What the official client does that the proxy needs, done here (request contents: harness.client.grpc_wire):
- a Telemetry stream per client carrying its settings before its first receive; when the stream ends (the
  proxy stopped or started again) it is opened again after RENEW_BACKOFF_S and the settings sent again, as
  the Java client does (ClientSessionImpl.renewRequestObserver), not 300 s later as the Python client does;
- a heartbeat per client every HEARTBEAT_S, which keeps a consumer registered in its group (the proxy drops the
  settings of a consumer its group no longer lists, GrpcClientSettingsManager.onWaitEnd); a heartbeat or a
  receive answered "no settings" sends them again at once;
- the topic's route (QueryRoute) every ROUTE_REFRESH_S, whose readable queues a consumer's receives take in turn;
- ReceiveMessage (server streaming), AckMessage (one request per batch), ChangeInvisibleDuration (the new
  receipt handle replaces the old), SendMessage (one message per request, as the official client sends).

Everything runs in greenlets of the hub of the thread that made the driver (a Locust worker's: gevent patches
its sockets, harness.workload.launch): the calls in the calling greenlets, the connection's reader, the Telemetry
streams and the periodic work in greenlets of their own. No call needs ``offload``. Outside gevent's patching the
driver works the same while its caller waits on it (between calls nothing runs: fine for a short-lived client).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import gevent
import gevent.event
from google.protobuf.message import Message
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc

from harness.client import grpc_wire as wire
from harness.client.admin import RemotingAdmin
from harness.client.driver import (
    PLAIN,
    Delivery,
    DriverError,
    NotReady,
    Offload,
    Outgoing,
    Received,
    ReceiveOptions,
    direct,
    refuse_lite,
    refuse_options,
)
from harness.client.grpc_calls import BidiStream
from harness.client.grpc_framing import TransportError
from harness.client.grpc_h2 import H2Channel
from harness.contracts.endpoints import Endpoints

__all__ = ["NativeGrpcDriver", "NativePopConsumer", "NativeProducer", "TransportError"]
M = TypeVar("M", bound=Message)
REQUEST_TIMEOUT_S = 10.0
SETTINGS_TIMEOUT_S = 10.0
HEARTBEAT_S = 10.0  # the official clients' period
ROUTE_REFRESH_S = 30.0  # the Java client's route cache period
RENEW_BACKOFF_S = 1.0  # the Java client's pause before it opens a broken Telemetry stream again
SERVICE = "/apache.rocketmq.v2.MessagingService/"
_LOGGER = "rmq-harness-grpc-native"


class Housekeeper:
    """Periodic work of one driver (heartbeats, route refreshes), each task in a greenlet of its own."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._greenlets: list[gevent.Greenlet] = []

    def every(self, interval_s: float, fn: Callable[[], None]) -> None:
        self._greenlets.append(gevent.spawn(self._loop, interval_s, fn))

    def _loop(self, interval_s: float, fn: Callable[[], None]) -> None:
        while True:
            gevent.sleep(interval_s)
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the next round tries again; the log says why
                self._log(f"periodic {getattr(fn, '__name__', fn)}: {e}")

    def stop(self) -> None:
        gevent.killall(self._greenlets, block=False)
        self._greenlets = []


class _Client:
    """What a producer and a consumer share: the channel and the client id's headers."""

    def __init__(self, channel: H2Channel, client_id: str, namespace: str) -> None:
        self.channel, self.client_id, self.namespace = channel, client_id, namespace

    def headers(self) -> tuple[tuple[str, str], ...]:
        return wire.metadata(self.client_id, self.namespace)

    def unary(self, method: str, request: Message, answer: type[M], what: str,
              timeout_s: float = REQUEST_TIMEOUT_S) -> M:
        """One request and its answer (a TransportError when it did not come back)."""
        raw = self.channel.unary(SERVICE + method, request.SerializeToString(), self.headers(), timeout_s, what)
        return answer.FromString(raw)


class Session:
    """One client's presence at the proxy: its Telemetry stream (its settings) and its heartbeat.

    The stream lives in a greenlet of its own, opened again RENEW_BACKOFF_S after it ends, each time with the
    settings first. ``settled`` is set when the proxy has answered the settings of the current stream.
    """

    def __init__(self, client: _Client, settings: pb.Settings, log: Callable[[str], None]) -> None:
        self._c, self.client_id, self.settings, self._log = client, client.client_id, settings, log
        self.settled = gevent.event.Event()
        self.streams = 0  # Telemetry streams opened so far: 1, then one more per reconnect
        self._stopped = gevent.event.Event()
        self._call: BidiStream | None = None
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> Session:
        self._greenlet = gevent.spawn(self._run)
        return self

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._stream_once()
            except Exception as e:  # noqa: BLE001 - any failure ends this stream; the next one starts over
                if not self._stopped.is_set():
                    self._log(f"{self.client_id}: telemetry: {e}")
            self._stopped.wait(RENEW_BACKOFF_S)

    def _stream_once(self) -> None:
        self.settled.clear()
        call = self._c.channel.bidi(SERVICE + "Telemetry", self._c.headers(), self._answered)
        self._call = call
        self.streams += 1
        try:
            call.send(wire.telemetry(self.settings).SerializeToString())
            call.wait()
            if not self._stopped.is_set():
                code, detail = call.status()
                self._log(f"{self.client_id}: telemetry stream {self.streams} ended: gRPC status {code}, {detail}")
        finally:
            self.settled.clear()
            call.cancel()

    def _answered(self, raw: bytes) -> None:
        # In the channel's reader: only reads, never waits.
        command = svc.TelemetryCommand.FromString(raw)
        if command.HasField("status") and command.status.code != pb.Code.OK:
            self._log(f"{self.client_id}: telemetry: {command.status.code}, {command.status.message}")
        elif command.WhichOneof("command") == "settings":
            self.settled.set()

    def resync(self) -> None:
        """Send the settings again on the current stream (the proxy lost them while the stream lived on)."""
        call = self._call
        if call is not None and not call.ended:
            self.settled.clear()
            try:
                call.send(wire.telemetry(self.settings).SerializeToString())
            except TransportError as e:
                self._log(f"{self.client_id}: settings not sent again: {e} (the next stream sends them)")

    def heartbeat(self) -> None:
        response = self._c.unary("Heartbeat", wire.heartbeat(self.settings), svc.HeartbeatResponse,
                                 f"heartbeat of {self.client_id}")
        if response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE:
            self._log(f"{self.client_id}: the proxy has no settings for it ({response.status.message}): sent again")
            self.resync()
            return
        wire.check(response.status, f"heartbeat of {self.client_id}")

    def close(self) -> None:
        self._stopped.set()
        if self.settings.HasField("subscription"):
            request = svc.NotifyClientTerminationRequest(group=self.settings.subscription.group)
            try:  # tells the proxy to drop this consumer now rather than when its heartbeats stop
                self._c.unary("NotifyClientTermination", request, svc.NotifyClientTerminationResponse,
                              f"termination of {self.client_id}", timeout_s=2.0)
            except TransportError:
                pass
        if self._call is not None:
            self._call.cancel()
        if self._greenlet is not None:
            self._greenlet.kill(block=False)


def _delivery(p: wire.Popped, topic: str) -> Delivery:
    if not p.store_ts_ms:
        # Without it no wakeup can be measured: a proxy that hides it must stop the run, not empty every latency.
        raise DriverError(f"the proxy gave message {p.message_id} without its store timestamp")
    return Delivery(body=p.body, message_id=p.message_id, delivery_attempt=p.delivery_attempt,
                    store_ts_ms=p.store_ts_ms, born_ts_ms=p.born_ts_ms, handle=p.receipt, tag=p.tag,
                    topic=None if p.topic in ("", topic) else p.topic, queue_id=p.queue_id)


class NativeProducer:
    def __init__(self, client: _Client, session: Session, topic: str) -> None:
        self._c, self._session, self.topic = client, session, topic

    def _request(self, body: bytes, tag: str | None, message_group: str | None) -> bytes:
        return wire.send(self.topic, body, tag, message_group, self._c.namespace).SerializeToString()

    def _sent(self, raw: bytes, what: str) -> str:
        return wire.sent_id(svc.SendMessageResponse.FromString(raw), what)

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        what = f"send to {self.topic}"
        raw = self._c.channel.unary(SERVICE + "SendMessage", self._request(body, tag, message_group),
                                    self._c.headers(), REQUEST_TIMEOUT_S, what)
        return self._sent(raw, what)

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        # A chunk goes out at once, every request in flight on the connection together and their answers taken
        # in order: one round trip for the chunk, as the remoting producer pipelines one, not one each (sends
        # were the gRPC workers' ceiling: bench-results/workload.json, mixed_grpc). Messages of a FIFO group go
        # one after another (their order is the group's).
        if len(messages) > 1 and not any(group for _, _, group, _ in messages):
            return self._at_once(messages)
        out: list[str | Exception] = []
        for body, tag, message_group, _priority in messages:
            try:
                out.append(self.send(body, tag, message_group))
            except Exception as e:  # noqa: BLE001 - every client failure is data
                out.append(e)
        return out

    def _at_once(self, messages: list[Outgoing]) -> list[str | Exception]:
        what = f"send to {self.topic}"
        calls = self._c.channel.begin_all(SERVICE + "SendMessage", [
            (self._request(body, tag, None), self._c.headers()) for body, tag, _group, _priority in messages],
            REQUEST_TIMEOUT_S)
        out: list[str | Exception] = []
        for call in calls:
            try:
                if isinstance(call, Exception):
                    raise call
                (raw,) = call.result(what)
                out.append(self._sent(raw, what))
            except Exception as e:  # noqa: BLE001 - every client failure is data
                out.append(e)
        return out


class NativePopConsumer:
    def __init__(self, client: _Client, session: Session, group: str, topic: str, long_poll_s: int,
                 tags: str, target: str, options: ReceiveOptions = PLAIN) -> None:
        self._c, self._session, self._target = client, session, target
        # deadline False: receives go without grpc-timeout (the wait below is the client's own); auto_renew: the
        # proxy renews what it popped for this client while it holds it.
        self._options = options
        self.group, self.topic, self.long_poll_s, self.tags = group, topic, long_poll_s, tags
        self._queues = [wire.any_queue(topic, client.namespace)]  # until the route is known
        self._turn = itertools.count()

    def refresh_route(self) -> None:
        """The topic's readable queues, which receives take in turn."""
        request = wire.query_route(self.topic, self._target, self._c.namespace)
        queues = wire.readable_queues(self._c.unary("QueryRoute", request, svc.QueryRouteResponse,
                                                    f"route of {self.topic}"))
        if queues:
            self._queues = queues

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        queues = self._queues
        request = wire.receive(self.group, queues[next(self._turn) % len(queues)], self.tags, max_messages,
                               invisible_s, self.long_poll_s, self._c.namespace, self._options.auto_renew)
        what = f"receive from {self.topic} as {self.group}"
        # The whole stream comes back at its end, with the time it ended (taken by the connection's reader).
        call = self._c.channel.begin(SERVICE + "ReceiveMessage", request.SerializeToString(), self._c.headers(),
                                     self.long_poll_s + REQUEST_TIMEOUT_S, unary=False,
                                     deadline=self._options.deadline)
        raws = call.result(what)
        try:
            popped = wire.received(map(svc.ReceiveMessageResponse.FromString, raws), what)
        except wire.ProxyError as e:
            if not e.settings_lost:
                raise
            self._session.resync()
            raise NotReady(f"{e} (the proxy had lost this consumer's settings: sent again)") from None
        return Received([_delivery(p, self.topic) for p in popped], call.ended_ns)

    def ack(self, delivery: Delivery) -> None:
        err = self.ack_all([delivery])[0]
        if err is not None:
            raise err

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        # One request per topic (a consumer's deliveries share one): the proxy acks each entry on its own.
        out: dict[int, Exception | None] = {}
        by_topic: dict[str, list[int]] = {}
        for i, d in enumerate(deliveries):
            by_topic.setdefault(d.handle.topic, []).append(i)
        for indexes in by_topic.values():
            receipts = [deliveries[i].handle for i in indexes]
            what = f"ack on {self.topic} as {self.group}"
            try:
                response = self._c.unary("AckMessage", wire.ack(self.group, receipts, self._c.namespace),
                                         svc.AckMessageResponse, what)
                results: list[Exception | None] = wire.ack_results(response, receipts, what)
            except Exception as e:  # noqa: BLE001 - every client failure is data
                results = [e] * len(receipts)
            out.update(zip(indexes, results, strict=True))
        return [out[i] for i in range(len(deliveries))]

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        if suspend:  # refused by the scenario's validation first (remoting only); said here should a caller forget
            raise DriverError("the native gRPC driver does not send ChangeInvisibleDuration's suspend flag")
        receipt: wire.Receipt = delivery.handle
        what = f"change invisible time on {self.topic} as {self.group}"
        request = wire.change_invisible(self.group, receipt, invisible_s, self._c.namespace)
        wire.changed(receipt, self._c.unary("ChangeInvisibleDuration", request, svc.ChangeInvisibleDurationResponse,
                                            what), what)


def _file_logger(log_file: Path | None) -> logging.Logger:
    logger = logging.getLogger(_LOGGER)
    if log_file is not None and not any(getattr(h, "baseFilename", None) == str(log_file) for h in logger.handlers):
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


class NativeGrpcDriver(RemotingAdmin):
    """The gRPC protocol through the native driver; events and metrics say protocol "grpc", as the official one's."""

    protocol = "grpc"
    _ids = itertools.count()

    def __init__(self, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> None:
        # ``offload`` is the registry's common signature: no call here blocks the hub, so none is offloaded.
        self.endpoints = endpoints
        logger = _file_logger(log_file)
        self._log = lambda line: logger.warning("[rmq-harness] %s", line)
        self._channel = H2Channel(endpoints.grpc, volatile_headers=wire.VOLATILE_HEADERS)
        self._keeper = Housekeeper(self._log)
        self._sessions: list[Session] = []

    def _client(self, settings: pb.Settings) -> tuple[_Client, Session]:
        client = _Client(self._channel, wire.new_client_id(next(self._ids)), "")
        session = Session(client, settings, self._log).start()
        self._sessions.append(session)
        self._keeper.every(HEARTBEAT_S, session.heartbeat)
        return client, session

    def producer(self, topic: str, lite: bool = False) -> NativeProducer:
        refuse_lite(lite, self.protocol)
        settings = wire.producer_settings([topic], REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        return NativeProducer(client, session, topic)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*",
                     lite_topics: Sequence[str] = (), options: ReceiveOptions = PLAIN) -> NativePopConsumer:
        refuse_lite(bool(lite_topics), self.protocol)
        refuse_options(options, "the native gRPC client", can=("deadline", "auto_renew"))
        settings = wire.consumer_settings(group, topic, tags, long_poll_s, REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        consumer = NativePopConsumer(client, session, group, topic, long_poll_s, tags, self.endpoints.grpc, options)
        # A first receive that overtakes the settings fails in the proxy ("settings" is null): wait for them.
        if not session.settled.wait(SETTINGS_TIMEOUT_S):
            raise NotReady(f"the proxy at {self.endpoints.grpc} answered no settings to consumer group {group} "
                           f"within {SETTINGS_TIMEOUT_S:g} s")
        try:
            consumer.refresh_route()
        except (TransportError, wire.ProxyError) as e:
            self._log(f"route of {topic}: {e} (receives let the proxy pick a broker until it is known)")
        self._keeper.every(ROUTE_REFRESH_S, consumer.refresh_route)
        return consumer

    def close(self) -> None:
        self._keeper.stop()
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
        self._channel.close()
