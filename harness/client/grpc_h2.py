"""gRPC over one HTTP/2 connection in greenlets: the transport of the native gRPC driver under gevent.

Why not grpcio: its blocking calls must leave the hub's thread (a pool thread per call), and its streams are
read one message per call into C and back, each a GIL hand-off between the pool's threads; a third of a
draining worker's CPU went to the kernel trading the GIL (perf, docs/benchmarks.md). Here a greenlet of the
hub reads the connection, the h2 library frames it, and a receive's whole stream is handed to the caller at
its end: one switch per call, however many messages it carries, and no other thread.

What gRPC over HTTP/2 needs and is done here (grpc/doc/PROTOCOL-HTTP2.md): a POST per call to
``/service/method`` with ``content-type: application/grpc``, ``te: trailers`` and the deadline as
``grpc-timeout``; each message framed as a compressed flag (0: none is used) and a 4-byte big-endian length;
the status in the trailers (``grpc-status``, ``grpc-message``), or in the headers of a trailers-only answer
(the framing and the statuses: harness.client.grpc_framing). Flow control: the windows are opened wide at the
start and credited back as the data is read.

One channel belongs to the thread (the hub) that opened it: every call and stream waits on that hub. A broken
connection fails the calls it carried (TransportError) and the next call opens a new one.
"""

from __future__ import annotations

from collections.abc import Callable

import gevent
import gevent.event
import gevent.lock
from gevent import socket
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error
from h2.settings import SettingCodes
from hpack import NeverIndexedHeaderTuple

from harness.client.grpc_calls import BidiStream, Call
from harness.client.grpc_framing import UNAVAILABLE, Stream, TransportError, frame, grpc_timeout

WINDOW = 1 << 24  # bytes the proxy may send ahead on the connection and on each stream
READ_SIZE = 1 << 18
# Unary calls in flight on one connection at most; more wait for one to end. h2 counts a connection's open
# streams by walking them all at every new stream: with a burst's 2,048 sends in flight that walk took a fifth
# of a sending worker's CPU. Long polls and Telemetry streams are not counted (they hold their stream for long).
MAX_UNARY_IN_FLIGHT = 128
LAST_STREAM_ID = (1 << 31) - 1 - 2 * 1000  # a client's stream ids are odd and below 2^31; a margin for in-flight
SEND_WINDOW_WAIT_S = 10.0  # how long a send waits for the proxy to open its window before the call fails


