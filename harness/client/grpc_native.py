"""The native gRPC driver: the proxy's MessagingService called through grpcio's asyncio API on one I/O thread,
without rocketmq-python-client's message objects, its schedulers or a thread hop per call.

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

Threads. Every call, stream and periodic task of every native driver in the process runs on one asyncio loop on
one real thread (IoLoop): grpcio's C core polls its completion queue on a thread of its own and hands the loop
its events, so a receive's stream of 32 messages is read by one thread holding the GIL, not by 8 pool threads
trading it message by message (which cost the Python worker ~12% more CPU per delivery: docs/benchmarks.md). A
caller waits for its call's result without blocking anything else: a greenlet of a gevent worker yields to its
hub until the loop hands the result over (one wake-up per call, however many messages it carries); any other
thread blocks on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio
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
CLOSE_TIMEOUT_S = 2.0
HEARTBEAT_S = 10.0  # the official clients' period
ROUTE_REFRESH_S = 30.0  # the Java client's route cache period
RENEW_BACKOFF_S = 1.0  # the Java client's pause before it opens a broken Telemetry stream again
# After a proxy restart, a new connection tried at least every 2 s (grpcio's default backs off up to 120 s).
CHANNEL_OPTIONS = [("grpc.max_reconnect_backoff_ms", 2000)]
_LOGGER = "rmq-harness-grpc-native"


class TransportError(Exception):
    """The call did not reach the proxy, or its answer did not come back (a gRPC status, not the proxy's)."""


def _transport(e: grpc.RpcError, what: str) -> TransportError:
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    return TransportError(f"{what}: {getattr(code, 'name', code)}, {details}")


def _gevent_hub() -> Any:
    """The calling thread's gevent hub when gevent patched this process (a Locust worker), else None."""
    try:
        from gevent import monkey
    except ImportError:
        return None
    if not monkey.is_module_patched("socket"):
        return None
    import gevent

    return gevent.get_hub()


def _selector() -> Any:
    """A selector that blocks the I/O thread itself: gevent's patched one would hand its waits to a hub."""
    from gevent import monkey

    return monkey.get_original("selectors", "DefaultSelector")()


class IoLoop:
    """One real thread running the asyncio loop every native driver's calls run on (see the module's doc)."""

    _shared: IoLoop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.SelectorEventLoop(_selector())
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="grpc-native-io", daemon=True)
        self._thread.start()
        started.wait()

    @classmethod
    def shared(cls) -> IoLoop:
        """The process's loop, started on first use; it lives as long as the process (a daemon thread)."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = IoLoop()
            return cls._shared

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result: a greenlet yields to its hub meanwhile, any other
        thread blocks. Never from the loop's own thread (it would wait for itself)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("IoLoop.run called from the loop's own thread")
        future = self.submit(coro)
        hub = _gevent_hub()
        if hub is None:
            return future.result()
        from gevent.hub import Waiter

        # An async watcher, not run_callback_threadsafe: an active watcher tells the hub something is still
        # coming (else, with nothing else scheduled, it raises LoopExit rather than wait).
        waiter, watcher = Waiter(hub), hub.loop.async_()
        watcher.start(waiter.switch, None)
        lock, closed = threading.Lock(), []

        def wake(_f: object) -> None:  # on the loop's thread; send() is the thread-safe part
            with lock:
                if not closed:  # a closed watcher's memory may be gone
                    watcher.send()

        future.add_done_callback(wake)
        try:
            waiter.get()
        except BaseException:
            future.cancel()  # the greenlet was killed (a stopped user): its long poll ends with it
            raise
        finally:
            with lock:
                closed.append(True)
                watcher.close()
        return future.result()


async def _wait_for(call: Awaitable[T], what: str) -> T:
    try:
        return await call
    except grpc.RpcError as e:
        raise _transport(e, what) from None


class Session:
    """One client's presence at the proxy: its Telemetry stream (its settings) and its heartbeat, tasks on the
    I/O loop. The stream is opened again RENEW_BACKOFF_S after it ends, each time with the settings first;
    ``settled`` is set when the proxy has answered the settings of the current stream."""

    def __init__(self, io: IoLoop, stub: MessagingServiceStub, client_id: str, settings: pb.Settings,
                 headers: Callable[[], tuple], log: Callable[[str], None]) -> None:
        self._io, self._stub, self.client_id, self.settings = io, stub, client_id, settings
        self._headers, self._log = headers, log
        self.settled = threading.Event()
        self.streams = 0  # Telemetry streams opened so far: 1, then one more per reconnect
        self._stopped = False
        self._outbox: asyncio.Queue | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._tasks: list[concurrent.futures.Future] = []

    def start(self) -> Session:
        self._tasks.append(self._io.submit(self._run()))
        self._tasks.append(self._io.submit(_every(HEARTBEAT_S, self.heartbeat, self._log)))
        return self

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._stream_once()
            except Exception as e:  # noqa: BLE001 - any failure ends this stream; the next one starts over
                if not self._stopped:
                    self._log(f"{self.client_id}: telemetry: {e}")
            if not self._stopped:
                await asyncio.sleep(RENEW_BACKOFF_S)

    async def _stream_once(self) -> None:
        outbox: asyncio.Queue = asyncio.Queue()
        outbox.put_nowait(wire.telemetry(self.settings))
        self.settled.clear()
        self._outbox = outbox
        call = self._stub.Telemetry(_drain(outbox), metadata=self._headers())
        self._call = call
        self.streams += 1
        try:
            async for command in call:
                self._answered(command)
        except grpc.RpcError as e:
            if not self._stopped:
                self._log(f"{self.client_id}: telemetry stream {self.streams} ended: {_transport(e, 'telemetry')}")
        finally:
            self.settled.clear()
            outbox.put_nowait(None)  # ends the request iterator

    def _answered(self, command: svc.TelemetryCommand) -> None:
        if command.HasField("status") and command.status.code != pb.Code.OK:
            self._log(f"{self.client_id}: telemetry: {command.status.code}, {command.status.message}")
        elif command.WhichOneof("command") == "settings":
            self.settled.set()

    def resync(self) -> None:
        """Send the settings again on the current stream (the proxy lost them while the stream lived on); from
        any thread."""
        outbox = self._outbox
        if outbox is not None:
            self.settled.clear()
            self._io.loop.call_soon_threadsafe(outbox.put_nowait, wire.telemetry(self.settings))

    async def heartbeat(self) -> None:
        response = await self._stub.Heartbeat(wire.heartbeat(self.settings), metadata=self._headers(),
                                              timeout=REQUEST_TIMEOUT_S)
        if response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE:
            self._log(f"{self.client_id}: the proxy has no settings for it ({response.status.message}): sent again")
            self.resync()
            return
        wire.check(response.status, f"heartbeat of {self.client_id}")

    async def close(self) -> None:
        """On the loop: tell the proxy this consumer is gone (rather than when its heartbeats stop), end the
        stream and the heartbeats."""
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        if self.settings.HasField("subscription"):
            request = svc.NotifyClientTerminationRequest(group=self.settings.subscription.group)
            try:
                await self._stub.NotifyClientTermination(request, metadata=self._headers(), timeout=CLOSE_TIMEOUT_S)
            except grpc.RpcError:
                pass
        if self._call is not None:
            self._call.cancel()


async def _every(interval_s: float, fn: Callable[[], Awaitable[None]], log: Callable[[str], None]) -> None:
    """``fn`` every ``interval_s`` until cancelled; a failure is logged and the next round tries again."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await fn()
        except Exception as e:  # noqa: BLE001 - the log says why; the next round tries again
            log(f"periodic {getattr(fn, '__qualname__', fn)}: {e}")


