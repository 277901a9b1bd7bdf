import json
import socket
import struct
import threading

import pytest

from harness.client import remoting
from harness.client.remoting import Command, RemotingError, decode, encode


def test_frame_layout():
    frame = encode(Command(17, {"topic": "T", "readQueueNums": 4}, body=b"xy", opaque=7))
    total, mark = struct.unpack_from(">II", frame)
    assert total == len(frame) - 4
    assert mark >> 24 == 0  # JSON
    header = json.loads(frame[8 : 8 + (mark & 0xFFFFFF)])
    assert header["code"] == 17 and header["opaque"] == 7
    assert header["extFields"] == {"topic": "T", "readQueueNums": "4"}  # values travel as strings
    assert frame.endswith(b"xy")


def test_round_trip():
    cmd = Command(200, {"a": "b"}, body=b"\x00\x01", opaque=3, flag=1, remark="r")
    back = decode(encode(cmd)[4:])
    assert (back.code, back.ext_fields, back.body, back.opaque, back.remark) == (200, {"a": "b"}, b"\x00\x01", 3, "r")
    assert back.is_response


def test_rejects_rocketmq_binary_headers():
    frame = bytearray(encode(Command(1))[4:])
    frame[0] = 1  # ROCKETMQ serialize type
    with pytest.raises(RemotingError, match="serialize type 1"):
        decode(bytes(frame))


@pytest.fixture
def answering_server():
    """A socket that answers one request with a canned response code (logic test, not a broker)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    state = {"code": 0, "remark": None, "seen": None}

    def serve():
        conn, _ = srv.accept()
        with conn:
            (n,) = struct.unpack(">I", conn.recv(4))
            data = b""
            while len(data) < n:
                data += conn.recv(n - len(data))
            req = decode(data)
            state["seen"] = req
            # A server-initiated request first, which the client must skip.
            conn.sendall(encode(Command(999, opaque=req.opaque + 1000)))
            conn.sendall(encode(Command(state["code"], opaque=req.opaque, flag=1, remark=state["remark"],
                                        body=b'{"ok":1}')))

    t = threading.Thread(target=serve, daemon=True)
    yield srv, state, t
    srv.close()


def test_create_topic_sends_header_and_checks_code(answering_server):
    srv, state, t = answering_server
    t.start()
    remoting.create_topic(f"127.0.0.1:{srv.getsockname()[1]}", "Topic_A", queues=2)
    t.join(5)
    req = state["seen"]
    assert req.code == remoting.UPDATE_AND_CREATE_TOPIC
    assert req.ext_fields["topic"] == "Topic_A" and req.ext_fields["writeQueueNums"] == "2"
    # A NORMAL topic carries no attribute (a slave's copy of it would fail on one: apache/rocketmq#9403).
    assert "attributes" not in req.ext_fields


def test_a_fifo_topic_says_so(answering_server):
    srv, state, t = answering_server
    t.start()
    remoting.create_topic(f"127.0.0.1:{srv.getsockname()[1]}", "Topic_F", queues=2, message_type="FIFO")
    t.join(5)
    assert state["seen"].ext_fields["attributes"] == "+message.type=FIFO"


def test_error_code_becomes_remoting_error(answering_server):
    srv, state, t = answering_server
    state.update(code=1, remark="topic name invalid")
    t.start()
    with pytest.raises(RemotingError, match="create group G failed: code 1: topic name invalid"):
        remoting.create_group(f"127.0.0.1:{srv.getsockname()[1]}", "G")


def test_connection_refused_is_remoting_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(RemotingError, match=str(port)):
        remoting.cluster_info(f"127.0.0.1:{port}")


def _read_requests(sock: socket.socket, n: int) -> list[Command]:
    data, out = b"", []
    while len(out) < n:
        data += sock.recv(65536)
        while len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">I", data)[0]:
            (length,) = struct.unpack_from(">I", data)
            out.append(decode(data[4 : 4 + length]))
            data = data[4 + length :]
    return out


def test_pipelined_calls_match_responses_by_opaque_whatever_their_order():
    ours, theirs = socket.socketpair()
    conn = remoting.Connection("pair:0")
    conn._sock = ours

    def serve():
        reqs = _read_requests(theirs, 3)
        # Answered last first, all in one write, with a stray response to nobody's request among them.
        stray = encode(Command(7, opaque=max(r.opaque for r in reqs) + 100, flag=1))
        answers = [encode(Command(0, {"n": r.ext_fields["n"]}, opaque=r.opaque, flag=1)) for r in reversed(reqs)]
        theirs.sendall(answers[0] + stray + b"".join(answers[1:]))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        resps = conn.calls([Command(1, {"n": str(i)}) for i in range(3)], timeout_s=5)
    finally:
        t.join(5)
        theirs.close()
        conn.close()
    assert [r.ext_fields["n"] for r in resps] == ["0", "1", "2"]


def test_a_pipeline_cut_short_fails_every_call_and_drops_the_connection():
    ours, theirs = socket.socketpair()
    conn = remoting.Connection("pair:0")
    conn._sock = ours

    def serve():
        [first, _] = _read_requests(theirs, 2)
        theirs.sendall(encode(Command(0, opaque=first.opaque, flag=1)))
        theirs.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(RemotingError, match="closed by peer"):
            conn.calls([Command(1), Command(2)], timeout_s=5)
    finally:
        t.join(5)
        theirs.close()
    assert conn._sock is None
