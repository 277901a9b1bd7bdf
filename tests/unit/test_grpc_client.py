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


def test_a_consumer_whose_settings_the_proxy_lost_is_started_again():
    from harness.client.driver import NotReady
    from harness.client.grpc import GrpcPopConsumer

    class Client:
        def __init__(self, n: int) -> None:
            self.client_id, self.down = n, False

        def receive(self, max_messages: int, invisible_s: int) -> list:
            if self.client_id == 1:
                raise RuntimeError('50001, Cannot invoke "Settings.getSubscription()" because "settings" is null.')
            return []

        def shutdown(self) -> None:
            self.down = True

    made: list[Client] = []
    lines: list[str] = []
    consumer = GrpcPopConsumer(lambda: made.append(Client(len(made) + 1)) or made[-1], lambda f: f(), lines.append)
    with pytest.raises(NotReady, match="the proxy had lost this consumer's settings: consumer started again"):
        consumer.receive(16, 15)
    assert [c.client_id for c in made] == [1, 2] and made[0].down and not made[1].down
    assert consumer.receive(16, 15).deliveries == [] and lines == [
        "consumer 1 started again as 2: the proxy had lost its settings"]


def test_any_other_receive_error_is_the_callers():
    from harness.client.grpc import GrpcPopConsumer

    class Client:
        def receive(self, max_messages: int, invisible_s: int) -> list:
            raise RuntimeError("UNAVAILABLE: connection refused")

    made = []
    consumer = GrpcPopConsumer(lambda: made.append(Client()) or made[-1], lambda f: f(), lambda line: None)
    with pytest.raises(RuntimeError, match="UNAVAILABLE"):
        consumer.receive(16, 15)
    assert len(made) == 1
