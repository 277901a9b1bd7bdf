"""The Spark analysis of run archives: the message facts of every archive computed by Spark tasks, each
holding whole messages (spark.facts, harness.measure.tally), then what spans the tasks: their tallies added up,
the exact quantiles and the verdict's samples from the retry rows they wrote, and, where the tasks saw any
FIFO messages or dead-letter reader errors, a pass of Spark over the events for those checks. No
deployment, no report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.contracts.verdict import MEDIAN, STATISTIC
from harness.measure import ordering, tally
from harness.measure.fault_impact import TIMES, impact
from spark import facts
from spark.io import Archive, read_events, scenario_of

LATENCIES = [m for m, statistic in STATISTIC.items() if statistic == MEDIAN]


def routing(archives: Sequence[Archive]) -> dict[str, facts.Routing]:
    out = {}
    for a in archives:
        sc = scenario_of(a)
        subs = {t: {g: list(f) for g, f in gs.items()} for t, gs in sc.subscriptions().items()}
        out[a.run_id] = facts.Routing(subs, dict(sc.allowed_deliveries()), sc.consume.long_poll_s * 1000)
    return out


def message_facts(spark: SparkSession, archives: Sequence[Archive], variants: Sequence[str], scratch: Path,
                  route: Mapping[str, facts.Routing], read_by_spark: bool = False) -> pd.DataFrame:
    """The facts of ``variants``' events in ``archives``: retry and ledger rows written as Parquet parts under
    ``scratch`` (spark.facts.RETRIES, LEDGER), the tallies returned (harness.measure.tally.TALLY_SCHEMA). ``route``:
    run id -> what its facts depend on besides its events (``routing``).

    Local archives are read by the tasks themselves, a task per event file or per share of a large one;
    archives Spark must read (s3a://, hdfs://; or ``read_by_spark``) are read by Spark and spread over
    the tasks by (run, variant, message)."""
    route, wanted, where = dict(route), list(variants), str(scratch)
    ddl = _ddl(tally.TALLY_SCHEMA)
    # (Nothing below may name this module's globals: the functions travel to Python workers, which have no
    # SparkContext.)
    if not read_by_spark and not any("://" in a.path for a in archives):
        tasks = facts.plan((f, a.event_version) for a in archives for f in a.event_files)

        def by_file(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    ev = facts.read_share(tasks[i], wanted)
                    yield from facts.facts(ev, route, Path(where), f"part-{i:05d}.parquet").to_batches()

        # One task per partition: the numbers 0..n-1, n partitions.
        return spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(by_file, ddl).toPandas()

    # A delivery whose body had no ledger id goes by its message id, as classify counts it; other events
    # without one stay together.
    by_message = F.when(F.col("ledger_id").isNull() & (F.col("kind") == "received"), F.col("message_id")) \
        .otherwise(F.coalesce(F.col("ledger_id"), F.lit("")))
    events = (read_events(spark, archives).filter(F.col("variant").isin(wanted)).select(*facts.INPUT_COLUMNS)
              .repartition("run_id", "variant", by_message))

    def by_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        name = f"part-p{TaskContext.get().partitionId():05d}.parquet"
        yield from facts.facts(facts.share_of_batches(batches), route, Path(where), name).to_batches()

    return events.mapInArrow(by_partition, ddl).toPandas()


def retry_rows(scratch: Path, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of every retry row the tasks wrote (read on the driver: a few numbers per retry)."""
    table = pq.read_table(scratch / facts.RETRIES, columns=list(columns))
    return table.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_string(t) else None)


_ARROW_TO_DDL = {"string": "string", "int32": "int", "int64": "bigint", "bool": "boolean", "double": "double"}


def _per_run(events: DataFrame, rows: Callable[[pd.DataFrame], pd.DataFrame], schema: pa.Schema) -> DataFrame:
    """A pandas function of one run's events, run on every run (applyInPandas), with ``schema``'s columns;
    integer columns travel as nullable integers so a missing time stays missing, not NaN."""
    ints = [f.name for f in schema if str(f.type).startswith("int")]

    def one(pdf: pd.DataFrame) -> pd.DataFrame:
        return rows(pdf).astype(dict.fromkeys(ints, "Int64"))

    return events.groupBy("run_id").applyInPandas(one, _ddl(schema))


