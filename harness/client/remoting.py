"""The RocketMQ remoting wire format, a connection that speaks it, and the admin requests the harness needs.

No Python library speaks remoting with pop (the native client wraps a C++ library without pop, ack or
change-invisible calls, and has no admin API), so this is hand-written from the protocol: a frame is
``[total length][serialize type + header length][JSON header][body]``, big-endian, where total length
counts everything after its own four bytes. Headers are always JSON here: the binary (ROCKETMQ) header
keeps the request code in 16 bits, and the pop codes (200050...) do not fit.

Sockets are plain: under a gevent-patched Locust worker a call yields to other users while it waits, so a
long poll costs no thread.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import struct
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

# Request codes (org.apache.rocketmq.remoting.protocol.RequestCode).
QUERY_CONSUMER_OFFSET = 14
GET_MAX_OFFSET = 30
UPDATE_AND_CREATE_TOPIC = 17
GET_ALL_TOPIC_CONFIG = 21
UPDATE_BROKER_CONFIG = 25
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
DELETE_SUBSCRIPTIONGROUP = 207
DELETE_TOPIC_IN_BROKER = 215
DELETE_TOPIC_IN_NAMESRV = 216
INVOKE_BROKER_TO_RESET_OFFSET = 222
SEND_MESSAGE_V2 = 310
POP_MESSAGE = 200050
POP_LITE_MESSAGE = 200070  # lite topics (RIP-83, 5.5.0): a pop of the events of one client's subscription
LITE_SUBSCRIPTION_CTL = 200071
ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
# Response codes.
SUCCESS = 0
PULL_NOT_FOUND = 19
QUERY_NOT_FOUND = 22  # a group that never committed an offset on that queue
POLLING_FULL = 209  # too many pops suspended: nothing now
POLLING_TIMEOUT = 210  # a pop that found nothing, at once or when its long poll ran out

_LANGUAGE = "PYTHON"
# A 5.x client version; at least 401 (V4_9_4), or the name server writes route bodies with unquoted
# integer keys that no JSON parser accepts.
_VERSION = 491
_RESPONSE_FLAG = 0b1
# The Java side's default com.rocketmq.remoting.frameMaxLength: a longer length word is garbage, and
# reading it would allocate without bound.
MAX_FRAME = 16 * 1024 * 1024
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
    """Decode one frame without its leading total-length word; anything else than a well-formed JSON-header
    frame is a RemotingError."""
    if len(frame) < 4:
        raise RemotingError(f"frame of {len(frame)} bytes has no header length")
    (mark,) = struct.unpack_from(">I", frame, 0)
    serialize_type, header_len = mark >> 24, mark & 0xFFFFFF
    if serialize_type != 0:
        raise RemotingError(f"unsupported serialize type {serialize_type} (only JSON is spoken)")
    if 4 + header_len > len(frame):
        raise RemotingError(f"header length {header_len} runs past the {len(frame)}-byte frame")
    try:
        header = json.loads(frame[4 : 4 + header_len])
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise RemotingError(f"header is not JSON: {str(e)[:100]}") from None
    if not isinstance(header, dict):
        raise RemotingError(f"header is a JSON {type(header).__name__}, not an object")
    if "code" not in header:
        raise RemotingError("header has no code")
    ext = header.get("extFields") or {}
    fields = {k: header.get(k, 0) for k in ("code", "opaque", "flag")}
    remark = header.get("remark")
    bad = [k for k, v in fields.items() if type(v) is not int]
    if bad or not isinstance(ext, dict) or not (remark is None or isinstance(remark, str)):
        raise RemotingError(f"header fields of the wrong type: {', '.join(bad) or 'extFields or remark'}")
    return Command(
        code=fields["code"],
        ext_fields={str(k): v if isinstance(v, str) else json.dumps(v) for k, v in ext.items()},
        body=bytes(frame[4 + header_len :]),
        opaque=fields["opaque"],
        flag=fields["flag"],
        remark=remark,
    )


def _lock() -> AbstractContextManager:
    """A lock that suits the sockets in use. A Locust worker patches sockets for gevent but not threads (the
    gRPC client needs real ones): there a thread lock held across a socket wait would stop every greenlet
    of the worker, so it takes gevent's; elsewhere a thread lock."""
    try:
        from gevent import monkey
    except ImportError:
        return threading.Lock()
    if monkey.is_module_patched("socket"):
        from gevent.lock import Semaphore

        return Semaphore()
    return threading.Lock()


