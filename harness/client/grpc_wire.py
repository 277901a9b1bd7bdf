"""The proxy's protobuf service (apache.rocketmq.v2.MessagingService), as the native gRPC driver speaks it:
pure functions that build requests and read responses, no I/O.

The messages are the generated stubs rocketmq-python-client ships (``rocketmq.grpc_protocol``): the same
.proto files the proxy is built from, so nothing is generated here. Importing them imports that client's
package too (about 0.3 s, no threads start).

What the proxy needs, read from its source (RocketMQ 5.3.3, proxy/.../grpc/v2):
- ``x-mq-client-id`` keys everything: the settings a client sent over Telemetry, its channel, its heartbeats;
- ``x-mq-language`` must name a RocketMQ LanguageCode: ClientActivity registers producers and consumers with
  ``LanguageCode.valueOf`` of it, which fails on anything else (an empty header included);
- a receive needs a deadline: ReceiveMessageActivity clamps the long poll to the time the call has left.
"""

from __future__ import annotations

import gzip
import os
import socket
import time
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc

# Headers (rocketmq-clients' Signature.java; the proxy's GrpcConstants). The language is the one the proxy
# already knows from the official Python client, so its logs and metrics count both drivers alike.
LANGUAGE = "PYTHON"
PROTOCOL_VERSION = "v2"
CLIENT_VERSION = "5.1.2"  # the official Python client this driver stands beside
# The headers whose value is new in every request (metadata below).
VOLATILE_HEADERS = ("x-mq-date-time", "x-mq-request-id")
SETTINGS_LOST = 'because "settings" is null'  # the proxy's NPE when it has no settings for the client id


class ProxyError(Exception):
    """The proxy answered with a status other than OK (``code``: apache.rocketmq.v2.Code)."""

    def __init__(self, code: int, message: str, what: str) -> None:
        self.code, self.status_message = code, message
        super().__init__(f"{what}: {code}, {message}")

    @property
    def settings_lost(self) -> bool:
        """The proxy no longer has this client's settings (it started again): they must be sent anew."""
        return SETTINGS_LOST in self.status_message


class TooManyRequestsException(ProxyError):
    """The proxy refused for flow control; named as the official client names it, so
    harness.client.driver.flow_limited treats both drivers' refusals alike."""


class ProxyTimeoutException(ProxyError):
    """The proxy's request to the broker ran out (PROXY_TIMEOUT) or a store's flush did; named as the official
    client names these, so harness.client.driver.outcome_unknown treats both drivers' timeouts alike."""


def new_client_id(index: int) -> str:
    """A client id unique to this process and client, in the official clients' host@pid@index@... shape."""
    return f"{socket.gethostname()}@{os.getpid()}@{index}@{uuid.uuid4().hex[:12]}"


def metadata(client_id: str, namespace: str = "", request_id: str | None = None,
             now: float | None = None) -> tuple[tuple[str, str], ...]:
    """The headers of one request. The date-time and request id only matter to a proxy that checks
    signatures (none here: no credentials), but the official clients always send them."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    headers = [("x-mq-client-id", client_id), ("x-mq-language", LANGUAGE), ("x-mq-protocol", PROTOCOL_VERSION),
               ("x-mq-client-version", CLIENT_VERSION), ("x-mq-date-time", stamp),
               ("x-mq-request-id", request_id or str(uuid.uuid4()))]
    if namespace:
        headers.append(("x-mq-namespace", namespace))
    return tuple(headers)


def duration(seconds: float) -> Duration:
    d = Duration()
    d.FromMilliseconds(round(seconds * 1000))
    return d


def to_ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def resource(name: str, namespace: str = "") -> pb.Resource:
    return pb.Resource(name=name, resource_namespace=namespace)


def access_point(target: str) -> pb.Endpoints:
    """``host:port`` as the proxy's Endpoints (an IPv4 address or a domain name)."""
    host, _, port = target.rpartition(":")
    try:
        socket.inet_aton(host)
        scheme = pb.AddressScheme.IPv4
    except OSError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def _user_agent() -> pb.UA:
    return pb.UA(language=pb.Language.PYTHON, version=CLIENT_VERSION, platform="linux", hostname=socket.gethostname())


