"""The remoting pop codec on bytes laid out as the broker stores them (built field by field in tests/commitlog.py)."""

import struct
import zlib

import pytest

from harness.client.remoting_messages import (
    POP_CK,
    MessageFormatError,
    PopHandle,
    decode_batch,
    decode_properties,
    encode_properties,
    handle_of,
    retry_flag,
)
from tests.commitlog import STORE_HOST, stored


def test_a_batch_decodes_message_by_message_with_times_ids_and_properties():
    a = stored("T", b"hello", {"UNIQ_KEY": "AB12", "TAGS": "TagA"}, reconsume=0)
    b = stored("T", b"again", {"TAGS": "TagB"}, queue_id=0, offset=3, reconsume=2, v6_born=True, physical=8192)
    first, second = decode_batch(a + b)
    assert (first.topic, first.body, first.queue_id, first.queue_offset) == ("T", b"hello", 2, 7)
    assert (first.store_ts_ms, first.born_ts_ms, first.reconsume_times) == (1_795_000_000_123, 1_795_000_000_118, 0)
    assert first.message_id == "AB12" and first.properties["TAGS"] == "TagA"
    # Without UNIQ_KEY the id is the store host and commit-log offset, as hex.
    assert second.message_id == (STORE_HOST + struct.pack(">q", 8192)).hex().upper()
    assert (second.body, second.reconsume_times, second.queue_offset) == (b"again", 2, 3)


def test_long_topics_compressed_bodies_and_bad_records():
    long_topic = "L" * 200
    (m,) = decode_batch(stored(long_topic, zlib.compress(b"x" * 5000), {}, sys_flag=0x1 | 0x300))
    assert m.topic == long_topic and m.body == b"x" * 5000
    with pytest.raises(MessageFormatError, match="compressed with type 1"):
        decode_batch(stored("T", b"lz4?", {}, sys_flag=0x1 | 0x100))
    good = stored("T", b"b", {})
    with pytest.raises(MessageFormatError, match="magic code"):
        decode_batch(good[:4] + struct.pack(">i", 1234) + good[8:])
    with pytest.raises(MessageFormatError, match="byte 0"):
        decode_batch(good[:30])


def test_properties_round_trip_and_skip_junk():
    props = {"TAGS": "TagA", "UNIQ_KEY": "X", "__SHARDINGKEY": "mg1"}
    assert decode_properties(encode_properties(props)) == props
    assert decode_properties("a\x01b\x02\x02junk\x02") == {"a": "b"}


def test_a_handle_names_the_topic_the_message_was_popped_from():
    assert [retry_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == [0, 1, 2]
    h = PopHandle.parse("5 1795000000000 15000 3 1 broker-a 0 9")
    assert str(h) == "5 1795000000000 15000 3 1 broker-a 0 9"
    assert h.topic("T", "G") == "%RETRY%G_T" and PopHandle.parse(str(h)).topic("T", "G") == "%RETRY%G_T"
    moved = h.changed(pop_time=1795000001000, invisible_ms=1000, revive_qid=3)
    # After a change the checkpoint starts at the message's own offset.
    assert str(moved) == "9 1795000001000 1000 3 1 broker-a 0 9"
    with pytest.raises(MessageFormatError, match="expected 8"):
        PopHandle.parse("1 2 3")


def test_handles_come_from_the_message_or_from_the_pop_response():
    header = {"popTime": "1795000000000", "invisibleTime": "15000", "reviveQid": "4",
              "startOffsetInfo": "0 2 6;1 0 11", "msgOffsetInfo": "0 2 7"}
    (plain,) = decode_batch(stored("T", b"x", {}, queue_id=2, offset=7))
    assert str(handle_of(plain, header, "broker-a")) == "6 1795000000000 15000 4 0 broker-a 2 7"
    own = "11 1795000000500 15000 4 1 broker-a 0 11"
    (retry,) = decode_batch(stored("T", b"x", {POP_CK: own}, queue_id=0, offset=11, reconsume=1))
    assert str(handle_of(retry, header, "broker-a")) == own
    (orphan,) = decode_batch(stored("T", b"x", {}, queue_id=3))
    with pytest.raises(MessageFormatError, match="no checkpoint for queue 0@3"):
        handle_of(orphan, header, "broker-a")
