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
    assert req.ext_fields["attributes"] == "+message.type=NORMAL"


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
