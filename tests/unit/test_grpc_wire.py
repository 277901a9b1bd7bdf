"""The native gRPC driver's requests and the reading of the proxy's answers (no I/O)."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.v5.model import Message
from rocketmq.v5.util import Misc

from harness.client import grpc_wire as wire
from harness.client.driver import flow_limited
from harness.client.grpc import to_delivery
from harness.client.grpc_native import _delivery

HANDLE = "1234 1795327650100 20000 0 1 broker-a 3 17 4096"


def _message(store_s: int = 1_795_327_650, store_nanos: int = 162_000_000, attempt: int = 2,
             tag: str = "TagA") -> pb.Message:
    m = pb.Message()
    m.topic.name = "T"
    m.body = b'{"x":1}'
    sp = m.system_properties
    sp.message_id, sp.tag, sp.receipt_handle, sp.delivery_attempt = "01AB", tag, HANDLE, attempt
    sp.body_encoding = pb.Encoding.IDENTITY
    sp.body_digest.type = pb.DigestType.CRC32
    sp.body_digest.checksum = Misc.crc32_checksum(m.body)
    sp.born_timestamp.seconds = store_s - 1
    sp.store_timestamp.seconds, sp.store_timestamp.nanos = store_s, store_nanos
    return m


def _stream(*messages: pb.Message, code: int = pb.Code.OK, text: str = "OK") -> list[svc.ReceiveMessageResponse]:
    out = [svc.ReceiveMessageResponse(status=pb.Status(code=code, message=text))]
    out += [svc.ReceiveMessageResponse(message=m) for m in messages]
    ts = svc.ReceiveMessageResponse()
    ts.delivery_timestamp.FromMilliseconds(1_795_327_651_000)
    return [*out, ts]


def test_headers_name_the_client_and_a_language_the_proxy_knows():
    h = dict(wire.metadata("host@1@0@ab", request_id="r-1", now=0))
    assert h == {"x-mq-client-id": "host@1@0@ab", "x-mq-language": "PYTHON", "x-mq-protocol": "v2",
                 "x-mq-client-version": wire.CLIENT_VERSION, "x-mq-date-time": "19700101T000000Z",
                 "x-mq-request-id": "r-1"}
    assert dict(wire.metadata("c", namespace="ns"))["x-mq-namespace"] == "ns"
    # The proxy registers clients with LanguageCode.valueOf(language): it must be one of its names.
    assert pb.Language.Value(wire.LANGUAGE)


def test_each_request_gets_its_own_request_id():
    assert dict(wire.metadata("c"))["x-mq-request-id"] != dict(wire.metadata("c"))["x-mq-request-id"]


def test_consumer_settings_carry_type_subscription_long_poll_and_timeout():
    s = wire.consumer_settings("G", "T", "a||b", 20, 10, "127.0.0.1:8081")
    assert s.client_type == pb.ClientType.SIMPLE_CONSUMER
    assert s.subscription.group.name == "G"
    (entry,) = s.subscription.subscriptions
    assert (entry.topic.name, entry.expression.type, entry.expression.expression) == ("T", pb.FilterType.TAG, "a||b")
    assert s.subscription.long_polling_timeout.seconds == 20 and s.request_timeout.seconds == 10
    assert s.access_point.scheme == pb.AddressScheme.IPv4
    assert (s.access_point.addresses[0].host, s.access_point.addresses[0].port) == ("127.0.0.1", 8081)
    assert s.user_agent.language == pb.Language.PYTHON


def test_producer_settings_and_a_host_name_access_point():
    s = wire.producer_settings(["T"], 10, "proxy.local:8081")
    assert s.client_type == pb.ClientType.PRODUCER and [t.name for t in s.publishing.topics] == ["T"]
    assert s.access_point.scheme == pb.AddressScheme.DOMAIN_NAME


def test_heartbeats_name_the_consumers_group_only():
    consumer = wire.heartbeat(wire.consumer_settings("G", "T", "*", 20, 10, "127.0.0.1:1"))
    assert consumer.group.name == "G" and consumer.client_type == pb.ClientType.SIMPLE_CONSUMER
    producer = wire.heartbeat(wire.producer_settings(["T"], 10, "127.0.0.1:1"))
    assert not producer.HasField("group") and producer.client_type == pb.ClientType.PRODUCER


def test_receive_request_fields():
    q = pb.MessageQueue(topic=wire.resource("T"), id=2, broker=pb.Broker(name="broker-a"))
    r = wire.receive("G", q, "*", 32, 15, 20)
    assert (r.group.name, r.message_queue.topic.name, r.message_queue.broker.name) == ("G", "T", "broker-a")
    assert (r.batch_size, r.filter_expression.expression, r.filter_expression.type) == (32, "*", pb.FilterType.TAG)
    assert r.invisible_duration.seconds == 15 and r.long_polling_timeout.seconds == 20 and not r.auto_renew
    assert r.HasField("invisible_duration") and r.HasField("long_polling_timeout")
    assert wire.receive("G", q, "*", 32, 15, 20, auto_renew=True).auto_renew


def test_the_route_gives_readable_master_queues():
    def q(i: int, perm: int, broker_id: int = 0) -> pb.MessageQueue:
        return pb.MessageQueue(topic=wire.resource("T"), id=i, permission=perm,
                               broker=pb.Broker(name="b", id=broker_id))

    resp = svc.QueryRouteResponse(status=pb.Status(code=pb.Code.OK), message_queues=[
        q(0, pb.Permission.READ_WRITE), q(1, pb.Permission.WRITE), q(2, pb.Permission.READ),
        q(3, pb.Permission.READ, 1)])
    assert [m.id for m in wire.readable_queues(resp)] == [0, 2]


def test_a_receive_stream_maps_to_what_the_official_driver_gives():
    (p,) = wire.received(_stream(_message()), "receive")
    native = _delivery(p, "T")
    official = to_delivery(Message().fromProtobuf(_message()), "T")
    fields = ("body", "message_id", "delivery_attempt", "store_ts_ms", "born_ts_ms", "tag", "topic")
    assert [getattr(native, f) for f in fields] == [getattr(official, f) for f in fields]
    assert native.topic is None  # it came under the topic popped
    # A retry the broker returned under its %RETRY% name says so, with either client.
    assert _delivery(p, "U").topic == "T" == to_delivery(Message().fromProtobuf(_message()), "U").topic
    assert native.store_ts_ms == 1_795_327_650_162 and native.delivery_attempt == 2
    assert native.handle == wire.Receipt("T", "01AB", HANDLE, 1_795_327_650_100)


def test_no_message_is_an_empty_receive_and_other_statuses_raise():
    assert wire.received(_stream(code=pb.Code.MESSAGE_NOT_FOUND, text="no new message"), "r") == []
    with pytest.raises(wire.ProxyError) as lost:
        wire.received(_stream(code=pb.Code.INTERNAL_SERVER_ERROR,
                              text='Cannot invoke "apache.rocketmq.v2.Settings.getSubscription()" because '
                                   '"settings" is null'), "r")
    assert lost.value.settings_lost
    with pytest.raises(wire.ProxyError) as busy:
        wire.received(_stream(code=pb.Code.TOO_MANY_REQUESTS, text="polling full"), "r")
    assert flow_limited(busy.value) and not busy.value.settings_lost


def test_a_message_without_tag_or_born_time():
    m = _message(tag="")
    m.system_properties.ClearField("born_timestamp")
    p = wire.popped(m)
    assert p.tag is None and p.born_ts_ms is None


def test_a_gzip_body_is_decompressed():
    import gzip

    m = _message()
    m.body = gzip.compress(b"hello")
    m.system_properties.body_encoding = pb.Encoding.GZIP
    assert wire.popped(m).body == b"hello"


def test_pop_time_is_read_from_the_receipt_handle():
    assert wire.pop_time_ms(HANDLE) == 1_795_327_650_100
    assert wire.pop_time_ms("not a handle") is None


def test_ack_request_and_per_entry_results():
    a = wire.Receipt("T", "m1", "h1", None)
    b = wire.Receipt("T", "m2", "h2", None)
    req = wire.ack("G", [a, b])
    assert (req.group.name, req.topic.name) == ("G", "T")
    assert [(e.message_id, e.receipt_handle) for e in req.entries] == [("m1", "h1"), ("m2", "h2")]
    resp = svc.AckMessageResponse(status=pb.Status(code=pb.Code.MULTIPLE_RESULTS), entries=[
        svc.AckMessageResultEntry(message_id="m1", receipt_handle="h1", status=pb.Status(code=pb.Code.OK)),
        svc.AckMessageResultEntry(message_id="m2", receipt_handle="h2",
                                  status=pb.Status(code=pb.Code.INVALID_RECEIPT_HANDLE, message="expired"))])
    ok, err = wire.ack_results(resp, [a, b], "ack")
    assert ok is None and isinstance(err, wire.ProxyError) and "expired" in str(err)


def test_change_invisible_sends_the_handle_and_keeps_the_new_one():
    r = wire.Receipt("T", "m1", "old", None)
    req = wire.change_invisible("G", r, 3)
    assert (req.group.name, req.topic.name, req.receipt_handle, req.message_id) == ("G", "T", "old", "m1")
    assert req.invisible_duration.seconds == 3
    wire.changed(r, svc.ChangeInvisibleDurationResponse(status=pb.Status(code=pb.Code.OK), receipt_handle=HANDLE), "c")
    assert r.handle == HANDLE and r.pop_time_ms == 1_795_327_650_100


def test_send_request_has_an_id_a_type_and_the_tag():
    req = wire.send("T", b"body", "TagA", None, message_id="ID1", now_ms=1_000)
    (m,) = req.messages
    sp = m.system_properties
    assert (m.topic.name, m.body, sp.message_id, sp.tag) == ("T", b"body", "ID1", "TagA")
    assert sp.message_type == pb.MessageType.NORMAL and wire.to_ms(sp.born_timestamp) == 1_000
    fifo = wire.send("T", b"b", None, "g1").messages[0].system_properties
    assert fifo.message_type == pb.MessageType.FIFO and fifo.message_group == "g1" and fifo.message_id
    resp = svc.SendMessageResponse(status=pb.Status(code=pb.Code.OK), entries=[
        svc.SendResultEntry(status=pb.Status(code=pb.Code.OK), message_id="ID1")])
    assert wire.sent_id(resp, "send") == "ID1"
