from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.contracts.events import COLUMNS, EventLog, MessageBody


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


def test_a_closed_log_seals_its_last_part_with_what_it_recorded(tmp_path):
    from harness.archive.writer import event_check
    from harness.contracts.events import EventLog, counted

    log = EventLog(tmp_path, "worker-1", {"run_id": "r", "variant": "v"}, flush_every=2)
    for kind in ("sent", "sent", "received"):
        log.record(kind, ledger_id="m")
    last = log.close()
    assert counted(last) == {"sent": 2, "received": 1}
    assert log.close() is None  # closed twice, nothing new: no second part
    assert counted(sorted(tmp_path.glob("*.parquet"))[0]) is None  # a part written on the way is not sealed
    checked, problems = event_check({"v": tmp_path})
    assert problems == [] and checked["v"]["worker-1"]["archived"] == {"sent": 2, "received": 1}


def test_a_worker_whose_shards_fall_short_is_named(tmp_path):
    from harness.archive.writer import event_check
    from harness.contracts.events import EventLog

    log = EventLog(tmp_path, "worker-1", {"variant": "v"}, flush_every=2)
    for _ in range(3):
        log.record("acked")
    log.close()
    sorted(tmp_path.glob("worker-1-*.parquet"))[0].unlink()  # a part lost on the way
    unsealed = EventLog(tmp_path, "worker-2", {"variant": "v"})
    unsealed.record("sent")
    unsealed.flush()  # killed before it closed its log
    _, problems = event_check({"v": tmp_path})
    assert problems == ["v: worker-1 recorded events that are not in its shards: {'acked': '1 of 3'}",
                        "v: worker-2 never sealed its events (killed before it closed its log?): 1 archived, how "
                        "many it recorded is unknown"]
