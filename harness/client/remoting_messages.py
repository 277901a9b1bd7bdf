"""What remoting pop hands back: stored messages in the broker's binary layout, and the receipt handle
(the ``POP_CK`` extra info) that acks and invisible-time changes name a message by.

Layouts as the 5.x broker writes them (docs/remoting.md has the field tables and their sources).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from harness.client.remoting import RemotingError

MAGIC_V1 = -626843481  # topic length in one byte
MAGIC_V2 = -626843477  # topic length in two bytes (topics over 127 bytes)
COMPRESSED = 0x1
BORN_HOST_V6 = 0x10
STORE_HOST_V6 = 0x20
COMPRESSION_TYPE = 0x700
ZLIB_TYPES = (0, 3)  # 0: producers from before the type bits, 3: ZLIB

# Property names (MessageConst) and their separators.
TAGS = "TAGS"
UNIQ_KEY = "UNIQ_KEY"
POP_CK = "POP_CK"
SHARDING_KEY = "__SHARDINGKEY"  # the message group of a FIFO message
WAIT = "WAIT"
PRIORITY = "_SYS_MSG_PRIORITY_"  # a message's priority on a PRIORITY topic (MessageConst.PROPERTY_PRIORITY)
NAME_VALUE = "\x01"
PROPERTY = "\x02"

RETRY_PREFIX = "%RETRY%"


class MessageFormatError(RemotingError):
    """A pop response the harness cannot read."""


# A body that inflates past this is refused rather than inflated: the broker's own cap on a message is 4 MiB
# by default (maxMessageSize), and a stream of garbage must not allocate without bound.
MAX_BODY = 16 * 1024 * 1024


def _inflate(body: bytes, at: int) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(body, MAX_BODY)
    if d.unconsumed_tail:
        raise MessageFormatError(f"message at byte {at}: body inflates past {MAX_BODY} bytes")
    if not d.eof:
        raise MessageFormatError(f"message at byte {at}: compressed body is truncated")
    return out


@dataclass(frozen=True)
class StoredMessage:
    topic: str
    queue_id: int
    queue_offset: int
    sys_flag: int
    born_ts_ms: int
    store_ts_ms: int
    reconsume_times: int
    body: bytes
    properties: dict[str, str]
    offset_msg_id: str

    @property
    def message_id(self) -> str:
        """The producer's id (UNIQ_KEY), which the broker adds when a producer did not."""
        return self.properties.get(UNIQ_KEY) or self.offset_msg_id


def encode_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE}{v}{PROPERTY}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
    out = {}
    for piece in text.split(PROPERTY):
        name, sep, value = piece.partition(NAME_VALUE)
        if sep and name:
            out[name] = value
    return out


def _host(data: bytes, at: int, v6: bool) -> tuple[bytes, int]:
    size = (16 if v6 else 4) + 4
    return data[at:at + size], at + size


def decode_message(data: bytes, at: int = 0) -> tuple[StoredMessage, int]:
    """One stored message at ``at``; returns it and where the next one starts."""
    try:
        total, magic, _crc, queue_id, _flag, queue_offset, physical, sys_flag, born = struct.unpack_from(
            ">iiiiiqqiq", data, at)
        if magic not in (MAGIC_V1, MAGIC_V2):
            raise MessageFormatError(f"message at byte {at}: magic code {magic} is neither V1 nor V2")
        p = at + struct.calcsize(">iiiiiqqiq")
        _born_host, p = _host(data, p, bool(sys_flag & BORN_HOST_V6))
        (store,) = struct.unpack_from(">q", data, p)
        store_host, p = _host(data, p + 8, bool(sys_flag & STORE_HOST_V6))
        reconsume, _prepared, body_len = struct.unpack_from(">iqi", data, p)
        p += struct.calcsize(">iqi")
        body = data[p:p + body_len]
        p += body_len
        if sys_flag & COMPRESSED:
            kind = (sys_flag & COMPRESSION_TYPE) >> 8
            if kind not in ZLIB_TYPES:
                raise MessageFormatError(f"message at byte {at}: body compressed with type {kind} (LZ4 or ZSTD); "
                                         "only ZLIB is read")
            body = _inflate(body, at)
        fmt = ">b" if magic == MAGIC_V1 else ">h"
        (topic_len,) = struct.unpack_from(fmt, data, p)
        p += struct.calcsize(fmt)
        topic = data[p:p + topic_len].decode()
        p += topic_len
        (props_len,) = struct.unpack_from(">h", data, p)
        props = decode_properties(data[p + 2:p + 2 + props_len].decode())
    except (struct.error, UnicodeDecodeError, zlib.error) as e:
        raise MessageFormatError(f"message at byte {at}: {e}") from None
    if total <= 0 or at + total > len(data):
        raise MessageFormatError(f"message at byte {at}: size {total} runs past the {len(data)}-byte response")
    msg_id = (store_host + struct.pack(">q", physical)).hex().upper()
    return StoredMessage(topic, queue_id, queue_offset, sys_flag, born, store, reconsume, bytes(body), props,
                         msg_id), at + total