class Connection:
    """One TCP connection to a broker or name server, one caller at a time (callers wait their turn: a
    burst's sending greenlets share their producer's connection), opened on first use and again after any
    failure (the broker also closes channels idle for 120 s). A caller may send several requests at once
    (``calls``): one write, then their responses in whatever order they come, as the Java client's
    asynchronous calls share a channel."""

    def __init__(self, address: str, connect_timeout_s: float = 5.0) -> None:
        self.address = address
        self._connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._buf = bytearray()  # read but not yet decoded; one recv often holds several responses
        self._lock = _lock()

    def call(self, cmd: Command, timeout_s: float) -> Command:
        """Send ``cmd`` and wait up to ``timeout_s`` for its response."""
        return self.calls([cmd], timeout_s)[0]

    def calls(self, cmds: list[Command], timeout_s: float) -> list[Command]:
        """Send every command in one write and return their responses in the same order; each read waits
        up to ``timeout_s``. A transport error fails them all (the connection is dropped)."""
        with self._lock:
            return self._calls(cmds, timeout_s)

    def _calls(self, cmds: list[Command], timeout_s: float) -> list[Command]:
        waiting: dict[int, int] = {}
        for i, cmd in enumerate(cmds):
            cmd.opaque = next(_opaque)
            waiting[cmd.opaque] = i
        out: list[Command | None] = [None] * len(cmds)
        try:
            if self._sock is None:
                host, port = self.address.rsplit(":", 1)
                self._sock = socket.create_connection((host, int(port)), timeout=self._connect_timeout_s)
            self._sock.settimeout(timeout_s)
            self._sock.sendall(b"".join(encode(c) for c in cmds))
            while waiting:
                resp = self._read_frame()
                # A broker may send requests of its own (to clients that sent heartbeats; these do not).
                i = waiting.pop(resp.opaque, None) if resp.is_response else None
                if i is not None:
                    out[i] = resp
        except (OSError, RemotingError) as e:
            self.close()  # a half-read frame leaves the stream unusable
            raise RemotingError(f"{self.address}: {e}") from e
        return out  # type: ignore[return-value]  # every slot is filled once waiting is empty

    def _fill(self, n: int) -> None:
        """Read until at least ``n`` bytes are buffered."""
        assert self._sock is not None
        while len(self._buf) < n:
            chunk = self._sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise RemotingError("connection closed by peer")
            self._buf += chunk

    def _read_frame(self) -> Command:
        self._fill(4)
        (length,) = struct.unpack_from(">I", self._buf, 0)
        if not 4 <= length <= MAX_FRAME:
            raise RemotingError(f"frame length {length} outside 4..{MAX_FRAME} bytes")
        self._fill(4 + length)
        frame = bytes(self._buf[4 : 4 + length])
        del self._buf[: 4 + length]
        return decode(frame)

    def close(self) -> None:
        self._buf.clear()
        if self._sock is not None:
            sock, self._sock = self._sock, None
            sock.close()


def invoke(address: str, cmd: Command, timeout_s: float = 5.0) -> Command:
    """Send one request to host:port and return its response (one connection per call)."""
    conn = Connection(address, timeout_s)
    try:
        return conn.call(cmd, timeout_s)
    finally:
        conn.close()


def failure(resp: Command, what: str) -> RemotingError | None:
    """None when ``resp`` is a success; otherwise the RemotingError naming ``what`` and the code."""
    return None if resp.code == SUCCESS else RemotingError(f"{what} failed: code {resp.code}: {resp.remark}")


