"""The native gRPC driver: the proxy's MessagingService called through grpcio's blocking stubs, without
rocketmq-python-client's asyncio thread, its message objects or its schedulers.

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

Under gevent. The harness's Locust workers keep threads real (harness.workload.launch), and so does this
driver: every RPC runs whole on a real thread of the hub's pool through ``offload`` (one hop per RPC, however
many messages its stream carries), the Telemetry streams and the heartbeats on threads of their own.
grpcio's ``grpc.experimental.gevent.init_gevent()`` is the other way (``cooperate_with_gevent``, the client
"native-gevent", GeventGrpcDriver): each wait on a completion queue goes to the same pool, one hop per stream
event, and calls run in the calling greenlet; docs/operations.md says what it needs.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import grpc
import grpc.experimental
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from harness.client import grpc_wire as wire
from harness.client.admin import RemotingAdmin
from harness.client.driver import Delivery, DriverError, NotReady, Offload, Outgoing, Received, direct
from harness.contracts.endpoints import Endpoints

T = TypeVar("T")
REQUEST_TIMEOUT_S = 10.0
SETTINGS_TIMEOUT_S = 10.0
HEARTBEAT_S = 10.0  # the official clients' period
ROUTE_REFRESH_S = 30.0  # the Java client's route cache period
RENEW_BACKOFF_S = 1.0  # the Java client's pause before it opens a broken Telemetry stream again
TICK_S = 0.5  # how often the housekeeper looks for work that is due
# A receive's stream read in the calling thread (grpcio's default reads it on a thread of the channel's own);
# after a proxy restart, a new connection tried at least every 2 s (grpcio's default backs off up to 120 s).
CHANNEL_OPTIONS = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
                   ("grpc.max_reconnect_backoff_ms", 2000)]
_LOGGER = "rmq-harness-grpc-native"
_gevent_initialised = False


class TransportError(Exception):
    """The call did not reach the proxy, or its answer did not come back (a gRPC status, not the proxy's)."""


def cooperate_with_gevent() -> bool:
    """Call grpcio's init_gevent once per process, if gevent patched its sockets: grpcio then waits for its
    completion queues on the hub's thread pool, so a greenlet's call yields instead of blocking the hub. It must
    come after gevent's patching and before the process's first channel; it captures the pool of the calling
    thread's hub, so it runs on the thread that runs the workers' hub. Returns whether it is on."""
    global _gevent_initialised
    if _gevent_initialised:
        return True
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        return False
    from grpc.experimental import gevent as grpc_gevent

    grpc_gevent.init_gevent()
    _gevent_initialised = True
    return True


def wait_cooperatively(event: threading.Event, timeout_s: float, nap_s: float = 0.005) -> bool:
    """Wait for ``event`` (set by a real thread) without blocking a gevent hub: short sleeps, which gevent's
    patched time.sleep turns into yields; a plain sleep elsewhere."""
    deadline = time.monotonic() + timeout_s
    while not event.is_set():
        if time.monotonic() >= deadline:
            return False
        time.sleep(nap_s)
    return True


def _transport(e: grpc.RpcError, what: str) -> TransportError:
    code = e.code() if isinstance(e, grpc.Call) else None
    details = e.details() if isinstance(e, grpc.Call) else str(e)
    return TransportError(f"{what}: {getattr(code, 'name', code)}, {details}")


class Housekeeper:
    """One real thread per driver that runs periodic work (heartbeats, route refreshes) when it is due."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._tasks: list[list] = []  # [interval_s, fn, next_due]
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._log = log
        self._thread: threading.Thread | None = None

    def every(self, interval_s: float, fn: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.append([interval_s, fn, time.monotonic() + interval_s])
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="grpc-native-housekeeper", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(TICK_S):
            with self._lock:
                due = [t for t in self._tasks if t[2] <= time.monotonic()]
            for task in due:
                task[2] = time.monotonic() + task[0]
                try:
                    task[1]()
                except Exception as e:  # noqa: BLE001 - the next round tries again; the log says why
                    self._log(f"periodic {getattr(task[1], '__name__', task[1])}: {e}")

    def stop(self) -> None:
        self._stopped.set()


class Session:
    """One client's presence at the proxy: its Telemetry stream (its settings) and its heartbeat.

    The stream lives on a real thread of its own, opened again RENEW_BACKOFF_S after it ends, each time with
    the settings first. ``settled`` is set when the proxy has answered the settings of the current stream.
    """

    def __init__(self, stub: MessagingServiceStub, client_id: str, settings: pb.Settings,
                 headers: Callable[[], tuple], log: Callable[[str], None], offload: Offload = direct) -> None:
        self._stub, self.client_id, self.settings = stub, client_id, settings
        self._headers, self._log, self._offload = headers, log, offload
        self.settled = threading.Event()
        self.streams = 0  # Telemetry streams opened so far: 1, then one more per reconnect
        self._stopped = threading.Event()
        self._outbox: queue.Queue | None = None
        self._call: grpc.Call | None = None
        self._thread = threading.Thread(target=self._run, name=f"telemetry-{client_id}", daemon=True)

    def start(self) -> Session:
        self._thread.start()
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
        outbox: queue.Queue = queue.Queue()
        outbox.put(wire.telemetry(self.settings))
        self.settled.clear()
        self._outbox = outbox
        call = self._stub.Telemetry(_drain(outbox), metadata=self._headers())
        self._call = call
        self.streams += 1
        try:
            for command in call:
                self._answered(command)
        except grpc.RpcError as e:
            if not self._stopped.is_set():
                self._log(f"{self.client_id}: telemetry stream {self.streams} ended: {_transport(e, 'telemetry')}")
        finally:
            self.settled.clear()
            outbox.put(None)  # ends the request iterator, so grpcio's thread that reads it ends too

    def _answered(self, command: svc.TelemetryCommand) -> None:
        if command.HasField("status") and command.status.code != pb.Code.OK:
            self._log(f"{self.client_id}: telemetry: {command.status.code}, {command.status.message}")
        elif command.WhichOneof("command") == "settings":
            self.settled.set()

    def resync(self) -> None:
        """Send the settings again on the current stream (the proxy lost them while the stream lived on)."""
        outbox = self._outbox
        if outbox is not None:
            self.settled.clear()
            outbox.put(wire.telemetry(self.settings))

    def heartbeat(self) -> None:
        response = self._stub.Heartbeat(wire.heartbeat(self.settings), metadata=self._headers(),
                                        timeout=REQUEST_TIMEOUT_S)
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
                self._offload(lambda: self._stub.NotifyClientTermination(request, metadata=self._headers(),
                                                                          timeout=2.0))
            except grpc.RpcError:
                pass
        if self._call is not None:
            self._call.cancel()
        if self._outbox is not None:
            self._outbox.put(None)


def _drain(outbox: queue.Queue) -> Iterator[svc.TelemetryCommand]:
    """The requests of one Telemetry stream: what is put in ``outbox``, until None."""
    while (item := outbox.get()) is not None:
        yield item


def _delivery(p: wire.Popped) -> Delivery:
    if not p.store_ts_ms:
        # Without it no wakeup can be measured: a proxy that hides it must stop the run, not empty every latency.
        raise DriverError(f"the proxy gave message {p.message_id} without its store timestamp")
    return Delivery(body=p.body, message_id=p.message_id, delivery_attempt=p.delivery_attempt,
                    store_ts_ms=p.store_ts_ms, born_ts_ms=p.born_ts_ms, handle=p.receipt, tag=p.tag)


class _Client:
    """What a producer and a consumer share: the stub, the client id's headers, the way calls run."""

    def __init__(self, stub: MessagingServiceStub, client_id: str, namespace: str, offload: Offload) -> None:
        self.stub, self.client_id, self.namespace, self.offload = stub, client_id, namespace, offload

    def headers(self) -> tuple[tuple[str, str], ...]:
        return wire.metadata(self.client_id, self.namespace)

    def unary(self, method: Callable[..., T], request: object, what: str, here: bool = False) -> T:
        """One request and its answer, through ``offload``; ``here``: on the calling thread, for the driver's
        own real threads (the hub's pool belongs to the workers' thread: another thread would get a hub and
        a pool of its own)."""
        run = direct if here else self.offload
        try:
            return run(lambda: method(request, metadata=self.headers(), timeout=REQUEST_TIMEOUT_S))
        except grpc.RpcError as e:
            raise _transport(e, what) from None


class NativeProducer:
    def __init__(self, client: _Client, session: Session, topic: str, together: bool = True) -> None:
        self._c, self._session, self.topic = client, session, topic
        self._together = together  # send_all's requests all in flight at once (not under init_gevent)

    def _send(self, body: bytes, tag: str | None, message_group: str | None) -> str:
        request = wire.send(self.topic, body, tag, message_group, self._c.namespace)
        what = f"send to {self.topic}"
        return wire.sent_id(self._c.unary(self._c.stub.SendMessage, request, what), what)

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        return self._send(body, tag, message_group)

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        # A chunk goes out at once, every request in flight on the channel together and their answers taken in
        # order: one round trip for the chunk, as the remoting producer pipelines one, not one each (sends were
        # the gRPC workers' ceiling: bench-results/workload.json, mixed_grpc). Messages of a FIFO group go one
        # after another (their order is the group's); under init_gevent too, where waiting on a future would
        # block the hub (its condition is a real thread's).
        if self._together and len(messages) > 1 and not any(group for _, _, group, _ in messages):
            return self._c.offload(lambda: self._at_once(messages))
        out: list[str | Exception] = []
        for body, tag, message_group, _priority in messages:
            try:
                out.append(self._send(body, tag, message_group))
            except Exception as e:  # noqa: BLE001 - every client failure is data
                out.append(e)
        return out

    def _at_once(self, messages: list[Outgoing]) -> list[str | Exception]:
        what = f"send to {self.topic}"
        calls = [self._c.stub.SendMessage.future(wire.send(self.topic, body, tag, None, self._c.namespace),
                                                 metadata=self._c.headers(), timeout=REQUEST_TIMEOUT_S)
                 for body, tag, _group, _priority in messages]
        out: list[str | Exception] = []
        for call in calls:
            try:
                out.append(wire.sent_id(call.result(), what))
            except grpc.RpcError as e:
                out.append(_transport(e, what))
            except Exception as e:  # noqa: BLE001 - every client failure is data
                out.append(e)
        return out


class NativePopConsumer:
    def __init__(self, client: _Client, session: Session, group: str, topic: str, long_poll_s: int,
                 tags: str, target: str) -> None:
        self._c, self._session, self._target = client, session, target
        self.group, self.topic, self.long_poll_s, self.tags = group, topic, long_poll_s, tags
        self._queues = [wire.any_queue(topic, client.namespace)]  # until the route is known
        self._turn = itertools.count()

    def refresh_route(self, here: bool = False) -> None:
        """The topic's readable queues, which receives take in turn (``here``: see _Client.unary)."""
        request = wire.query_route(self.topic, self._target, self._c.namespace)
        queues = wire.readable_queues(self._c.unary(self._c.stub.QueryRoute, request, f"route of {self.topic}", here))
        if queues:
            self._queues = queues

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        queues = self._queues
        request = wire.receive(self.group, queues[next(self._turn) % len(queues)], self.tags, max_messages,
                               invisible_s, self.long_poll_s, self._c.namespace)
        what = f"receive from {self.topic} as {self.group}"

        def call() -> tuple[list[wire.Popped], int]:
            # The stream is read whole here, on one thread; its time is taken on the same thread when it ends.
            responses = self._c.stub.ReceiveMessage(request, metadata=self._c.headers(),
                                                    timeout=self.long_poll_s + REQUEST_TIMEOUT_S)
            return wire.received(responses, what), time.time_ns()

        try:
            popped, at = self._c.offload(call)
        except grpc.RpcError as e:
            raise _transport(e, what) from None
        except wire.ProxyError as e:
            if not e.settings_lost:
                raise
            self._session.resync()
            raise NotReady(f"{e} (the proxy had lost this consumer's settings: sent again)") from None
        return Received([_delivery(p) for p in popped], at)

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
                response = self._c.unary(self._c.stub.AckMessage, wire.ack(self.group, receipts, self._c.namespace),
                                         what)
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
        wire.changed(receipt, self._c.unary(self._c.stub.ChangeInvisibleDuration, request, what), what)


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
    init_gevent = False  # GeventGrpcDriver: grpcio's init_gevent instead of a pool thread per call

    def __init__(self, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> None:
        self.endpoints = endpoints
        logger = _file_logger(log_file)
        self._log = lambda line: logger.warning("[rmq-harness] %s", line)
        # With init_gevent on, calls run in the calling greenlet; without, whole on a pool thread (offload).
        self._gevent_native = self.init_gevent and cooperate_with_gevent()
        self._offload = direct if self._gevent_native else offload
        self._channel = grpc.insecure_channel(endpoints.grpc, options=CHANNEL_OPTIONS)
        self._stub = MessagingServiceStub(self._channel)
        self._keeper = Housekeeper(self._log)
        self._sessions: list[Session] = []

    def _client(self, settings: pb.Settings) -> tuple[_Client, Session]:
        client = _Client(self._stub, wire.new_client_id(next(self._ids)), "", self._offload)
        session = Session(self._stub, client.client_id, settings, client.headers, self._log, self._offload).start()
        self._sessions.append(session)
        self._keeper.every(HEARTBEAT_S, session.heartbeat)
        return client, session

    def producer(self, topic: str) -> NativeProducer:
        settings = wire.producer_settings([topic], REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        return NativeProducer(client, session, topic, together=not self._gevent_native)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*") -> NativePopConsumer:
        settings = wire.consumer_settings(group, topic, tags, long_poll_s, REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        consumer = NativePopConsumer(client, session, group, topic, long_poll_s, tags, self.endpoints.grpc)
        # A first receive that overtakes the settings fails in the proxy ("settings" is null): wait for them.
        if not wait_cooperatively(session.settled, SETTINGS_TIMEOUT_S):
            raise NotReady(f"the proxy at {self.endpoints.grpc} answered no settings to consumer group {group} "
                           f"within {SETTINGS_TIMEOUT_S:g} s")
        try:
            consumer.refresh_route()
        except (TransportError, wire.ProxyError) as e:
            self._log(f"route of {topic}: {e} (receives let the proxy pick a broker until it is known)")
        self._keeper.every(ROUTE_REFRESH_S, functools.partial(consumer.refresh_route, here=True))
        return consumer

    def close(self) -> None:
        self._keeper.stop()
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
        self._channel.close()


class GeventGrpcDriver(NativeGrpcDriver):
    """The native driver with grpcio's init_gevent: calls run in the calling greenlet, each completion-queue wait
    on the hub's pool (cooperate_with_gevent; without gevent's patched sockets it is the native driver)."""

    init_gevent = True
