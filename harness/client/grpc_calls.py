"""What a caller holds of a call in flight on the HTTP/2 transport (harness.client.grpc_h2): a call whose answer
is taken once it has ended (Call), a bidirectional stream kept open (BidiStream).
"""

from __future__ import annotations

from typing import Protocol

from harness.client.grpc_framing import DEADLINE_EXCEEDED, Stream, TransportError, frame


class Channel(Protocol):
    """What a call's handle asks of the connection that carries it (harness.client.grpc_h2.H2Channel)."""

    def send_data(self, stream_id: int, data: bytes, end: bool) -> None: ...

    def cancel(self, stream_id: int) -> None: ...


class Call:
    """A call in flight: its answer's messages once it has ended."""

    __slots__ = ("_channel", "_stream_id", "_stream", "_timeout_s")

    def __init__(self, channel: Channel, stream_id: int, stream: Stream, timeout_s: float) -> None:
        self._channel, self._stream_id, self._stream, self._timeout_s = channel, stream_id, stream, timeout_s

    def result(self, what: str) -> list[bytes]:
        """Every message of the answer; a status other than OK, or no end before the deadline, raises
        TransportError."""
        # The proxy keeps the deadline (grpc-timeout); this wait is for one that does not.
        if not self._stream.done.wait(self._timeout_s + 1.0):
            self._channel.cancel(self._stream_id)
            raise TransportError(f"{what}: no answer within {self._timeout_s:g} s", DEADLINE_EXCEEDED)
        return self._stream.result(what)

    @property
    def ended_ns(self) -> int:
        return self._stream.ended_ns


class BidiStream:
    """A bidirectional call kept open (the Telemetry stream): send messages, each answer to ``on_message``."""

    def __init__(self, channel: Channel, stream_id: int, stream: Stream) -> None:
        self._channel, self.stream_id, self._stream = channel, stream_id, stream

    def send(self, message: bytes) -> None:
        self._channel.send_data(self.stream_id, frame(message), end=False)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the stream ends (True) or ``timeout_s`` passes (False)."""
        return self._stream.done.wait(timeout_s)

    @property
    def ended(self) -> bool:
        return self._stream.done.is_set()

    def status(self) -> tuple[int | None, str]:
        return self._stream.status, self._stream.detail

    def cancel(self) -> None:
        self._channel.cancel(self.stream_id)
