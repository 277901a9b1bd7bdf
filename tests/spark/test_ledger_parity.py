"""The ledger through Spark (split by message across partitions, Arrow-backed strings) is classify's ledger:
every edge case of tests/unit/test_ledger.py at once, in two runs and two variants, row for row."""

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.events import SCHEMA, to_table
from harness.ledger import COLUMNS, classify
from tests.unit.test_ledger import SUBS, _ev, _sent

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


def test_the_spark_ledger_is_the_pandas_ledger_row_for_row(spark):
    from spark.analysis import ledger  # its module needs a running Spark

    events = _cases()
    want = classify(pd.DataFrame(events), SUBS, ALLOWED)
    table = to_table([{c: r.get(c) for c in SCHEMA.names} for r in events])
    df = spark.createDataFrame(table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(),
                                                             pa.int32(): pd.Int32Dtype()}.get))
    routing = {run: (SUBS, ALLOWED) for run in ("r1", "r2")}
    got = ledger(df, routing).toPandas()
    assert len(got) == len(want) > 40
    key = ["run_id", "variant", "group", "ledger_id"]
    got = got.sort_values(key, ignore_index=True)[COLUMNS]
    want = want.sort_values(key, ignore_index=True)[COLUMNS]
    for c in COLUMNS:  # numbers compared as numbers (an int column may come back float from pandas)
        assert [_plain(v) for v in got[c]] == [_plain(v) for v in want[c]], c
    assert set(want["class"]) >= {"acked_first", "acked_after_retry", "lost", "dead_lettered", "duplicated",
                                  "cross_topic", "unknown"}
