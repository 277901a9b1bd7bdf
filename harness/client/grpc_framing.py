"""gRPC's framing over HTTP/2, apart from the connection that carries it (harness.client.grpc_h2): each message
length-prefixed, the deadline as ``grpc-timeout``, and a call's side of its stream, the answer's messages unframed
and its status read from its headers and trailers (grpc/doc/PROTOCOL-HTTP2.md); TransportError, a call that
failed with a gRPC status of the transport's own.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from urllib.parse import unquote

import gevent.event
import gevent.lock

_FRAME = struct.Struct(">?I")
# The gRPC statuses the transport gives a call itself (grpc/doc/statuscodes.md).
OK = 0
DEADLINE_EXCEEDED = 4
UNAVAILABLE = 14


class TransportError(Exception):
    """The call did not reach the proxy, or its answer did not come back (a gRPC status, not the proxy's)."""

    def __init__(self, message: str, code: int = UNAVAILABLE) -> None:
        super().__init__(message)
        self.code = code


def frame(message: bytes) -> bytes:
    """One gRPC length-prefixed message, uncompressed."""
    return _FRAME.pack(False, len(message)) + message


def grpc_timeout(seconds: float) -> bytes:
    """The grpc-timeout header's value: whole milliseconds (at most 8 digits, as the spec allows)."""
    return b"%dm" % min(max(int(seconds * 1000), 1), 99_999_999)


class Stream:
    """One call's side of the connection: its unframed messages, its status when it ends."""

    __slots__ = ("buffer", "messages", "on_message", "done", "status", "detail", "ended_ns", "slot")

    def __init__(self, on_message: Callable[[bytes], None] | None = None) -> None:
        self.buffer = bytearray()
        self.messages: list[bytes] = []
        self.on_message = on_message  # a bidirectional stream hands each message on as it comes
        self.done = gevent.event.Event()
        self.status: int | None = None
        self.detail = ""
        self.ended_ns = 0  # the wall clock when the stream ended, taken by the reader as it read the end
        self.slot: gevent.lock.Semaphore | None = None  # the channel's slot it holds while in flight

    def data(self, chunk: bytes) -> None:
        buf = self.buffer
        buf += chunk
        at, size = 0, len(buf)
        while size - at >= 5:
            compressed, length = _FRAME.unpack_from(buf, at)
            if size - at - 5 < length:
                break
            if compressed:
                raise TransportError("the proxy sent a compressed message though none was asked for", 13)
            message = bytes(buf[at + 5:at + 5 + length])
            at += 5 + length
            if self.on_message is not None:
                self.on_message(message)
            else:
                self.messages.append(message)
        if at:
            del buf[:at]

    def headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        for name, value in headers:
            if name == b"grpc-status":
                self.status = int(value)
            elif name == b"grpc-message":
                self.detail = unquote(value.decode("utf-8", "replace"))
            elif name == b":status" and value != b"200":
                self.status, self.detail = UNAVAILABLE, f"HTTP status {value.decode()}"

    def end(self, status: int | None = None, detail: str = "") -> None:
        if status is not None and self.status is None:
            self.status, self.detail = status, detail
        if self.status is None:
            self.status, self.detail = 13, "the stream ended without a grpc-status"
        self.ended_ns = time.time_ns()
        self.done.set()
        if self.slot is not None:
            self.slot, slot = None, self.slot
            slot.release()

    def result(self, what: str) -> list[bytes]:
        if self.status != OK:
            raise TransportError(f"{what}: gRPC status {self.status}, {self.detail}", self.status or 13)
        return self.messages
