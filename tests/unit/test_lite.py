"""Lite topics (RIP-83, 5.5.0): what a scenario may ask of them, and the pieces of a lite pop's answer the remoting
consumer reads (the consume counts, the handle an ack names)."""

import json
from types import SimpleNamespace

import pytest

from harness.client.driver import DriverError, refuse_lite
from harness.client.remoting_lite import LiteHandle
from harness.core.errors import ConfigError
from harness.inputs.scenario import parse_scenario

BASE = {"name": "s", "protocol": "remoting", "workers": 1, "topics": [{"name": "P", "message_type": "LITE"}],
        "groups": [{"name": "G", "topic": "P"}], "produce": {"pattern": "burst", "count": 8, "message_groups": 3}}


def test_a_lite_parent_spreads_messages_over_its_lite_topics():
    s = parse_scenario(BASE)
    assert s.lite_topics("P") == ["mg0", "mg1", "mg2"]
    normal = parse_scenario({**BASE, "topics": [{"name": "P"}], "produce": {"pattern": "burst", "count": 8}})
    assert normal.lite_topics("P") == []


@pytest.mark.parametrize(("change", "says"), [
    ({"protocol": "grpc"}, "topics: a LITE topic's messages are popped with the broker's lite requests"),
    ({"produce": {"pattern": "burst", "count": 8}}, "produce.message_groups: 0 for the LITE topic P"),
    ({"groups": [{"name": "G", "topic": "P", "tags": "TagA"}]}, "groups.0: a lite topic's group takes every message"),
    ({"groups": [{"name": "G", "topic": "P", "read_dlq": True}]}, "groups.0: a lite topic's group"),
    ({"nack": {"attempts": [1], "how": "same_deadline"}}, "nack.how: same_deadline"),
    ({"workers": 2}, "workers: a lite message's attempts are counted by the consumers of one worker"),
])
def test_what_a_lite_topic_cannot_take_is_refused_in_one_line(change, says):
    with pytest.raises(ConfigError) as e:
        parse_scenario({**BASE, **change}, "s.yaml")
    assert "\n" not in str(e.value) and says in str(e.value)


def test_a_lite_handle_is_the_checkpoint_string_upstreams_client_builds():
    h = LiteHandle("mg1", 7, 1_700_000_000_000, 10_000, "broker-a")
    assert h.extra_info() == "0 1700000000000 10000 999 0 broker-a 0 7"


def test_a_grpc_driver_says_it_drives_no_lite_topics():
    refuse_lite(False, "grpc")
    with pytest.raises(DriverError, match="over remoting only"):
        refuse_lite(True, "grpc")


def test_consumers_of_one_client_share_its_id_and_subscribe_under_it(monkeypatch):
    from harness.client import remoting, remoting_driver
    from harness.contracts.endpoints import Endpoints
    from harness.contracts.workers import ReceiveOptions

    sent = []

    class Conn:
        def call(self, cmd, timeout_s):
            sent.append(json.loads(cmd.body)["subscriptionSet"][0]["clientId"])
            return remoting.Command(remoting.SUCCESS, {})

    d = remoting_driver.RemotingDriver(Endpoints(variant="v", version="5.5.0", grpc="g", remoting="r", broker="b:1",
                                                 namesrv="n:1", metrics="m"))
    monkeypatch.setattr(d, "_connect", lambda topic: (SimpleNamespace(broker_name="broker-a"), Conn()))
    one = ReceiveOptions(one_client=True)
    a, b = (d.pop_consumer("G", "P", 5, lite_topics=["mg0"], options=one) for _ in range(2))
    c = d.pop_consumer("G", "P", 5, lite_topics=["mg0"])
    assert a.client_id == b.client_id != c.client_id and sent == [a.client_id, a.client_id, c.client_id]
    with pytest.raises(DriverError, match="lite topics only"):
        d.pop_consumer("G", "T", 5, options=one)  # not a lite consumer
    with pytest.raises(ConfigError, match="consume.one_client: consumers sharing one client are built for lite"):
        parse_scenario({**BASE, "topics": [{"name": "P"}], "produce": {"pattern": "burst", "count": 8},
                        "consume": {"one_client": True}})
    assert parse_scenario({**BASE, "consume": {"one_client": True}}).consume.receive_options == one