class H2Channel:
    """gRPC calls to ``target`` (host:port, plaintext) over one HTTP/2 connection, opened at the first call."""

    def __init__(self, target: str, connect_timeout_s: float = 5.0, volatile_headers: tuple[str, ...] = ()) -> None:
        self.target = target
        self._volatile = {h.encode() for h in volatile_headers}  # metadata whose value changes every call
        self._connect_timeout_s = connect_timeout_s
        self._authority = target.encode()
        self._conn: H2Connection | None = None
        self._sock: socket.socket | None = None
        self._streams: dict[int, Stream] = {}
        self._reader: gevent.Greenlet | None = None
        self._lock = gevent.lock.RLock()  # one writer of the connection's state and socket at a time
        self._closed = False
        self._slots = gevent.lock.Semaphore(MAX_UNARY_IN_FLIGHT)
        self._hub = gevent.get_hub()  # the hub of the thread that opened the channel, where its greenlets run
        self._flush_pending = False
        self._window = gevent.event.Event()  # set when the proxy opens a send window (WINDOW_UPDATE, SETTINGS)
        self.connections = 0  # connections opened so far (1, then one per reconnect)

    # --- the connection ---------------------------------------------------------------------------------------

    def _connected(self) -> H2Connection:
        if self._closed:
            raise TransportError(f"the channel to {self.target} is closed")
        if self._conn is not None:
            return self._conn
        host, _, port = self.target.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=self._connect_timeout_s)
        except OSError as e:
            raise TransportError(f"cannot connect to {self.target}: {e}") from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = H2Connection(H2Configuration(client_side=True, header_encoding=None, validate_inbound_headers=False,
                                            normalize_inbound_headers=False, validate_outbound_headers=False,
                                            normalize_outbound_headers=False))
        conn.initiate_connection()
        conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: WINDOW, SettingCodes.ENABLE_PUSH: 0})
        conn.increment_flow_control_window(WINDOW - 65_535)
        self._sock, self._conn = sock, conn
        self.connections += 1
        self._flush()
        self._reader = gevent.spawn(self._read, sock, conn)
        return conn

    def _flush(self) -> None:
        conn, sock = self._conn, self._sock
        if conn is None or sock is None:
            return
        out = conn.data_to_send()
        if out:
            try:
                sock.sendall(out)
            except OSError as e:
                self._broken(sock, f"send to {self.target}: {e}")
                raise TransportError(f"send to {self.target}: {e}") from None

    def _read(self, sock: socket.socket, conn: H2Connection) -> None:
        reason = "the proxy closed the connection"
        try:
            while True:
                data = sock.recv(READ_SIZE)
                if not data:
                    break
                with self._lock:
                    if self._conn is not conn:
                        return
                    events = conn.receive_data(data)
                    for ev in events:
                        self._event(conn, ev)
                    self._flush()
        except Exception as e:  # noqa: BLE001 - whatever stops the reader fails the connection's calls, said why
            reason = f"connection to {self.target}: {type(e).__name__}: {e}"
        self._broken(sock, reason)

    def _event(self, conn: H2Connection, ev: object) -> None:
        if isinstance(ev, DataReceived):
            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            stream = self._streams.get(ev.stream_id)
            if stream is not None:
                try:
                    stream.data(ev.data)
                except TransportError as e:
                    self._streams.pop(ev.stream_id, None)
                    conn.reset_stream(ev.stream_id, ErrorCodes.PROTOCOL_ERROR)
                    stream.end(e.code, str(e))
        elif isinstance(ev, (ResponseReceived, TrailersReceived)):
            stream = self._streams.get(ev.stream_id)
            if stream is not None:
                stream.headers(ev.headers)
        elif isinstance(ev, StreamEnded):
            stream = self._streams.pop(ev.stream_id, None)
            if stream is not None:
                stream.end()
        elif isinstance(ev, StreamReset):
            stream = self._streams.pop(ev.stream_id, None)
            if stream is not None:
                stream.end(UNAVAILABLE, f"the proxy reset the stream (HTTP/2 error {ev.error_code})")
        elif isinstance(ev, (WindowUpdated, RemoteSettingsChanged)):
            self._window.set()
        elif isinstance(ev, ConnectionTerminated):
            raise TransportError(f"the proxy ended the connection (HTTP/2 GOAWAY, error {ev.error_code})")

    def _broken(self, sock: socket.socket, reason: str) -> None:
        """The connection is gone: every call on it fails; the next call opens another."""
        with self._lock:
            if self._sock is not sock:
                return
            streams, self._streams = self._streams, {}
            self._conn = self._sock = None
        try:
            sock.close()
        except OSError:
            pass
        for stream in streams.values():
            stream.end(UNAVAILABLE, reason)

    # --- calls ------------------------------------------------------------------------------------------------

    def _headers(self, path: bytes, metadata: tuple[tuple[str, str], ...], timeout_s: float | None) -> list:
        headers = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", self._authority),
                   (b"content-type", b"application/grpc"), (b"te", b"trailers")]
        if timeout_s is not None:
            headers.append((b"grpc-timeout", grpc_timeout(timeout_s)))
        for k, v in metadata:
            name = k.encode()
            # A value new in every call kept out of HPACK's table, so it does not push out the ones that repeat.
            headers.append(NeverIndexedHeaderTuple(name, v.encode()) if name in self._volatile else (name, v.encode()))
        return headers

    def _open(self, conn: H2Connection, path: bytes, metadata: tuple[tuple[str, str], ...],
              timeout_s: float | None, request: bytes | None, stream: Stream) -> tuple[int, bool]:
        """Under the lock: a new stream's headers, and its request too if it fits the send window (most do);
        nothing is flushed. Returns the stream id and whether the request is still to send."""
        if conn.highest_outbound_stream_id >= LAST_STREAM_ID:
            # A connection's stream ids run out after 2^30 calls (a day at 10,000 calls/s): a new one goes on;
            # the few calls in flight on the old one fail, each with this reason.
            self._broken(self._sock, f"connection to {self.target}: its stream ids ran out; a new one is opened")
            conn = self._connected()
        stream_id = conn.get_next_available_stream_id()
        self._streams[stream_id] = stream
        try:
            conn.send_headers(stream_id, self._headers(path, metadata, timeout_s), end_stream=False)
            if request is None:
                return stream_id, False
            data = frame(request)
            if len(data) <= min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size):
                conn.send_data(stream_id, data, end_stream=True)
                return stream_id, False
            return stream_id, True
        except H2Error as e:
            self._streams.pop(stream_id, None)
            raise TransportError(f"{path.decode()}: {e}") from None

    def _start(self, path: bytes, metadata: tuple[tuple[str, str], ...], timeout_s: float | None,
               request: bytes | None, stream: Stream) -> int:
        with self._lock:
            stream_id, more = self._open(self._connected(), path, metadata, timeout_s, request, stream)
        self._flush_soon()
        if more:
            self._send_rest(stream_id, frame(request))
        return stream_id

    def _send_rest(self, stream_id: int, data: bytes) -> None:
        try:
            self.send_data(stream_id, data, end=True)
        except TransportError:
            self.cancel(stream_id)
            raise

    def send_data(self, stream_id: int, data: bytes, end: bool) -> None:
        """``data`` on a stream, in frames the proxy accepts (16 KiB unless it said more) and no faster than its
        send windows open (a proxy starts a connection at 64 KiB; grpc-java's then grows to 1 MiB)."""
        at = 0
        while True:
            with self._lock:
                conn = self._conn
                if conn is None or stream_id not in self._streams:
                    raise TransportError(f"stream {stream_id} to {self.target} has ended")
                n = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size, len(data) - at)
                if n > 0 or at == len(data):
                    try:
                        conn.send_data(stream_id, data[at:at + n], end_stream=end and at + n == len(data))
                    except H2Error as e:
                        raise TransportError(f"stream {stream_id}: {e}") from None
                    at += n
                    self._flush()
                    if at == len(data):
                        return
                    continue
                self._window.clear()  # under the lock the reader sets it under: no opening is missed
            if not self._window.wait(SEND_WINDOW_WAIT_S):
                raise TransportError(f"stream {stream_id} to {self.target}: the proxy opened no send window "
                                     f"within {SEND_WINDOW_WAIT_S:g} s")

    def cancel(self, stream_id: int) -> None:
        """Reset a stream (the proxy drops the call) and end it as cancelled."""
        with self._lock:
            stream = self._streams.pop(stream_id, None)
            if stream is None or self._conn is None:
                return
            try:
                self._conn.reset_stream(stream_id, ErrorCodes.CANCEL)
                self._flush()
            except (H2Error, TransportError):
                pass
        stream.end(1, "cancelled")

    def begin(self, path: str, request: bytes, metadata: tuple[tuple[str, str], ...], timeout_s: float,
              unary: bool = True, deadline: bool = True) -> Call:
        """Send a call; its answer is taken later (Call.result), so several can be in flight at once. ``unary``
        False: a server-streaming call that may last (a long poll), not counted in MAX_UNARY_IN_FLIGHT.
        ``deadline`` False: the call carries no grpc-timeout (the server sees no deadline); ``timeout_s`` still
        bounds the wait here."""
        stream = Stream()
        if unary:
            self._slots.acquire()
            stream.slot = self._slots
        try:
            sent = timeout_s if deadline else None
            return Call(self, self._start(path.encode(), metadata, sent, request, stream), stream, timeout_s)
        except TransportError as e:
            stream.end(UNAVAILABLE, str(e))  # frees its slot
            raise

    def begin_all(self, path: str, calls: list[tuple[bytes, tuple[tuple[str, str], ...]]],
                  timeout_s: float) -> list[Call | TransportError]:
        """Send several unary calls (request, metadata) together, written to the connection at once: one write
        for all (or for as many as MAX_UNARY_IN_FLIGHT lets go), not one each; a call that could not be sent is
        its TransportError."""
        out: list[Call | TransportError] = []
        rest: list[tuple[int, bytes]] = []
        raw = path.encode()
        for request, metadata in calls:
            if not self._slots.acquire(blocking=False):
                self._flush_locked()  # what is started goes out first: it is what frees the slots waited for
                self._slots.acquire()
            stream = Stream()
            stream.slot = self._slots
            try:
                with self._lock:
                    stream_id, more = self._open(self._connected(), raw, metadata, timeout_s, request, stream)
            except TransportError as e:
                stream.end(UNAVAILABLE, str(e))  # frees its slot
                out.append(e)
                continue
            if more:
                rest.append((stream_id, frame(request)))
            out.append(Call(self, stream_id, stream, timeout_s))
        self._flush_soon()
        for stream_id, data in rest:
            try:
                self._send_rest(stream_id, data)
            except TransportError:
                pass  # its stream ended with the reason; its Call.result says it
        return out

    def _flush_soon(self) -> None:
        """Write what is pending once the calling greenlet yields to the hub, together with what the other
        greenlets wrote in the meantime (e.g. the acks of every receive that one read of the connection ended):
        one write of the socket for them all. The caller always waits for its answer next, which yields."""
        if not self._flush_pending:
            self._flush_pending = True
            self._hub.loop.run_callback(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_pending = False
        self._flush_locked()

    def _flush_locked(self) -> None:
        try:
            with self._lock:
                self._flush()
        except TransportError:
            pass  # the connection broke: every call on it has ended with the reason

    def call(self, path: str, request: bytes, metadata: tuple[tuple[str, str], ...], timeout_s: float,
             what: str) -> list[bytes]:
        """A unary or server-streaming call: every message of the answer, once the stream has ended."""
        return self.begin(path, request, metadata, timeout_s).result(what)

    def unary(self, path: str, request: bytes, metadata: tuple[tuple[str, str], ...], timeout_s: float,
              what: str) -> bytes:
        messages = self.call(path, request, metadata, timeout_s, what)
        if len(messages) != 1:
            raise TransportError(f"{what}: {len(messages)} messages in a unary answer", 13)
        return messages[0]

    def bidi(self, path: str, metadata: tuple[tuple[str, str], ...], on_message: Callable[[bytes], None]) -> BidiStream:
        """A bidirectional stream without deadline; each message the proxy sends goes to ``on_message`` (in the
        reader's greenlet: it must not block)."""
        stream = Stream(on_message)
        return BidiStream(self, self._start(path.encode(), metadata, None, None, stream), stream)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, sock = self._conn, self._sock
            if conn is not None and sock is not None:
                try:
                    conn.close_connection()
                    sock.sendall(conn.data_to_send())
                except (OSError, H2Error):
                    pass
        if sock is not None:
            self._broken(sock, "the channel was closed")
        if self._reader is not None:
            self._reader.kill(block=False)