def pipelined(conn: Connection, cmds: list[Command], what: str, timeout_s: float = 5.0) -> list[Exception | None]:
    """Send ``cmds`` together on ``conn``; per command None (success) or its error (a transport error is
    every command's)."""
    try:
        responses = conn.calls(cmds, timeout_s)
    except RemotingError as e:
        return [e] * len(cmds)
    return [failure(r, what) for r in responses]


def check(resp: Command, what: str) -> Command:
    """``resp`` when it is a success; raises its ``failure`` otherwise."""
    err = failure(resp, what)
    if err is not None:
        raise err
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
    }
    # A topic without the attribute is NORMAL. Written only when it is not: a slave replays the master's topic
    # attributes as changes and 5.3.3 refuses those, emptying its whole topic table (apache/rocketmq#9403).
    if message_type != "NORMAL":
        fields["attributes"] = f"+message.type={message_type}"
    check(invoke(broker, Command(UPDATE_AND_CREATE_TOPIC, fields)), f"create topic {topic}")


def broker_settings(broker: str) -> dict[str, str]:
    """Every setting the broker runs with (GET_BROKER_CONFIG: its broker, store and network configs, as
    key=value lines); a key it does not know is not among them, whatever its broker.conf said."""
    resp = check(invoke(broker, Command(GET_BROKER_CONFIG)), "get broker config")
    out = {}
    for line in resp.body.decode(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def max_offset(broker: str, topic: str, queue_id: int) -> int:
    """The queue's next offset (GET_MAX_OFFSET): how many messages it has ever held."""
    resp = check(invoke(broker, Command(GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})),
                 f"max offset of {topic}:{queue_id}")
    return int(resp.ext_fields["offset"])


def consumer_offset(broker: str, group: str, topic: str, queue_id: int) -> int | None:
    """The offset ``group`` committed on the queue (QUERY_CONSUMER_OFFSET), None when it committed none."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "setZeroIfNotFound": "false"}
    resp = invoke(broker, Command(QUERY_CONSUMER_OFFSET, fields))
    if resp.code == QUERY_NOT_FOUND:
        return None
    return int(check(resp, f"offset of {group} on {topic}:{queue_id}").ext_fields["offset"])


def topics(broker: str) -> set[str]:
    """The topics a broker has (GET_ALL_TOPIC_CONFIG): a slave's come from its master every 60 s."""
    resp = check(invoke(broker, Command(GET_ALL_TOPIC_CONFIG)), "get topic configs")
    return set((json.loads(resp.body).get("topicConfigTable") or {}).keys())


def groups(broker: str) -> set[str]:
    """The subscription groups a broker has (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), synced to a slave as topics are."""
    resp = check(invoke(broker, Command(GET_ALL_SUBSCRIPTIONGROUP_CONFIG)), "get subscription groups")
    return set((json.loads(resp.body).get("subscriptionGroupTable") or {}).keys())


def create_group(broker: str, group: str, retry_max_times: int = 16, orderly: bool = False,
                 consume_enable: bool = True, lite_bind_topic: str | None = None) -> None:
    """Create a subscription group, or change one (the request replaces its whole configuration).
    ``lite_bind_topic``: the LITE parent topic the group consumes (the group attribute lite.bind.topic, 5.5.0;
    without it the broker refuses the group's lite pops)."""
    config = {
        "consumeMessageOrderly": orderly,
        "groupName": group,
        "consumeEnable": consume_enable,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": retry_max_times,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
    }
    if lite_bind_topic is not None:
        config["attributes"] = {"+lite.bind.topic": lite_bind_topic}
    body = json.dumps(config).encode()
    check(
        invoke(broker, Command(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)),
        f"create group {group}",
    )


def update_broker_config(broker: str, settings: dict[str, object]) -> None:
    """Change broker settings at runtime (UPDATE_BROKER_CONFIG: a Java properties body). The broker takes any key,
    known or not, and says nothing of those it does not know: callers check the keys first (``broker_settings``)."""
    body = "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in settings.items()).encode()
    check(invoke(broker, Command(UPDATE_BROKER_CONFIG, body=body)), "update broker config")