def decode_batch(data: bytes) -> list[StoredMessage]:
    """Every message of a pop response's body."""
    out, at = [], 0
    while at < len(data):
        msg, at = decode_message(data, at)
        out.append(msg)
    return out


def retry_flag(topic: str) -> int:
    """0: a normal topic; 1: a V1 retry topic (%RETRY%group_topic); 2: a V2 one (%RETRY%group+topic)."""
    if not topic.startswith(RETRY_PREFIX):
        return 0
    return 2 if "+" in topic else 1


@dataclass(frozen=True)
class PopHandle:
    """The receipt of one popped message (the ``POP_CK`` string's eight fields, in order)."""

    ck_offset: int
    pop_time: int
    invisible_ms: int
    revive_qid: int
    retry: int
    broker_name: str
    queue_id: int
    offset: int

    @classmethod
    def parse(cls, text: str) -> PopHandle:
        f = text.split(" ")
        if len(f) < 8:
            raise MessageFormatError(f"POP_CK {text!r}: {len(f)} fields, expected 8")
        try:
            return cls(int(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4]), f[5], int(f[6]), int(f[7]))
        except ValueError:
            raise MessageFormatError(f"POP_CK {text!r}: a number field is not a number") from None

    def __str__(self) -> str:
        return " ".join(str(x) for x in (self.ck_offset, self.pop_time, self.invisible_ms, self.revive_qid,
                                         self.retry, self.broker_name, self.queue_id, self.offset))

    def topic(self, topic: str, group: str) -> str:
        """The topic the message was popped from, which acks and changes must name."""
        return {0: topic, 1: f"{RETRY_PREFIX}{group}_{topic}", 2: f"{RETRY_PREFIX}{group}+{topic}"}[self.retry]

    def changed(self, pop_time: int, invisible_ms: int, revive_qid: int) -> PopHandle:
        """The handle after a successful invisible-time change: a new checkpoint at the message's own offset
        (the old one is acked by the broker; acking it again would do nothing)."""
        return PopHandle(self.offset, pop_time, invisible_ms, revive_qid, self.retry, self.broker_name,
                         self.queue_id, self.offset)


def offsets_by_queue(info: str | None) -> dict[str, str]:
    """``startOffsetInfo``: '<retry> <queueId> <offset>;...' -> {'<retry>@<queueId>': offset}."""
    out = {}
    for entry in (info or "").split(";"):
        parts = entry.split(" ")
        if len(parts) == 3:
            out[f"{parts[0]}@{parts[1]}"] = parts[2]
    return out


def handle_of(msg: StoredMessage, header: Mapping[str, str], broker_name: str) -> PopHandle:
    """A popped message's handle: its own POP_CK (the broker sets one on retries), or one built from the
    pop response's header (its checkpoint start for the message's queue, pop time, invisible time)."""
    if POP_CK in msg.properties:
        return PopHandle.parse(msg.properties[POP_CK])
    retry = retry_flag(msg.topic)
    start = offsets_by_queue(header.get("startOffsetInfo")).get(f"{retry}@{msg.queue_id}")
    if start is None:
        raise MessageFormatError(f"pop response has no checkpoint for queue {retry}@{msg.queue_id} "
                                 f"(startOffsetInfo {header.get('startOffsetInfo')!r})")
    try:
        return PopHandle(int(start), int(header["popTime"]), int(header["invisibleTime"]), int(header["reviveQid"]),
                         retry, broker_name, msg.queue_id, msg.queue_offset)
    except (KeyError, ValueError) as e:
        raise MessageFormatError(f"pop response header {dict(header)!r}: {e}") from None
