"""A variant whose Locust master dropped its workers, or whose workers recorded nothing, fails the run instead of
ending with the other variants' events alone (docs/findings/dropped-workers.md)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.workload.fleet import DROPPED, dropped_workers, event_rows
from harness.workload.launch import WORKER_SILENCE_S

# Lines of the master's log of the k8s run that lost its unpatched workers (2026-12-07), names shortened.
LOG = """\
[18:54:44,220] r/INFO/locust.runners: workers-1_00e4 (index 1) reported as ready. 2 workers connected.
[18:54:44,493] r/INFO/locust.runners: Sending spawn jobs of 3 users at 3.00 spawn rate to 2 ready workers
[18:54:48,513] r/INFO/locust.runners: Worker workers-0_19f8 failed to send heartbeat, setting state to missing.
[18:54:48,513] r/INFO/locust.runners: Worker workers-1_00e4 failed to send heartbeat, setting state to missing.
[18:54:48,513] r/INFO/locust.runners: The last worker went missing, stopping test.
"""


def test_the_workers_a_master_dropped_are_the_lines_that_say_so(tmp_path: Path):
    log = tmp_path / "locust-master.log"
    log.write_text(LOG)
    got = dropped_workers(log)
    assert [line.split("Worker ")[1].split()[0] for line in got] == ["workers-0_19f8", "workers-1_00e4"]
    log.write_text("\n".join(line for line in LOG.splitlines() if DROPPED not in line))
    assert dropped_workers(log) == []
    assert dropped_workers(tmp_path / "no-such.log") == []


def test_the_line_and_the_setting_are_locusts_own():
    # A Locust that words the drop otherwise, or reads its liveness elsewhere, would make the check and the longer
    # wait silent no-ops: both are in the Locust installed. (Its source read, not imported: importing Locust
    # patches threads with gevent, which a pytest-xdist worker does not survive.)
    source = (Path(importlib.util.find_spec("locust").origin).parent / "runners.py").read_text()
    assert DROPPED in source
    [default] = re.findall(r"^HEARTBEAT_LIVENESS = (\d+)$", source, re.MULTILINE)
    assert "heartbeat_liveness=HEARTBEAT_LIVENESS" in source and "c.heartbeat = HEARTBEAT_LIVENESS" in source
    assert WORKER_SILENCE_S > int(default)


def test_events_are_counted_over_every_shard_of_the_named_workers(tmp_path: Path):
    table = pa.table({"kind": ["sent", "received", "acked"]})
    pq.write_table(table, tmp_path / "worker-1-0000.parquet")
    pq.write_table(table.slice(0, 1), tmp_path / "worker-1-0001.parquet")
    pq.write_table(table.slice(0, 0), tmp_path / "worker-2-0000.parquet")
    pq.write_table(table, tmp_path / "worker-3-0000.parquet")
    assert event_rows(tmp_path, ["worker-1", "worker-2"]) == 4
    assert event_rows(tmp_path, ["worker-2"]) == 0
    assert event_rows(tmp_path, ["worker-4"]) == 0