def consumer_settings(group: str, topic: str, tags: str, long_poll_s: float, request_timeout_s: float,
                      target: str, namespace: str = "") -> pb.Settings:
    """A simple consumer's settings: its group and its one subscription (TAG filter), as the official clients
    send them on the Telemetry stream before their first receive."""
    entry = pb.SubscriptionEntry(topic=resource(topic, namespace),
                                 expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tags))
    subscription = pb.Subscription(group=resource(group, namespace), subscriptions=[entry],
                                   long_polling_timeout=duration(long_poll_s))
    return pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, access_point=access_point(target),
                       request_timeout=duration(request_timeout_s), subscription=subscription,
                       user_agent=_user_agent())


def producer_settings(topics: list[str], request_timeout_s: float, target: str, namespace: str = "") -> pb.Settings:
    publishing = pb.Publishing(topics=[resource(t, namespace) for t in topics])
    return pb.Settings(client_type=pb.ClientType.PRODUCER, access_point=access_point(target),
                       request_timeout=duration(request_timeout_s), publishing=publishing, user_agent=_user_agent())


def telemetry(settings: pb.Settings) -> svc.TelemetryCommand:
    return svc.TelemetryCommand(settings=settings)


def heartbeat(settings: pb.Settings) -> svc.HeartbeatRequest:
    """The heartbeat of the client these settings describe: a consumer names its group (the proxy validates it)."""
    if settings.HasField("subscription"):
        return svc.HeartbeatRequest(group=settings.subscription.group, client_type=settings.client_type)
    return svc.HeartbeatRequest(client_type=settings.client_type)


def query_route(topic: str, target: str, namespace: str = "") -> svc.QueryRouteRequest:
    return svc.QueryRouteRequest(topic=resource(topic, namespace), endpoints=access_point(target))


def readable_queues(response: svc.QueryRouteResponse) -> list[pb.MessageQueue]:
    """The queues a consumer may receive from: readable, on a master (broker id 0), as the official clients pick."""
    check(response.status, "query route")
    readable = (pb.Permission.READ, pb.Permission.READ_WRITE)
    return [q for q in response.message_queues if q.permission in readable and q.broker.id == 0]


def receive(group: str, queue: pb.MessageQueue, tags: str, batch: int, invisible_s: float, long_poll_s: float,
            namespace: str = "", auto_renew: bool = False) -> svc.ReceiveMessageRequest:
    """One long poll of ``queue`` (its topic and broker: the proxy pops from that broker, any of its queues);
    ``auto_renew``: the proxy pops with its own invisible time and renews it while the client holds the message, as
    for a push consumer (the client acks with the handle it was given)."""
    return svc.ReceiveMessageRequest(
        group=resource(group, namespace), message_queue=queue,
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tags), batch_size=batch,
        invisible_duration=duration(invisible_s), auto_renew=auto_renew, long_polling_timeout=duration(long_poll_s))


def any_queue(topic: str, namespace: str = "") -> pb.MessageQueue:
    """A queue of ``topic`` with no broker: the proxy picks one (used until the route is known)."""
    return pb.MessageQueue(topic=resource(topic, namespace))


@dataclass
class Receipt:
    """What ack and change_invisible need; ``handle`` is replaced by each ChangeInvisibleDuration's answer."""

    topic: str
    message_id: str
    handle: str
    pop_time_ms: int | None  # the broker's pop time, read from the handle (None when it cannot be read)


@dataclass(frozen=True)
class Popped:
    """One received message, as the driver hands it to harness.client.driver.Delivery."""

    body: bytes
    message_id: str
    delivery_attempt: int
    store_ts_ms: int
    born_ts_ms: int | None
    tag: str | None
    receipt: Receipt
    topic: str = ""  # the topic the message came under, as the proxy names it
    queue_id: int | None = None


def pop_time_ms(handle: str) -> int | None:
    """The broker's pop time in a receipt handle (ReceiptHandle.encode: start offset, retrieve time, ...,
    separated by spaces); None for a handle of another shape."""
    parts = handle.split(" ")
    try:
        return int(parts[1]) if len(parts) >= 8 else None
    except ValueError:
        return None


def body_of(message: pb.Message) -> bytes:
    if message.system_properties.body_encoding != pb.Encoding.GZIP:
        return message.body
    try:
        return gzip.decompress(message.body)
    except OSError:  # the broker's own compression is zlib, which it also labels GZIP
        return zlib.decompress(message.body)


