"""The gRPC driver: RocketMQ's proxy through the Apache rocketmq-python-client, the harness's way.

The client runs its own asyncio loop on a thread and blocks its caller; under gevent every call goes
through the driver's ``offload`` (harness.workload.gevent_bridge). Its ``*_async`` methods are no way out:
they hand back futures bound to a loop that never runs in a Locust worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

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
from harness.contracts.endpoints import Endpoints

T = TypeVar("T")
R = TypeVar("R")
_CLIENT_LOGGER = "rocketmq-python-client"
REQUEST_TIMEOUT_S = 10
SETTINGS_TIMEOUT_S = 10
# What the proxy answers a receive from a consumer whose settings it does not have (it started again).
SETTINGS_LOST = 'because "settings" is null'


def load_client(log_file: Path | None = None) -> ModuleType:
    """Import the client and, when ``log_file`` is given, send its log there instead of ~/logs."""
    import rocketmq

    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        logger = logging.getLogger(_CLIENT_LOGGER)
        for h in list(logger.handlers):
            logger.removeHandler(h)
            h.close()
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s"))
        logger.addHandler(handler)
    # The client's own callbacks (its heartbeats) fail through concurrent.futures, which logs "exception
    # calling callback" with a traceback; with no handler of its own that lands on stderr, e.g. when a proxy
    # stops under a client at the end of a run or a Ctrl-C. It goes to the client's log, with the rest of it.
    futures = logging.getLogger("concurrent.futures")
    futures.handlers = list(logging.getLogger(_CLIENT_LOGGER).handlers)
    futures.propagate = False
    return rocketmq


def store_timestamp_ms(message: object) -> int | None:
    """The broker's store time of a received message, in ms since the epoch.

    rocketmq-python-client 5.1.2 parses ``system_properties.store_timestamp`` but exposes no getter;
    the name-mangled attribute is read here, in one place, so a client upgrade breaks one test.
    """
    return getattr(message, "_Message__store_timestamp", None)


def to_delivery(m: object, topic: str | None = None) -> Delivery:
    """``m`` as a Delivery; ``topic``: the one popped (its name on the wire), so a message that came under another
    says which."""
    store = store_timestamp_ms(m)
    if not store:
        # Without it no wakeup can be measured: a client version that hides it must stop the run, not
        # leave every latency empty.
        import rocketmq

        version = getattr(rocketmq, "__version__", "?")
        raise DriverError(f"rocketmq-python-client {version} gave a message without its store timestamp "
                          "(Message._Message__store_timestamp); pin rocketmq-python-client==5.1.2")
    return Delivery(body=m.body, message_id=m.message_id, delivery_attempt=int(m.delivery_attempt or 1),
                    store_ts_ms=int(store), born_ts_ms=m.born_timestamp, handle=m, tag=m.tag or None,
                    topic=None if topic is None or m.topic in (None, "", topic) else m.topic)


def _each(call: Callable[[T], R], items: list[T]) -> list[R | Exception]:
    """``call`` on every item, one after another; an item's error is its result and does not stop the rest."""
    out: list[R | Exception] = []
    for item in items:
        try:
            out.append(call(item))
        except Exception as e:  # noqa: BLE001 - every client failure is data
            out.append(e)
    return out


class GrpcProducer:
    def __init__(self, client: object, topic: str, rmq: ModuleType, offload: Offload) -> None:
        self._client = client
        self._rmq = rmq
        self._offload = offload
        self.topic = topic

    def _message(self, body: bytes, tag: str | None, message_group: str | None) -> object:
        msg = self._rmq.Message()
        msg.topic = self.topic
        msg.body = body
        if tag:
            msg.tag = tag
        if message_group:
            msg.message_group = message_group
        return msg

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        msg = self._message(body, tag, message_group)
        return self._offload(lambda: self._client.send(msg)).message_id

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        # The client sends one message per request; one trip through the thread bridge for all of them.
        return self._offload(lambda: _each(lambda m: self._client.send(self._message(*m[:3])).message_id, messages))


