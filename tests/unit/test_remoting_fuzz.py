"""Property-based fuzzing of the remoting decoders: whatever bytes a broker (or anything on its port) sends,
the client gets a Command, messages and handles, or the project's error (RemotingError, of which
MessageFormatError is one), never another exception, a hang or an unbounded allocation.

The cases are derandomized so CI sees the same ones every run; RMQ_HARNESS_FUZZ=N runs N random cases per
test instead (e.g. 100000 to search harder). The examples below add up to FUZZ_CASES.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.client import remoting
from harness.client.remoting import Command, Connection, RemotingError
from harness.client.remoting_messages import (
    MAX_BODY,
    NAME_VALUE,
    PROPERTY,
    MessageFormatError,
    PopHandle,
    decode_batch,
    decode_properties,
    handle_of,
)
from tests.commitlog import stored
from tests.unit.fuzzing import Cases

PER_TEST = {"frames": 2500, "headers": 1500, "stream": 300, "batches": 2500, "mutations": 2500,
            "properties": 500, "handles": 700}
FUZZ_CASES = sum(PER_TEST.values())
cases = Cases(PER_TEST)
seen = cases.seen


def frame(header: object, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame without its total-length word, with ``header`` as JSON (or as given, for bytes)."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">I", (serialize_type << 24) | len(h)) + h + body


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                           max_leaves=12)


def _decoded_or_refused(data: bytes) -> Command | None:
    try:
        cmd = remoting.decode(data)
    except RemotingError:
        return None
    assert type(cmd.code) is int and all(isinstance(v, str) for v in cmd.ext_fields.values())
    return cmd


@cases("frames")
@given(st.binary(max_size=512))
def test_any_bytes_decode_to_a_command_or_a_remoting_error(data):
    seen["frames"] += 1
    _decoded_or_refused(data)


@cases("headers")
@given(st.one_of(json_values, st.dictionaries(st.sampled_from(["code", "opaque", "flag", "remark", "extFields"]),
                                              json_values, max_size=5)),
       st.binary(max_size=64), st.integers(0, 3), st.integers(-8, 8))
def test_bad_header_json_and_lengths_are_refused_in_one_error(header, body, serialize_type, skew):
    seen["headers"] += 1
    data = frame(header, body, serialize_type)
    # A header length that overshoots or undershoots the JSON it prefixes.
    (mark,) = struct.unpack_from(">I", data)
    data = struct.pack(">I", (mark & 0xFF000000) | max(0, (mark & 0xFFFFFF) + skew)) + data[4:]
    cmd = _decoded_or_refused(data)
    if cmd is not None and serialize_type == 0 and skew == 0:
        assert cmd.code == header["code"] and cmd.body == body


def test_nested_json_deeper_than_the_parser_goes_is_a_remoting_error():
    with pytest.raises(RemotingError, match="not JSON"):
        remoting.decode(frame(b"[" * 100_000))


def _served(raw: bytes) -> tuple[Connection, socket.socket]:
    """A Connection whose socket reads ``raw`` and then the end of the stream (the peer stays open to take
    the request, so what is tested is the reading)."""
    ours, theirs = socket.socketpair()
    theirs.sendall(raw)
    theirs.shutdown(socket.SHUT_WR)
    conn = Connection("fuzz:0")
    conn._sock = ours
    return conn, theirs


@cases("stream")
@given(st.one_of(st.binary(max_size=256),
                 st.builds(lambda n, rest: struct.pack(">I", n) + rest, st.integers(0, 2**32 - 1),
                           st.binary(max_size=64))))
def test_a_stream_of_garbage_or_huge_length_words_ends_in_a_remoting_error_at_once(raw):
    seen["stream"] += 1
    conn, peer = _served(raw)
    try:
        resp = conn.call(Command(code=105), timeout_s=2.0)
    except RemotingError as e:
        assert "Broken pipe" not in str(e) and conn._sock is None  # dropped: the next call reconnects
    else:  # only a well-formed response to this very request is accepted
        assert resp.is_response
    finally:
        peer.close()


def test_a_length_word_of_4_gib_is_refused_without_reading_it():
    conn, peer = _served(struct.pack(">I", 2**32 - 1))
    try:
        with pytest.raises(RemotingError, match=f"outside 4..{remoting.MAX_FRAME}"):
            conn.call(Command(code=105), timeout_s=2.0)
    finally:
        peer.close()


def _batch_or_refused(data: bytes) -> None:
    try:
        messages = decode_batch(data)
    except MessageFormatError:
        return
    assert sum(1 for _ in messages) >= (1 if data else 0)


@cases("batches")
@given(st.binary(max_size=600))
def test_any_bytes_decode_to_messages_or_a_format_error(data):
    seen["batches"] += 1
    _batch_or_refused(data)


VALID = (stored("PopTopic", b"hello", {"UNIQ_KEY": "AB", "TAGS": "TagA"})
         + stored("%RETRY%G_PopTopic", zlib.compress(b"x" * 300), {"POP_CK": "1 2 3 4 1 broker-a 0 7"}, sys_flag=1))


@cases("mutations")
@given(st.integers(0, len(VALID)), st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)),
                                            max_size=6),
       st.sampled_from([None, 0, 4, 40, 68]), st.integers(-2**31, 2**31 - 1))
def test_truncated_and_corrupted_batches_and_huge_length_fields(cut, flips, field_at, value):
    """A valid two-message batch, cut short, with bytes changed, and with a size, length or count field
    (message size, queue id, body length...) set to anything a 32-bit integer holds."""
    seen["mutations"] += 1
    data = bytearray(VALID)
    for at, byte in flips:
        data[at] = byte
    if field_at is not None:
        data[field_at:field_at + 4] = struct.pack(">i", value)
    _batch_or_refused(bytes(data[:cut]))


def test_a_compressed_body_that_inflates_without_bound_is_refused():
    bomb = zlib.compress(bytes(MAX_BODY + 1), 9)
    with pytest.raises(MessageFormatError, match="inflates past"):
        decode_batch(stored("PopTopic", bomb, {}, sys_flag=1))
    truncated = zlib.compress(b"y" * 1000)[:-6]
    with pytest.raises(MessageFormatError, match="truncated"):
        decode_batch(stored("PopTopic", truncated, {}, sys_flag=1))


@cases("properties")
@given(st.text(alphabet=st.sampled_from(["a", "K", "=", " ", NAME_VALUE, PROPERTY, "\x00", "é"]), max_size=80))
def test_any_property_map_text_decodes_to_a_dict_of_named_entries(text):
    seen["properties"] += 1
    props = decode_properties(text)
    assert all(k and NAME_VALUE not in k and PROPERTY not in k for k in props)


@cases("handles")
@given(st.text(max_size=60), st.dictionaries(st.sampled_from(["startOffsetInfo", "popTime", "invisibleTime",
                                                              "reviveQid"]), st.text(max_size=30), max_size=4))
def test_any_pop_ck_or_response_header_gives_a_handle_or_a_format_error(ck, header):
    seen["handles"] += 1
    (plain, retry) = decode_batch(VALID)
    for msg, props in ((retry, {**retry.properties, "POP_CK": ck}), (plain, plain.properties)):
        msg = type(msg)(**{**msg.__dict__, "properties": props})
        try:
            h = handle_of(msg, header, "broker-a")
        except MessageFormatError:
            continue
        assert isinstance(h, PopHandle) and PopHandle.parse(str(h)) == h


def test_the_suite_ran_every_case_it_counts(request):
    """Runs last in this module: the cases above add up to FUZZ_CASES (at least 10,000), and each test ran every
    case it counts."""
    assert FUZZ_CASES >= 10_000
    cases.check(request)
