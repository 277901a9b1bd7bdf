"""The client driver seam: the few things a workload does to RocketMQ, whatever the protocol.

Shaped after OpenMessaging Benchmark's driver API: create resources, a producer that sends, a pop
consumer that receives, acks and changes invisible durations, and close. Locust users and the readiness
check talk only to these types; each protocol (gRPC through the proxy, remoting straight to the broker)
implements them in its own module, and harness.client.registry picks one by ``driver(protocol, ...)``.

Every call blocks. A driver whose client cannot block a gevent worker's hub (the gRPC client runs its own
asyncio thread) runs its calls through ``offload``, which the workload supplies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from harness.contracts.workers import PLAIN, ReceiveOptions

T = TypeVar("T")
# Runs a blocking call (with no arguments) where it cannot stall the caller's event loop; returns its result.
Offload = Callable[[Callable[[], T]], T]


class DriverError(Exception):
    """The client cannot give what the harness measures (e.g. a version that hides the store timestamp)."""


class NotReady(Exception):
    """The server is reachable but not serving this client yet (e.g. a proxy that has not sent its settings):
    worth another try until a deadline, unlike a DriverError."""


# How a workload records a DriverError (the detail of its error event); a run with one is refused.
CLIENT_UNFIT = "client unfit"


@dataclass(frozen=True)
class Delivery:
    """One message as a pop consumer received it."""

    body: bytes
    message_id: str
    delivery_attempt: int  # 1 = first delivery
    store_ts_ms: int  # the broker's store time of this copy (the retry copy, on a retry), ms since the epoch
    born_ts_ms: int | None
    handle: object  # what ack and change_invisible need; opaque to the workload
    tag: str | None = None  # the tag the message arrived with
    # The topic the message came under when it is not the one popped (a retry returned under its %RETRY% name,
    # apache/rocketmq#11195), as the wire names it; None when it is the one popped (or the client cannot tell).
    topic: str | None = None
    queue_id: int | None = None  # the queue of the copy delivered (a retry's: of its retry topic); None: unknown


@dataclass(frozen=True)
class Received:
    """What one receive (long poll) returned, and the wall clock (ns) when it returned."""

    deliveries: list[Delivery]
    at_ns: int  # taken on the thread that made the call, so handing the result back adds nothing to it


# What send_all takes per message: body, tag, message group (FIFO topics).
# A message to send: its body, tag, message group and priority (None: without).
Outgoing = tuple[bytes, str | None, str | None, int | None]


class Producer(Protocol):
    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        """Send one message (with ``tag`` and, to a FIFO topic, ``message_group``) to the producer's topic;
        return its message id."""
        ...

    def send_all(self, messages: list[Outgoing]) -> list[str | Exception]:
        """Send each message, together where the protocol lets them share a round trip; per message its id
        or the error its send met."""
        ...


class PopConsumer(Protocol):
    def receive(self, max_messages: int, invisible_s: int) -> Received:
        """One long poll: wait up to the consumer's long-poll time for at most ``max_messages``."""
        ...

    def ack(self, delivery: Delivery) -> None: ...

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        """One ack per delivery, sent together where the protocol lets them share a round trip; per delivery
        None (acked) or the error its ack met."""
        ...

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        """Nack: the message comes back (as a retry) ``invisible_s`` seconds from now; ``suspend``: with the
        reconsume times it had (a remoting header of 5.5.0 brokers)."""
        ...


def refuse_lite(lite: bool, protocol: str) -> None:
    """A driver that cannot drive lite topics says so (scenario validation refuses it before a run)."""
    if lite:
        raise DriverError(f"lite topics are driven over remoting only (protocol remoting), not {protocol}")


def refuse_options(options: ReceiveOptions, driver: str, can: Sequence[str] = ()) -> None:
    """A driver that cannot do one of ``options`` (all but those named in ``can``) says so."""
    said = {"deadline": (not options.deadline, "receives without a gRPC deadline are sent by the native gRPC client "
                         "only"),
            "auto_renew": (options.auto_renew, "receives the proxy renews (auto_renew) are sent by the native gRPC "
                           "client only"),
            "one_client": (options.one_client, "consumers sharing one client are built for lite topics only")}
    for name, (asked, why) in said.items():
        if asked and name not in can:
            raise DriverError(f"{why}, not {driver}")