class GrpcPopConsumer:
    """``start`` makes and starts the SimpleConsumer; a consumer whose settings the proxy lost is started again."""

    def __init__(self, start: Callable[[], object], offload: Offload, log: Callable[[str], None],
                 topic: str | None = None) -> None:
        self.topic = topic
        self._start = start
        self._client = start()
        self._offload = offload
        self._log = log

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        def timed() -> tuple[list, int]:
            return self._client.receive(max_messages, invisible_s), time.time_ns()

        try:
            messages, at = self._offload(timed)
        except Exception as e:
            if SETTINGS_LOST not in str(e):
                raise
            # A proxy started again knows nothing of this consumer, and rocketmq-python-client 5.1.2 sends its
            # settings again only every 300 s: every receive until then fails. Started anew, it sends them now.
            self._restart()
            raise NotReady(f"{e} (the proxy had lost this consumer's settings: consumer started again)") from None
        return Received([to_delivery(m, self.topic) for m in messages], at)

    def _restart(self) -> None:
        old, self._client = self._client, self._start()
        self._log(f"consumer {getattr(old, 'client_id', old)} started again as "
                  f"{getattr(self._client, 'client_id', self._client)}: the proxy had lost its settings")
        try:
            self._offload(old.shutdown)
        except Exception:  # noqa: BLE001 - the old client's channel may be gone; the new one serves
            pass

    def ack(self, delivery: Delivery) -> None:
        self._offload(lambda: self._client.ack(delivery.handle))

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        # The client acks one message per request; one trip through the thread bridge for all of them.
        return self._offload(lambda: _each(lambda d: self._client.ack(d.handle), deliveries))

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        if suspend:  # refused by the scenario's validation first; said here should a caller forget
            raise DriverError("the Python gRPC client cannot send ChangeInvisibleDuration's suspend flag")
        # The client fills Duration.seconds only: whole seconds reach the broker.
        self._offload(lambda: self._client.change_invisible_duration(delivery.handle, invisible_s))


class GrpcDriver(RemotingAdmin):
    protocol = "grpc"

    def __init__(self, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> None:
        self.endpoints = endpoints
        self._offload = offload
        self._rmq = load_client(log_file)
        self._clients: list[object] = []
        client_log = logging.getLogger(_CLIENT_LOGGER)
        self._log = lambda line: client_log.warning("[rmq-harness] %s", line)

    def _config(self) -> object:
        return self._rmq.ClientConfiguration(self.endpoints.grpc, self._rmq.Credentials(),
                                             request_timeout=REQUEST_TIMEOUT_S)

    def _started(self, client: object) -> object:
        self._offload(client.startup)
        self._clients.append(client)
        return client

    def producer(self, topic: str, lite: bool = False) -> GrpcProducer:
        refuse_lite(lite, self.protocol)
        client = self._started(self._rmq.Producer(self._config(), (topic,)))
        return GrpcProducer(client, topic, self._rmq, self._offload)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*",
                     lite_topics: Sequence[str] = (), options: ReceiveOptions = PLAIN) -> GrpcPopConsumer:
        refuse_lite(bool(lite_topics), self.protocol)
        refuse_options(options, "the official gRPC client")
        def start() -> object:
            client = self._rmq.SimpleConsumer(self._config(), group, {topic: self._rmq.FilterExpression(tags)},
                                              await_duration=long_poll_s)
            self._started(client)
            # The client waits for the proxy's settings only for push consumers; a SimpleConsumer's first
            # receive can overtake its Telemetry handshake and fail in the proxy ("settings" is null).
            settings = getattr(client, "_init_settings_event", None)
            if settings is not None and not self._offload(lambda: settings.wait(SETTINGS_TIMEOUT_S)):
                raise NotReady(f"the proxy at {self.endpoints.grpc} sent no settings to consumer group {group} "
                               f"within {SETTINGS_TIMEOUT_S} s")
            return client

        return GrpcPopConsumer(start, self._offload, self._log, topic)

    def close(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            try:
                self._offload(client.shutdown)
            except Exception:  # noqa: BLE001 - a client that failed to start cannot shut down; keep going
                pass
