from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.events import COLUMNS, EventLog, MessageBody


def test_message_body_round_trip_and_garbage():
    b = MessageBody("w1-m7", "T", "G", 123, "run-1")
    assert MessageBody.decode(b.encode()) == b
    assert MessageBody.decode(b"not json") is None
    assert MessageBody.decode(b'{"ledger_id": "x"}') is None


def test_event_log_writes_numbered_parts_with_the_schema(tmp_path: Path):
    log = EventLog(tmp_path, "worker-1", {"run_id": "r", "variant": "v"}, flush_every=3)
    for i in range(7):
        log.record("sent", ledger_id=f"m{i}", t_client_ns=i)
    log.flush()
    parts = sorted(tmp_path.glob("*.parquet"))
    assert [p.name for p in parts] == ["worker-1-0000.parquet", "worker-1-0001.parquet", "worker-1-0002.parquet"]
    table = pq.read_table(parts[0])
    assert tuple(table.schema.names) == COLUMNS
    rows = [r for p in parts for r in pq.read_table(p).to_pylist()]
    assert [r["ledger_id"] for r in rows] == [f"m{i}" for i in range(7)]
    assert {r["variant"] for r in rows} == {"v"}
    assert not list(tmp_path.glob(".*.tmp"))
    assert log.flush() is None  # nothing left


def test_unknown_kind_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="unknown event kind"):
        EventLog(tmp_path, "w", {}).record("teleported")
