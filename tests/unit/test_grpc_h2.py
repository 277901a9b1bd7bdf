"""The native driver's HTTP/2 transport: gRPC's framing and statuses, and calls against a real grpcio server
(bytes in, bytes out: no protobuf), in this process's hub."""

from __future__ import annotations

import struct
import time
from concurrent import futures

import grpc
import pytest

from harness.client import grpc_framing, grpc_h2
from harness.client.grpc_framing import TransportError
from harness.client.grpc_h2 import H2Channel

pytestmark = pytest.mark.unit


def test_messages_split_anywhere_across_data_frames_come_out_whole():
    messages = [b"", b"a", b"x" * 70_000, b"tail"]
    wire = b"".join(grpc_framing.frame(m) for m in messages)
    for step in (1, 3, 5, 4096, len(wire)):
        stream = grpc_framing.Stream()
        for at in range(0, len(wire), step):
            stream.data(wire[at:at + step])
        assert stream.messages == messages and not stream.buffer


def test_a_compressed_message_is_refused_as_none_was_asked_for():
    with pytest.raises(TransportError, match="compressed"):
        grpc_framing.Stream().data(struct.pack(">?I", True, 1) + b"z")


def test_the_status_comes_from_the_trailers_with_its_message_decoded():
    stream = grpc_framing.Stream()
    stream.headers([(b":status", b"200"), (b"content-type", b"application/grpc")])
    stream.headers([(b"grpc-status", b"5"), (b"grpc-message", b"no%20such%20topic")])
    stream.end()
    with pytest.raises(TransportError, match="gRPC status 5, no such topic") as e:
        stream.result("route")
    assert e.value.code == 5 and stream.ended_ns > 0
    unended = grpc_framing.Stream()
    unended.end()  # a stream that ended without any grpc-status is not an OK one
    with pytest.raises(TransportError, match="without a grpc-status"):
        unended.result("x")


def test_the_deadline_is_whole_milliseconds_within_eight_digits():
    assert grpc_framing.grpc_timeout(15) == b"15000m"
    assert grpc_framing.grpc_timeout(0.0001) == b"1m"
    assert grpc_framing.grpc_timeout(10**9) == b"99999999m"


def _handlers(log: list[str]) -> grpc.GenericRpcHandler:
    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        log.append(dict(context.invocation_metadata()).get("x-test", ""))
        return request[::-1]

    def many(request: bytes, context: grpc.ServicerContext):
        for i in range(int(request)):
            yield b"%06d" % i + b"." * 200

    def slow(request: bytes, context: grpc.ServicerContext) -> bytes:
        time.sleep(float(request))
        return b"late"

    def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(grpc.StatusCode.NOT_FOUND, "nothing here")

    return grpc.method_handlers_generic_handler("t.S", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo), "Many": grpc.unary_stream_rpc_method_handler(many),
        "Slow": grpc.unary_unary_rpc_method_handler(slow), "Refuse": grpc.unary_unary_rpc_method_handler(refuse)})


def _serve(log: list[str], port: int = 0) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((_handlers(log),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


def test_calls_against_a_grpc_server_unary_streamed_refused_and_past_their_deadline():
    log: list[str] = []
    server, port = _serve(log)
    channel = H2Channel(f"127.0.0.1:{port}")
    try:
        big = bytes(range(256)) * 300  # 76,800 bytes: more than one DATA frame (16 KiB) to send
        assert channel.unary("/t.S/Echo", big, (("x-test", "h1"),), 5, "echo") == big[::-1]
        assert log == ["h1"]  # the metadata went as headers
        # 3,000 answers of 206 bytes: ten times the 64 KiB a peer may send before it is credited back.
        streamed = channel.call("/t.S/Many", b"3000", (), 10, "many")
        assert len(streamed) == 3000 and streamed[-1].startswith(b"002999")
        with pytest.raises(TransportError, match="5, nothing here"):
            channel.unary("/t.S/Refuse", b"", (), 5, "refuse")
        with pytest.raises(TransportError) as late:
            channel.unary("/t.S/Slow", b"2", (), 0.3, "slow")  # the server keeps grpc-timeout
        assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
        calls = [channel.begin("/t.S/Echo", b"%d" % i, (), 5) for i in range(20)]  # all in flight at once
        assert [c.result("echo") for c in calls] == [[(b"%d" % i)[::-1]] for i in range(20)]
        # More than MAX_UNARY_IN_FLIGHT sent together: the first ones go out while the rest wait for a slot.
        n = grpc_h2.MAX_UNARY_IN_FLIGHT * 2 + 7
        together = channel.begin_all("/t.S/Echo", [(b"%d" % i, ()) for i in range(n)], 5)
        assert [c.result("echo") for c in together] == [[(b"%d" % i)[::-1]] for i in range(n)]
        assert channel._slots.counter == grpc_h2.MAX_UNARY_IN_FLIGHT  # every slot back
        assert channel.connections == 1
    finally:
        channel.close()
        server.stop(0)


def test_a_call_on_a_connection_that_broke_fails_and_the_next_call_connects_again():
    log: list[str] = []
    server, port = _serve(log)
    channel = H2Channel(f"127.0.0.1:{port}")
    try:
        assert channel.unary("/t.S/Echo", b"ab", (), 5, "echo") == b"ba"
        channel._conn.highest_outbound_stream_id = grpc_h2.LAST_STREAM_ID  # as after 2^30 calls
        assert channel.unary("/t.S/Echo", b"ef", (), 5, "echo") == b"fe"  # on a new connection
        assert channel.connections == 2
        pending = channel.begin("/t.S/Slow", b"1", (), 5)
        server.stop(0).wait()
        with pytest.raises(TransportError) as broken:
            pending.result("slow")
        assert broken.value.code == grpc.StatusCode.UNAVAILABLE.value[0]
        with pytest.raises(TransportError, match="cannot connect"):
            channel.unary("/t.S/Echo", b"ab", (), 5, "echo")
        again, _ = _serve(log, port)
        try:
            assert channel.unary("/t.S/Echo", b"cd", (), 5, "echo") == b"dc"
            assert channel.connections == 3
        finally:
            again.stop(0)
        channel.close()
        with pytest.raises(TransportError, match="closed"):
            channel.unary("/t.S/Echo", b"ab", (), 5, "echo")
    finally:
        channel.close()
        server.stop(0)
