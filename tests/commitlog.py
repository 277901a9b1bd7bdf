"""Message records laid out as a RocketMQ broker stores them (and a pop returns them), built field by field:
what the remoting codec's tests and fuzzing decode, and the benchmarks' pop answers carry."""

from __future__ import annotations

import struct

from harness.client.remoting_messages import MAGIC_V1, MAGIC_V2, encode_properties

STORE_HOST = bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)


def stored(topic: str, body: bytes, props: dict[str, str], queue_id: int = 2, offset: int = 7, reconsume: int = 0,
           sys_flag: int = 0, store_ms: int = 1_795_000_000_123, physical: int = 4096, v6_born: bool = False) -> bytes:
    """One message record: the broker's layout, every integer big-endian."""
    magic = MAGIC_V2 if len(topic) > 127 else MAGIC_V1
    flag = sys_flag | (0x10 if v6_born else 0)
    born_host = (bytes(16) if v6_born else bytes([10, 0, 0, 9])) + struct.pack(">i", 50000)
    topic_b, props_b = topic.encode(), encode_properties(props).encode()
    rest = (struct.pack(">iiiqqiq", 0, queue_id, 0, offset, physical, flag, store_ms - 5) + born_host
            + struct.pack(">q", store_ms) + STORE_HOST + struct.pack(">iqi", reconsume, 0, len(body)) + body
            + (struct.pack(">b", len(topic_b)) if magic == MAGIC_V1 else struct.pack(">h", len(topic_b))) + topic_b
            + struct.pack(">h", len(props_b)) + props_b)
    return struct.pack(">ii", 8 + len(rest), magic) + rest