class Driver(Protocol):
    protocol: str

    def create_topic(self, name: str, queues: int, message_type: str = "NORMAL") -> None: ...

    def create_group(self, name: str, retry_max_times: int, orderly: bool = False,
                     lite_bind_topic: str | None = None) -> None: ...

    def producer(self, topic: str, lite: bool = False) -> Producer:
        """A started producer; the driver closes it in ``close``. ``lite``: ``topic`` is a LITE parent topic, and
        a message's message group names the lite topic it goes to (RIP-83, 5.5.0)."""
        ...

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*",
                     lite_topics: Sequence[str] = (), options: ReceiveOptions = PLAIN) -> PopConsumer:
        """A started pop consumer of ``group`` subscribed to the messages of ``topic`` its tag filter
        (``*``, or tags joined by ``||``) selects; with ``lite_topics``, to those lite topics of the LITE parent
        ``topic`` (each its own FIFO queue); ``options``: what its receives do beyond that (ReceiveOptions)."""
        ...

    def close(self) -> None:
        """Shut down every producer and consumer this driver started."""
        ...


# A client tries a call the server refused for flow control again, after a pause that doubles each time (the
# official clients back off the same way), at most this many times.
FLOW_RETRIES = 5
FLOW_BACKOFF_S = 0.1


def flow_limited(e: BaseException) -> bool:
    """Whether a call was refused for flow control: the proxy's TOO_MANY_REQUESTS, which the Python gRPC client
    raises as TooManyRequestsException (the proxy's consumer thread pool was full)."""
    return type(e).__name__ == "TooManyRequestsException"


# An ack whose outcome the client cannot know (outcome_unknown) is sent again at most this many times: acks are
# idempotent (a second ack of one the broker applied changes nothing), so the pair ends acked or with an error
# the broker surely saw, not "lost" for a message the broker had in fact acked.
ACK_AGAIN = 2
# The gRPC status a call's own deadline gives (grpc/doc/statuscodes.md).
_DEADLINE_EXCEEDED = 4


def outcome_unknown(e: BaseException) -> bool:
    """Whether a failed call may still have been applied: it was sent and only a timeout came back. The proxy's
    PROXY_TIMEOUT (and the persistence timeouts the official client raises with it as ProxyTimeoutException)
    says its own request to the broker ran out (2 s for an ack), not that the broker did not apply it: a broker
    stopped for longer applies the ack when it runs again, and a proxy stopped for longer times out the answer
    already in its socket (measured: docs/findings/ack-timeout-applied.md). A client's own deadline (grpc's
    DEADLINE_EXCEEDED, the native driver's TransportError, a remoting read that timed out) says the same."""
    if type(e).__name__ == "ProxyTimeoutException":
        return True
    code = getattr(e, "code", None)
    code = code() if callable(code) else code  # grpc.aio.AioRpcError's code is a method
    if getattr(code, "name", None) == "DEADLINE_EXCEEDED":
        return True
    if type(e).__name__ == "TransportError" and code == _DEADLINE_EXCEEDED:
        return True
    return isinstance(e.__cause__, TimeoutError)  # a remoting read (socket.timeout is TimeoutError)


def ack_again(ack: Callable[[], None], err: BaseException,
              refused: Callable[[BaseException, int], bool] = lambda e, tries: False,
              unknown: Callable[[BaseException], None] = lambda e: None) -> BaseException | None:
    """After an ack failed with ``err``: ``ack`` called again while ``refused(error, tries)`` says to (flow
    control: the caller pauses and records it) or while the outcome is unknown (``outcome_unknown``; ``unknown``
    is given each such error), at most ACK_AGAIN times. The error that remains, or None once an ack went through."""
    tries = unknowns = 0
    while True:
        tries += 1
        if not refused(err, tries):
            if not outcome_unknown(err) or unknowns == ACK_AGAIN:
                return err
            unknowns += 1
            unknown(err)
        try:
            ack()
            return None
        except Exception as again:  # noqa: BLE001 - every client failure is the caller's data
            err = again


def direct(fn: Callable[[], T]) -> T:
    return fn()