def _ddl(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {_ARROW_TO_DDL[str(f.type)]}" for f in schema)


def fifo(events: DataFrame) -> DataFrame:
    """harness.measure.ordering's rows of FIFO messages, one run at a time (runs without message groups give none)."""
    return _per_run(events.filter(F.col("message_group").isNotNull()), ordering.fifo_rows, ordering.SCHEMA)


def dlq_reader_errors(events: DataFrame) -> DataFrame:
    """Per (scenario, variant, group), the errors of the harness's reader of that group's dead-letter queue
    (a DLQ the broker would not let it read): while it fails, a dead-lettered message counts as lost."""
    return (events.filter((F.col("kind") == "error") & F.col("topic").startswith("%DLQ%"))
            .groupBy("scenario", "variant", "group")
            .agg(F.count(F.lit(1)).alias("errors"), F.min("detail").alias("example"))
            .orderBy("scenario", "variant", "group"))


def measured_samples(retries: pd.DataFrame) -> pd.DataFrame:
    """Every measured wakeup and redelivery: (scenario, variant, run_id, cycle, metric, value)."""
    keys = ["scenario", "variant", "run_id", "cycle"]
    out = retries.melt(id_vars=keys, value_vars=LATENCIES, var_name="metric", value_name="value")
    return out[out["value"].notna()].reset_index(drop=True)


def outcome_samples(tallies: pd.DataFrame) -> pd.DataFrame:
    """The rest of the values the verdict compares, from the tallies per cycle: for each retry that never
    came back an endless (+inf) wakeup and redelivery, and for every retry asked for whether it stalled
    (1.0) or not (0.0)."""
    wide = tally.totals(tallies, ["scenario", "variant", "run_id", "cycle"])
    keys = wide[["scenario", "variant", "run_id", "cycle"]]
    never = wide["ledger_retries_never_redelivered"].to_numpy()
    stalls = wide["stalled_count"].to_numpy()
    calm = wide["ledger_retries_expected"].to_numpy() - stalls
    parts = [keys.loc[keys.index.repeat(never)].assign(metric=m, value=float("inf")) for m in LATENCIES]
    parts += [keys.loc[keys.index.repeat(n)].assign(metric="stalled", value=v) for n, v in ((stalls, 1.0), (calm, 0.0))]
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"cycle": "int64", "value": "float64"})




def fault_impacts(archives: Sequence[Archive], scratch: Path, retries: pd.DataFrame,
                  variants: Sequence[str]) -> tuple[list[dict], pd.DataFrame]:
    """What each fault of every archive that injected any did to ``variants``' messages
    (harness.measure.fault_impact, over that run's ledger rows under ``scratch`` and its ``retries``), with the run id
    and scenario of each; and those runs' traffic per second since their first send (scenario, variant,
    run_id, second, sends, deliveries: successful sends and first deliveries)."""
    runs = {a.run_id: a for a in archives if a.manifest.get("faults")}
    if not runs:
        return [], pd.DataFrame(columns=TIMELINE)
    rows = pq.read_table(Path(scratch) / facts.LEDGER, columns=["run_id", "variant", "class", *TIMES],
                         filters=[("run_id", "in", list(runs))]).to_pandas()
    for c in TIMES:
        rows[c] = rows[c].astype("Int64")
    out, lines = [], []
    for run_id, a in runs.items():
        records = [r for r in a.manifest["faults"] if r.get("variant") in variants]
        mine = rows[rows["run_id"] == run_id]
        scenario = scenario_of(a).name
        got = impact(mine, retries[retries["run_id"] == run_id], records)
        t0 = mine["sent_ns"].min()
        # The window in seconds since the run's first send, as the timeline's.
        out += [{"run_id": run_id, "scenario": scenario, **g,
                 **{k: (r[ns] - t0) / 1e9 if r.get(ns) is not None and not pd.isna(t0) else None
                    for k, ns in (("from_s", "started_ns"), ("to_s", "ended_ns"))}}
                for g, r in zip(got, records, strict=True)]
        # Every second from the first send to the last thing seen, zero where nothing happened.
        seconds = pd.RangeIndex(0, int((mine[TIMES].max().max() - t0) // 10**9) + 1, name="second")
        for variant, v in mine.groupby("variant"):
            counts = {name: ((v[col].dropna() - t0) // 10**9).astype("int64").value_counts()
                      for name, col in (("sends", "sent_ns"), ("deliveries", "first_received_ns"))}
            per = pd.DataFrame(counts).reindex(seconds).fillna(0).astype("int64").reset_index()
            lines.append(per.assign(scenario=scenario, variant=variant, run_id=run_id))
    return out, pd.concat(lines, ignore_index=True)[TIMELINE] if lines else pd.DataFrame(columns=TIMELINE)


TIMELINE = ["scenario", "variant", "run_id", "second", "sends", "deliveries"]
