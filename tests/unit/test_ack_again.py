"""An ack whose outcome the client cannot know is sent again (harness.client.driver.ack_again): the broker may
have applied it (docs/findings/ack-timeout-applied.md), and the ledger must not call its message lost."""


import grpc
import grpc.aio
import pandas as pd
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.v5.exception.client_exception import (
    InternalErrorException,
    ProxyTimeoutException,
    TooManyRequestsException,
)

from harness.client import grpc_wire as wire
from harness.client.driver import ACK_AGAIN, ack_again, flow_limited, outcome_unknown
from harness.client.grpc_framing import DEADLINE_EXCEEDED, UNAVAILABLE, TransportError
from harness.client.remoting import RemotingError
from harness.measure.ledger import ACK_UNKNOWN, classify
from tests.events import SUBS
from tests.events import ledger_event as _ev
from tests.events import sent as _sent


def _caused(cause: BaseException) -> RemotingError:
    try:
        raise RemotingError("127.0.0.1:10911: timed out") from cause
    except RemotingError as e:
        return e


def _status(code: int) -> wire.ProxyError:
    return wire.status_error(pb.Status(code=code, message="x"), "ack")


@pytest.mark.parametrize("error, unknown", [
    (ProxyTimeoutException("PROXY_TIMEOUT", pb.Code.PROXY_TIMEOUT), True),  # the official client
    (_status(pb.Code.PROXY_TIMEOUT), True),  # the native driver
    (_status(pb.Code.MASTER_PERSISTENCE_TIMEOUT), True),
    (grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata()), True),
    (TransportError("no answer within 10 s", DEADLINE_EXCEEDED), True),
    (_caused(TimeoutError("timed out")), True),  # a remoting read (socket.timeout)
    # Answers that say the ack was not applied, or refused it: its message comes back if it was not acked.
    (InternalErrorException("INTERNAL_SERVER_ERROR", pb.Code.INTERNAL_SERVER_ERROR), False),
    (TooManyRequestsException("busy", pb.Code.TOO_MANY_REQUESTS), False),
    (_status(pb.Code.INTERNAL_SERVER_ERROR), False),
    (grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata()), False),
    (TransportError("connection refused", UNAVAILABLE), False),
    (_caused(ConnectionRefusedError("refused")), False),
])
def test_which_failed_calls_may_have_been_applied(error, unknown):
    assert outcome_unknown(error) is unknown


def _acks(*outcomes):
    """An ack that fails with each of ``outcomes`` in turn (None: it goes through), and the calls it got."""
    calls = []

    def ack():
        calls.append(1)
        e = outcomes[len(calls) - 1]
        if e is not None:
            raise e
    return ack, calls


TIMEOUT = _status(pb.Code.PROXY_TIMEOUT)
REFUSED = _status(pb.Code.TOO_MANY_REQUESTS)


def test_an_ack_that_timed_out_is_sent_again_and_each_unknown_outcome_is_reported():
    ack, calls = _acks(None)
    seen = []
    assert ack_again(ack, TIMEOUT, unknown=seen.append) is None
    assert len(calls) == 1 and seen == [TIMEOUT]


def test_at_most_ack_again_times_then_the_timeout_remains():
    ack, calls = _acks(*[TIMEOUT] * (ACK_AGAIN + 1))
    seen = []
    assert ack_again(ack, TIMEOUT, unknown=seen.append) is TIMEOUT
    assert len(calls) == ACK_AGAIN and len(seen) == ACK_AGAIN


def test_a_definite_failure_is_not_sent_again():
    ack, calls = _acks(None)
    failed = _status(pb.Code.INTERNAL_SERVER_ERROR)
    assert ack_again(ack, failed) is failed and calls == []
    # Nor one that follows an unknown outcome: it is what remains.
    ack, calls = _acks(failed)
    assert ack_again(ack, TIMEOUT) is failed and len(calls) == 1


def test_a_flow_control_refusal_is_sent_again_while_the_caller_says_so():
    ack, calls = _acks(REFUSED, None)
    tries = []
    assert ack_again(ack, REFUSED, refused=lambda e, n: tries.append(n) is None and flow_limited(e)) is None
    assert len(calls) == 2 and tries == [1, 2]


def test_a_lost_pair_whose_ack_timed_out_says_the_broker_may_have_applied_it():
    rows = [_sent("a"), _ev("received", "a", 1, 10),
            _ev("error", "a", 1, 11, detail=f"{ACK_UNKNOWN}: 50400, PROXY_TIMEOUT"),
            _sent("b"), _ev("received", "b", 1, 10), _ev("error", "b", 1, 11, detail="ack: 50001, INTERNAL")]
    led = classify(pd.DataFrame(rows), SUBS, {"G": 3, "H": 3, "A": 3, "B": 3}).set_index("ledger_id")
    assert list(led["class"]) == ["lost", "lost"]
    assert led.loc["a", "why"] == "delivered, its ack timed out: the broker may have applied it"
    assert led.loc["b", "why"] == "delivered, never acked"
