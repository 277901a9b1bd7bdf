"""Readiness when pops through the proxy return nothing but the broker's own pop works (apache/rocketmq#9862 is
such a defect): the run starts and says so; where neither pops, it is not ready and says both."""

import pytest

from harness.contracts.endpoints import Endpoints
from harness.core.errors import HarnessError
from harness.core.waiting import Deadline
from harness.deploy import readiness
from harness.deploy.readiness import RoundTrip


class FakeDriver:
    def __init__(self, protocol):
        self.protocol = protocol

    def create_topic(self, *a, **k):
        pass

    def create_group(self, *a, **k):
        pass

    def close(self):
        pass


def _ep():
    return Endpoints(variant="v", version="5.3.3", grpc="127.0.0.1:1", remoting="127.0.0.1:2",
                     broker="127.0.0.1:4", namesrv="127.0.0.1:3", metrics="")


@pytest.fixture
def trips(monkeypatch):
    works = {"grpc": False, "remoting": True}

    def trip(d, topic, group, n, timeout_s):
        if not works[d.protocol]:
            raise TimeoutError(f"{n} of {n} messages sent to {topic} were not popped back within 1 s")
        return [RoundTrip(0.01, 1_000_000, 2_000_000, 1)] * n

    monkeypatch.setattr(readiness, "driver", lambda protocol, ep: FakeDriver(protocol))
    monkeypatch.setattr(readiness, "round_trips", trip)
    return works


def test_pops_that_return_nothing_through_the_proxy_start_the_run_with_a_warning(trips):
    said = []
    rt = readiness.wait_serving(_ep(), "grpc", Deadline(30), warn=said.append)
    assert rt.seconds == 0.01
    assert len(said) == 1 and "pops through the proxy 127.0.0.1:1 returned nothing" in said[0]
    assert "the broker's own pop works" in said[0]
    assert readiness.clock_offset_ms(_ep(), "grpc") == readiness.clock_offset_ms(_ep(), "remoting")


def test_where_neither_pops_it_is_not_ready_and_says_both(trips):
    trips["remoting"] = False
    with pytest.raises(HarnessError, match="failed through the proxy 127.0.0.1:1 .* and straight to the broker"):
        readiness.wait_serving(_ep(), "grpc", Deadline(30), warn=print)
    with pytest.raises(HarnessError, match="round trip through remoting failed"):
        readiness.wait_serving(_ep(), "remoting", Deadline(30))
