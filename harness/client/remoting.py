"""The RocketMQ remoting wire format, and the few admin requests the harness needs.

No Python library speaks remoting (the old native client has no admin API), so this is hand-written
from the protocol: a frame is ``[total length][serialize type + header length][JSON header][body]``,
big-endian, where total length counts everything after its own four bytes.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
from dataclasses import dataclass, field

# Request codes (org.apache.rocketmq.remoting.protocol.RequestCode).
UPDATE_AND_CREATE_TOPIC = 17
GET_BROKER_CLUSTER_INFO = 106
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
SUCCESS = 0

_LANGUAGE = "PYTHON"
# Any recent client version works with 5.x brokers; this is V5_3_3's ordinal in MQVersion.
_VERSION = 491
_RESPONSE_FLAG = 0b1
_opaque = itertools.count(1)


class RemotingError(Exception):
    """A remoting request failed: a transport error or a non-success response code."""


@dataclass
class Command:
    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flag: int = 0
    remark: str | None = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _RESPONSE_FLAG)


def encode(cmd: Command) -> bytes:
    header = {
        "code": cmd.code,
        "language": _LANGUAGE,
        "version": _VERSION,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext_fields:
        header["extFields"] = {k: str(v) for k, v in cmd.ext_fields.items()}
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    # High byte of the second word is the serialize type: 0 = JSON.
    return (
        struct.pack(">II", 4 + len(header_bytes) + len(cmd.body), len(header_bytes) & 0xFFFFFF)
        + header_bytes
        + cmd.body
    )


def decode(frame: bytes) -> Command:
    """Decode one frame without its leading total-length word."""
    (mark,) = struct.unpack_from(">I", frame, 0)
    serialize_type, header_len = mark >> 24, mark & 0xFFFFFF
    if serialize_type != 0:
        raise RemotingError(f"unsupported serialize type {serialize_type} (only JSON is spoken)")
    header = json.loads(frame[4 : 4 + header_len])
    return Command(
        code=header["code"],
        ext_fields=header.get("extFields") or {},
        body=bytes(frame[4 + header_len :]),
        opaque=header.get("opaque", 0),
        flag=header.get("flag", 0),
        remark=header.get("remark"),
    )


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RemotingError("connection closed by peer")
        buf += chunk
    return bytes(buf)


def invoke(address: str, cmd: Command, timeout_s: float = 5.0) -> Command:
    """Send one request to host:port and return its response (one connection per call)."""
    host, port = address.rsplit(":", 1)
    cmd.opaque = next(_opaque)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(encode(cmd))
            while True:
                (length,) = struct.unpack(">I", _read_exact(sock, 4))
                resp = decode(_read_exact(sock, length))
                # Brokers may push requests of their own on the channel; wait for our answer.
                if resp.is_response and resp.opaque == cmd.opaque:
                    return resp
    except OSError as e:
        raise RemotingError(f"{address}: {e}") from e


def _check(resp: Command, what: str) -> Command:
    if resp.code != SUCCESS:
        raise RemotingError(f"{what} failed: code {resp.code}: {resp.remark}")
    return resp


def create_topic(
    broker: str, topic: str, queues: int = 4, message_type: str = "NORMAL"
) -> None:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,  # read + write
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": "false",
        "attributes": f"+message.type={message_type}",
    }
    _check(invoke(broker, Command(UPDATE_AND_CREATE_TOPIC, fields)), f"create topic {topic}")


def create_group(broker: str, group: str, retry_max_times: int = 16, orderly: bool = False) -> None:
    config = {
        "consumeMessageOrderly": orderly,
        "groupName": group,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": retry_max_times,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
    }
    body = json.dumps(config).encode()
    _check(
        invoke(broker, Command(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)),
        f"create group {group}",
    )


def cluster_info(namesrv: str) -> str:
    """The name server's view of clusters and brokers (fastjson; keys may be unquoted ints)."""
    resp = _check(invoke(namesrv, Command(GET_BROKER_CLUSTER_INFO)), "get cluster info")
    return resp.body.decode()