async def _drain(outbox: asyncio.Queue) -> AsyncIterator[svc.TelemetryCommand]:
    """The requests of one Telemetry stream: what is put in ``outbox``, until None."""
    while (item := await outbox.get()) is not None:
        yield item


def _delivery(p: wire.Popped) -> Delivery:
    if not p.store_ts_ms:
        # Without it no wakeup can be measured: a proxy that hides it must stop the run, not empty every latency.
        raise DriverError(f"the proxy gave message {p.message_id} without its store timestamp")
    return Delivery(body=p.body, message_id=p.message_id, delivery_attempt=p.delivery_attempt,
                    store_ts_ms=p.store_ts_ms, born_ts_ms=p.born_ts_ms, handle=p.receipt, tag=p.tag)


class _Client:
    """What a producer and a consumer share: the stub, the client id's headers, the loop their calls run on."""

    def __init__(self, io: IoLoop, stub: MessagingServiceStub, client_id: str, namespace: str) -> None:
        self.io, self.stub, self.client_id, self.namespace = io, stub, client_id, namespace

    def headers(self) -> tuple[tuple[str, str], ...]:
        return wire.metadata(self.client_id, self.namespace)

    async def unary(self, method: Callable[..., Awaitable[T]], request: object, what: str) -> T:
        return await _wait_for(method(request, metadata=self.headers(), timeout=REQUEST_TIMEOUT_S), what)


