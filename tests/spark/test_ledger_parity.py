"""The facts through Spark (a task per file or per slice of one, or Spark reading the events and splitting
them by message) are the facts of the whole run at once: classify's ledger row for row and the same tallies,
over every edge case of tests/unit/test_ledger.py, in two runs and two variants."""

import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.contracts.events import EVENT_SCHEMA_VERSION, SCHEMA, to_table
from harness.contracts.record import RunRecord
from harness.measure import tally
from harness.measure.ledger import COLUMNS, classify
from spark import facts
from spark.io import Archive
from tests.events import SUBS
from tests.events import ledger_event as _ev
from tests.events import sent as _sent

ALLOWED = {"G": 3, "H": 3, "A": 3, "B": 3}


def _cases() -> list[dict]:
    rows = [
        _sent("first"), _ev("received", "first", 1, 10), _ev("acked", "first", 1, 11),
        _sent("retried"), _ev("received", "retried", 1, 10), _ev("nacked", "retried", 1, 11),
        _ev("received", "retried", 2, 2000), _ev("acked", "retried", 2, 2001),
        _sent("never"), _sent("unacked"), _ev("received", "unacked", 1, 10),
        _sent("dlq"), _ev("received", "dlq", 1, 10), _ev("nacked", "dlq", 1, 11), _ev("dlq_seen", "dlq", None, 50),
        _sent("twice"), _ev("received", "twice", 1, 10), _ev("received", "twice", 1, 12),
        _ev("acked", "twice", 1, 30),
        _sent("nf"), _ev("received", "nf", 1, 10), _ev("error", "nf", 1, 11, detail="nack: timeout"),
        _ev("received", "nf", 2, 15_000), _ev("acked", "nf", 2, 15_001),
        _sent("a"), _ev("received", "a", 1, 10), _ev("nacked", "a", 1, 11),
        _ev("received", "a", 2, 2000, group="H", topic="U"), _ev("acked", "a", 2, 2001, group="H", topic="U"),
        _ev("received", "ghost", 1, 50), _ev("received", None, 1, 60, message_id="0A0B"),
        _ev("received", None, 1, 61, message_id="0A0C"), _ev("dlq_seen", None, None, 70, group="H", topic="U"),
        _ev("dlq_seen", None, None, 71, group="H", topic="U", message_id="other"),
        _sent("m", topic="F", intended="*"), _ev("received", "m", 1, 10, group="A", topic="F", intended="*"),
        _sent("t", topic="X", intended="*", tag="TagB"),
        _ev("received", "t", 1, 30, group="B", topic="X", intended="*", tag=None),
    ]
    runs = []
    for run in ("r1", "r2"):
        for variant in ("v", "w"):
            runs += [{**r, "run_id": run, "variant": variant} for r in rows]
    return runs


def _plain(v: object) -> object:
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | float | np.number):
        return float(v)
    return str(v)


@pytest.mark.parametrize("route", ["by file", "by slices of a file", "by slices of a file read in pieces",
                                   "read by spark"])
def test_the_spark_facts_are_the_facts_of_the_whole_run(spark, tmp_path, monkeypatch, route):
    from spark.analysis import local_facts, message_facts, summed_tallies  # their module needs a running Spark

    events = _cases()
    path = tmp_path / "events.parquet"
    # Read in pieces: row groups of 10 events, a reader of two of them at a time (facts.plan), each cut by slice.
    pieces = route == "by slices of a file read in pieces"
    pq.write_table(to_table([{c: r.get(c) for c in SCHEMA.names} for r in events]), path,
                   row_group_size=10 if pieces else None)
    record = RunRecord(run_id="r1", event_schema_version=EVENT_SCHEMA_VERSION, scenario={"name": "s"},
                       variants=[{"name": "v", "version": "5.3.3"}, {"name": "w", "version": "5.3.3"}])
    archive = Archive(str(tmp_path), record, [str(path)])
    if route.startswith("by slices of a file"):
        monkeypatch.setattr(facts, "SLICE_EVENTS", 25)
        monkeypatch.setattr(facts, "CHUNK_ROWS", 4)  # a run's rows in several parts too
        planned = facts.plan([(str(path), EVENT_SCHEMA_VERSION)], cores=2)
        assert len(planned.tasks) > 2 and len(planned.readers) == (math.ceil(len(events) / 20) if pieces else 1)
    routing = {run: tally.Routing(SUBS, ALLOWED, 20_000.0) for run in ("r1", "r2")}
    all_facts = message_facts(spark, [archive], ["v", "w"], routing, read_by_spark=route == "read by spark")
    got_tallies = local_facts(all_facts, facts.TALLY)
    whole = tally.slice_facts(pd.DataFrame(events), tally.Routing(SUBS, ALLOWED, 20_000.0))
    want = classify(pd.DataFrame(events), SUBS, ALLOWED)
    got = local_facts(all_facts, facts.LEDGER_ROW)
    assert len(got) == len(want) > 40
    key = ["run_id", "variant", "group", "ledger_id"]
    got = got.sort_values(key, ignore_index=True)[COLUMNS]
    want = want.sort_values(key, ignore_index=True)[COLUMNS]
    for c in COLUMNS:  # numbers compared as numbers (an int column may come back float from pandas)
        assert [_plain(v) for v in got[c]] == [_plain(v) for v in want[c]], c
    assert set(want["class"]) >= {"acked_first", "acked_after_retry", "lost", "dead_lettered", "duplicated",
                                  "cross_topic", "unknown"}
    by = ["run_id", "variant", "name"]
    assert (got_tallies.groupby(by)["value"].sum().to_dict() == whole.tallies.groupby(by)["value"].sum().to_dict())
    # Added up on the executors: a row per (run, scenario, variant, cycle, name), the whole run's sums.
    cycle = ["run_id", "scenario", "variant", "cycle", "name"]
    summed = summed_tallies(all_facts)
    assert not summed.duplicated(cycle).any() and len(summed) > 0
    assert summed.set_index(cycle)["value"].to_dict() == whole.tallies.groupby(cycle)["value"].sum().to_dict()
    assert len(local_facts(all_facts, facts.RETRY, columns=["t_client_ns"])) == len(whole.retries) > 0