def popped(message: pb.Message) -> Popped:
    sp = message.system_properties
    handle = sp.receipt_handle
    return Popped(body=body_of(message), message_id=sp.message_id, delivery_attempt=sp.delivery_attempt or 1,
                  store_ts_ms=to_ms(sp.store_timestamp),
                  born_ts_ms=to_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else None,
                  tag=sp.tag or None, receipt=Receipt(message.topic.name, sp.message_id, handle, pop_time_ms(handle)),
                  topic=message.topic.name, queue_id=sp.queue_id)


def received(responses: Iterable[svc.ReceiveMessageResponse], what: str) -> list[Popped]:
    """The messages of one ReceiveMessage stream (a status, the messages, a delivery timestamp). No message
    found is an empty list; any other status raises, as the official client's receive does."""
    out: list[Popped] = []
    for r in responses:
        kind = r.WhichOneof("content")
        if kind == "status" and r.status.code != pb.Code.MESSAGE_NOT_FOUND:
            check(r.status, what)
        elif kind == "message":
            out.append(popped(r.message))
    return out


def ack(group: str, receipts: list[Receipt], namespace: str = "") -> svc.AckMessageRequest:
    """One request acking ``receipts`` (all of one topic): the proxy acks each entry with the broker on its own."""
    topic = receipts[0].topic
    entries = [svc.AckMessageEntry(message_id=r.message_id, receipt_handle=r.handle) for r in receipts]
    return svc.AckMessageRequest(group=resource(group, namespace), topic=resource(topic, namespace), entries=entries)


def ack_results(response: svc.AckMessageResponse, receipts: list[Receipt], what: str) -> list[Exception | None]:
    """Per receipt None (acked) or its error: by the answer's entry for its handle, else the answer's status."""
    by_handle = {e.receipt_handle: e.status for e in response.entries}
    out: list[Exception | None] = []
    for r in receipts:
        status = by_handle.get(r.handle, response.status)
        out.append(None if status.code == pb.Code.OK else status_error(status, what))
    return out


def change_invisible(group: str, receipt: Receipt, invisible_s: float,
                     namespace: str = "") -> svc.ChangeInvisibleDurationRequest:
    return svc.ChangeInvisibleDurationRequest(
        group=resource(group, namespace), topic=resource(receipt.topic, namespace), receipt_handle=receipt.handle,
        invisible_duration=duration(invisible_s), message_id=receipt.message_id)


def changed(receipt: Receipt, response: svc.ChangeInvisibleDurationResponse, what: str) -> None:
    """Take the new handle the proxy answered: the old one no longer acks the message."""
    check(response.status, what)
    receipt.handle = response.receipt_handle
    receipt.pop_time_ms = pop_time_ms(response.receipt_handle)


def send(topic: str, body: bytes, tag: str | None, message_group: str | None, namespace: str = "",
         message_id: str | None = None, now_ms: int | None = None) -> svc.SendMessageRequest:
    """One message (the proxy refuses one without a message id). NORMAL, or FIFO with a message group."""
    sp = pb.SystemProperties(message_id=message_id or uuid.uuid4().hex.upper(), body_encoding=pb.Encoding.IDENTITY,
                             message_type=pb.MessageType.FIFO if message_group else pb.MessageType.NORMAL,
                             born_host=socket.gethostname())
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000) if now_ms is None else now_ms)
    if tag:
        sp.tag = tag
    if message_group:
        sp.message_group = message_group
    return svc.SendMessageRequest(messages=[pb.Message(topic=resource(topic, namespace), system_properties=sp,
                                                       body=body)])


def sent_id(response: svc.SendMessageResponse, what: str) -> str:
    check(response.status, what)
    entry = response.entries[0]
    check(entry.status, what)
    return entry.message_id


_TIMEOUTS = (pb.Code.PROXY_TIMEOUT, pb.Code.MASTER_PERSISTENCE_TIMEOUT, pb.Code.SLAVE_PERSISTENCE_TIMEOUT)


def status_error(status: pb.Status, what: str) -> ProxyError:
    cls = (TooManyRequestsException if status.code == pb.Code.TOO_MANY_REQUESTS
           else ProxyTimeoutException if status.code in _TIMEOUTS else ProxyError)
    return cls(status.code, status.message, what)


def check(status: pb.Status, what: str) -> None:
    if status.code != pb.Code.OK:
        raise status_error(status, what)