class NativeProducer:
    def __init__(self, client: _Client, session: Session, topic: str) -> None:
        self._c, self._session, self.topic = client, session, topic

    async def _send(self, body: bytes, tag: str | None, message_group: str | None) -> str:
        request = wire.send(self.topic, body, tag, message_group, self._c.namespace)
        what = f"send to {self.topic}"
        return wire.sent_id(await self._c.unary(self._c.stub.SendMessage, request, what), what)

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        return self._c.io.run(self._send(body, tag, message_group))

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        return self._c.io.run(self._send_all(messages))

    async def _send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        # A chunk goes out at once, every request in flight on the channel together: one round trip for the chunk,
        # as the remoting producer pipelines one, not one each (sends were the gRPC workers' ceiling:
        # bench-results/workload.json, mixed_grpc). Messages of a FIFO group go one after another (their order
        # is the group's).
        if not any(group for _, _, group, _ in messages):
            results = await asyncio.gather(*(self._send(body, tag, None) for body, tag, _g, _p in messages),
                                           return_exceptions=True)
            return [r if isinstance(r, str | Exception) else DriverError(str(r)) for r in results]
        out: list[str | Exception] = []
        for body, tag, message_group, _priority in messages:
            try:
                out.append(await self._send(body, tag, message_group))
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

    async def refresh_route(self) -> None:
        """The topic's readable queues, which receives take in turn."""
        request = wire.query_route(self.topic, self._target, self._c.namespace)
        queues = wire.readable_queues(await self._c.unary(self._c.stub.QueryRoute, request, f"route of {self.topic}"))
        if queues:
            self._queues = queues

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        try:
            return self._c.io.run(self._receive(max_messages, invisible_s))
        except wire.ProxyError as e:
            if not e.settings_lost:
                raise
            self._session.resync()
            raise NotReady(f"{e} (the proxy had lost this consumer's settings: sent again)") from None

    async def _receive(self, max_messages: int, invisible_s: int) -> Received:
        queues = self._queues
        request = wire.receive(self.group, queues[next(self._turn) % len(queues)], self.tags, max_messages,
                               invisible_s, self.long_poll_s, self._c.namespace)
        what = f"receive from {self.topic} as {self.group}"
        call = self._c.stub.ReceiveMessage(request, metadata=self._c.headers(),
                                           timeout=self.long_poll_s + REQUEST_TIMEOUT_S)
        deliveries: list[Delivery] = []
        try:
            async for response in call:  # one response per message
                if (p := wire.read(response, what)) is not None:
                    deliveries.append(_delivery(p))
        except grpc.RpcError as e:
            raise _transport(e, what) from None
        # The stream's end, taken on the thread that read it: handing the result over adds nothing to it.
        return Received(deliveries, time.time_ns())

    def ack(self, delivery: Delivery) -> None:
        err = self.ack_all([delivery])[0]
        if err is not None:
            raise err

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        return self._c.io.run(self._ack_all(deliveries))

    async def _ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        # One request per topic (a consumer's deliveries share one): the proxy acks each entry on its own.
        out: dict[int, Exception | None] = {}
        by_topic: dict[str, list[int]] = {}
        for i, d in enumerate(deliveries):
            by_topic.setdefault(d.handle.topic, []).append(i)
        for indexes in by_topic.values():
            receipts = [deliveries[i].handle for i in indexes]
            what = f"ack on {self.topic} as {self.group}"
            try:
                response = await self._c.unary(self._c.stub.AckMessage,
                                               wire.ack(self.group, receipts, self._c.namespace), what)
                results: list[Exception | None] = wire.ack_results(response, receipts, what)
            except Exception as e:  # noqa: BLE001 - every client failure is data
                results = [e] * len(receipts)
            out.update(zip(indexes, results, strict=True))
        return [out[i] for i in range(len(deliveries))]

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        if suspend:  # refused by the scenario's validation first (remoting only); said here should a caller forget
            raise DriverError("the native gRPC driver does not send ChangeInvisibleDuration's suspend flag")
        self._c.io.run(self._change_invisible(delivery.handle, invisible_s))

    async def _change_invisible(self, receipt: wire.Receipt, invisible_s: int) -> None:
        what = f"change invisible time on {self.topic} as {self.group}"
        request = wire.change_invisible(self.group, receipt, invisible_s, self._c.namespace)
        wire.changed(receipt, await self._c.unary(self._c.stub.ChangeInvisibleDuration, request, what), what)