def reset_offset(broker: str, group: str, topic: str, timestamp_ms: int, queue_id: int = -1) -> dict[int, int]:
    """The broker's server-side reset of ``group``'s offsets on every queue of ``topic`` (or queue ``queue_id``)
    (INVOKE_BROKER_TO_RESET_OFFSET): to the first message stored at or after ``timestamp_ms`` (0: the earliest), or
    to the queues' ends (-1). Returns each queue's new offset."""
    fields = {"topic": topic, "group": group, "queueId": str(queue_id), "timestamp": str(timestamp_ms),
              "isForce": "true"}
    resp = check(invoke(broker, Command(INVOKE_BROKER_TO_RESET_OFFSET, fields)), f"reset offset of {group} on {topic}")
    # ResetOffsetBody is fastjson with MessageQueue objects as map keys, which is not JSON: read the pairs out.
    text = (resp.body or b"").decode(errors="replace")
    return {int(q): int(o) for q, o in re.findall(r'"queueId":(\d+)[^{}]*\}:(-?\d+)', text)}


def runtime_info(broker: str) -> dict[str, str]:
    """The broker's runtime figures (GET_BROKER_RUNTIME_INFO: a KVTable), e.g. brokerVersionDesc "V5_3_3"."""
    resp = check(invoke(broker, Command(GET_BROKER_RUNTIME_INFO)), "get broker runtime info")
    return {str(k): str(v) for k, v in (json.loads(resp.body).get("table") or {}).items()}


def version_of(runtime: dict[str, str]) -> str | None:
    """The release a broker's runtime info names ("V5_3_3" -> "5.3.3"; "V5_3_4_SNAPSHOT" -> "5.3.4-SNAPSHOT")."""
    desc = runtime.get("brokerVersionDesc", "")
    if not desc.startswith("V"):
        return None
    parts = desc[1:].split("_")
    numbers = [p for p in parts if p.isdigit()]
    rest = [p for p in parts if not p.isdigit()]
    return ".".join(numbers) + ("-" + "-".join(rest) if rest else "") if numbers else None


def delete_topic(broker: str, topic: str) -> None:
    """Remove a topic from one broker (DELETE_TOPIC_IN_BROKER); the name server keeps its route until
    ``delete_topic_in_namesrv``."""
    check(invoke(broker, Command(DELETE_TOPIC_IN_BROKER, {"topic": topic})), f"delete topic {topic}")


def delete_topic_in_namesrv(namesrv: str, topic: str) -> None:
    check(invoke(namesrv, Command(DELETE_TOPIC_IN_NAMESRV, {"topic": topic})), f"delete the route of {topic}")


def delete_group(broker: str, group: str) -> None:
    """Remove a subscription group and its offsets from one broker (DELETE_SUBSCRIPTIONGROUP)."""
    check(invoke(broker, Command(DELETE_SUBSCRIPTIONGROUP, {"groupName": group, "cleanOffset": "true"})),
          f"delete group {group}")


def cluster_info(namesrv: str) -> str:
    """The name server's view of clusters and brokers (fastjson; keys may be unquoted ints)."""
    resp = check(invoke(namesrv, Command(GET_BROKER_CLUSTER_INFO)), "get cluster info")
    return resp.body.decode()


@dataclass(frozen=True)
class Route:
    """Where a topic lives: its master broker (name and address) and its queues there."""

    broker_name: str
    broker: str
    read_queues: int
    write_queues: int


def route(namesrv: str, topic: str, timeout_s: float = 5.0) -> Route:
    """The topic's route from the name server (the first broker that serves it; the harness runs one)."""
    resp = check(invoke(namesrv, Command(GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}),
                         timeout_s), f"route of {topic}")
    data = json.loads(resp.body)
    queues = {q["brokerName"]: q for q in data.get("queueDatas") or []}
    for b in data.get("brokerDatas") or []:
        master = (b.get("brokerAddrs") or {}).get("0")
        if master and b.get("brokerName") in queues:
            q = queues[b["brokerName"]]
            return Route(b["brokerName"], master, int(q["readQueueNums"]), int(q["writeQueueNums"]))
    raise RemotingError(f"route of {topic}: no master broker serves it ({resp.body[:200]!r})")
