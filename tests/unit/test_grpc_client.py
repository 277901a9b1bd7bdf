"""The one private attribute the harness reads from rocketmq-python-client: the store timestamp."""

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.v5.model import Message
from rocketmq.v5.util import Misc

from harness.client.driver import DriverError
from harness.client.grpc import store_timestamp_ms, to_delivery


def _decoded(store_s: int, store_nanos: int) -> Message:
    m = pb.Message()
    m.topic.name = "T"
    m.body = b'{"x":1}'
    m.system_properties.message_id = "01AB"
    m.system_properties.body_encoding = pb.Encoding.IDENTITY
    m.system_properties.body_digest.type = pb.DigestType.CRC32
    m.system_properties.body_digest.checksum = Misc.crc32_checksum(m.body)
    m.system_properties.born_timestamp.seconds = store_s - 1
    m.system_properties.store_timestamp.seconds = store_s
    m.system_properties.store_timestamp.nanos = store_nanos
    m.system_properties.delivery_attempt = 2
    return Message().fromProtobuf(m)


def test_store_timestamp_is_read_in_ms_from_the_clients_decoded_message():
    msg = _decoded(1_795_327_650, 162_000_000)
    assert store_timestamp_ms(msg) == 1_795_327_650_162
    assert msg.delivery_attempt == 2 and msg.born_timestamp == 1_795_327_649_000


def test_missing_store_timestamp_is_none():
    assert store_timestamp_ms(object()) is None


def test_a_delivery_carries_what_the_workload_measures():
    d = to_delivery(_decoded(1_795_327_650, 162_000_000))
    assert (d.store_ts_ms, d.born_ts_ms, d.delivery_attempt, d.message_id) == (
        1_795_327_650_162, 1_795_327_649_000, 2, "01AB")
    assert d.body == b'{"x":1}'


def test_a_client_that_hides_the_store_timestamp_fails_loudly():
    hidden = _decoded(1_795_327_650, 0)
    del hidden._Message__store_timestamp
    with pytest.raises(DriverError, match="store timestamp"):
        to_delivery(hidden)