def _file_logger(log_file: Path | None) -> logging.Logger:
    logger = logging.getLogger(_LOGGER)
    if log_file is not None and not any(getattr(h, "baseFilename", None) == str(log_file) for h in logger.handlers):
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def wait_cooperatively(event: threading.Event, timeout_s: float, nap_s: float = 0.005) -> bool:
    """Wait for ``event`` (set on the I/O thread) without blocking a gevent hub: short sleeps, which gevent's
    patched time.sleep turns into yields; a plain sleep elsewhere."""
    deadline = time.monotonic() + timeout_s
    while not event.is_set():
        if time.monotonic() >= deadline:
            return False
        time.sleep(nap_s)
    return True


class NativeGrpcDriver(RemotingAdmin):
    """The gRPC protocol through the native driver; events and metrics say protocol "grpc", as the official one's."""

    protocol = "grpc"
    _ids = itertools.count()

    def __init__(self, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> None:
        del offload  # no thread hop: calls run on the I/O loop, and a greenlet waits for them by yielding
        self.endpoints = endpoints
        logger = _file_logger(log_file)
        self._log = lambda line: logger.warning("[rmq-harness] %s", line)
        self._io = IoLoop.shared()
        self._channel, self._stub = self._io.run(self._open(endpoints.grpc))
        self._sessions: list[Session] = []
        self._tasks: list[concurrent.futures.Future] = []

    @staticmethod
    async def _open(target: str) -> tuple[grpc.aio.Channel, MessagingServiceStub]:
        channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)  # bound to the loop it is made on
        return channel, MessagingServiceStub(channel)

    def _client(self, settings: pb.Settings) -> tuple[_Client, Session]:
        client = _Client(self._io, self._stub, wire.new_client_id(next(self._ids)), "")
        session = Session(self._io, self._stub, client.client_id, settings, client.headers, self._log).start()
        self._sessions.append(session)
        return client, session

    def producer(self, topic: str) -> NativeProducer:
        settings = wire.producer_settings([topic], REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        return NativeProducer(client, session, topic)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*") -> NativePopConsumer:
        settings = wire.consumer_settings(group, topic, tags, long_poll_s, REQUEST_TIMEOUT_S, self.endpoints.grpc)
        client, session = self._client(settings)
        consumer = NativePopConsumer(client, session, group, topic, long_poll_s, tags, self.endpoints.grpc)
        # A first receive that overtakes the settings fails in the proxy ("settings" is null): wait for them.
        if not wait_cooperatively(session.settled, SETTINGS_TIMEOUT_S):
            raise NotReady(f"the proxy at {self.endpoints.grpc} answered no settings to consumer group {group} "
                           f"within {SETTINGS_TIMEOUT_S:g} s")
        try:
            self._io.run(consumer.refresh_route())
        except (TransportError, wire.ProxyError) as e:
            self._log(f"route of {topic}: {e} (receives let the proxy pick a broker until it is known)")
        self._tasks.append(self._io.submit(_every(ROUTE_REFRESH_S, consumer.refresh_route, self._log)))
        return consumer

    def close(self) -> None:
        sessions, self._sessions = self._sessions, []
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        try:
            self._io.run(self._close(sessions))
        except Exception as e:  # noqa: BLE001 - closing is best effort; the log says what failed
            self._log(f"close: {e}")

    async def _close(self, sessions: list[Session]) -> None:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        await self._channel.close()
