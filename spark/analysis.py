"""The Spark analysis of run archives: the message facts of every archive computed by Spark tasks, each
holding whole messages (spark.facts, harness.measure.tally), then what spans the tasks: their tallies added up,
the exact quantiles and the verdict's samples from the retry rows they wrote, and, where the tasks saw any
FIFO messages or dead-letter reader errors, a pass of Spark over the events for those checks. No
deployment, no report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.contracts.events import COLUMNS, SCHEMA
from harness.contracts.verdict import MEDIAN, SAMPLE_COUNT, STATISTIC
from harness.measure import ordering, tally
from harness.measure.fault_impact import TIMES, impact
from spark import facts
from spark.io import Archive, scenario_of

LATENCIES = [m for m, statistic in STATISTIC.items() if statistic == MEDIAN]


def routing(archives: Sequence[Archive]) -> dict[str, tally.Routing]:
    """Each run's routing (harness.measure.tally.Routing), by its id."""
    return {a.run_id: tally.Routing.of(scenario_of(a)) for a in archives}


def message_facts(spark: SparkSession, archives: Sequence[Archive], variants: Sequence[str],
                  route: Mapping[str, tally.Routing], read_by_spark: bool = False, sample_rows: int | None = None,
                  seed: int = 1) -> DataFrame:
    """The facts of ``variants``' events in ``archives`` as parts on the executors (spark.facts.PARTS_SCHEMA):
    tallies, retry rows, ledger rows, retry latencies, and a sample of the retry rows for about ``sample_rows``
    (spark.facts.sample_fraction; None: all of them). ``route``: run id -> what its facts depend on besides its
    events (``routing``).

    Archives the tasks can open themselves (a path every node reads, file://, s3://) are read a task per event
    file, or per slice of a large one, whose readers read it once and Spark's shuffle brings each slice's pieces
    to its task (spark.facts.plan); with ``read_by_spark`` Spark reads them and spreads their events over
    the tasks by (run, variant, message)."""
    route, wanted, chunk = dict(route), list(variants), facts.CHUNK_ROWS
    ddl = _ddl(facts.PARTS_SCHEMA)
    # (Nothing below may name this module's globals: the functions travel to Python workers, which have no
    # SparkContext.)
    if not read_by_spark:
        planned = facts.plan(((f, a.event_version) for a in archives for f in a.event_files),
                             spark.sparkContext.defaultParallelism)
        tasks, readers, whole = planned.tasks, planned.readers, planned.whole
        fraction = facts.sample_fraction(tasks, sample_rows)

        def by_file(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    events = facts.read_slice(tasks[i], wanted)
                    yield from facts.facts(events, route, i, chunk, fraction, seed).to_batches()

        def by_slice(task: int, got: Iterator[tuple[int, tuple[int, bytes]]]) -> Iterator[tuple]:
            events = facts.slice_events(piece for _, piece in got)
            yield from (tuple(r.values()) for r in facts.facts(events, route, task, chunk, fraction, seed).to_pylist())

        # One task per partition: the numbers 0..n-1, n partitions (none: an empty DataFrame).
        out = spark.range(0, len(whole), 1, len(whole)).mapInArrow(by_file, ddl)
        if readers:
            # Each reader's pieces to the task of their slice: partition k - len(whole) is task k, alone.
            first, sliced = len(whole), len(tasks) - len(whole)
            pieces = (spark.sparkContext.parallelize(range(len(readers)), len(readers))
                      .flatMap(lambda n: facts.pieces(readers[n], n, wanted))
                      .partitionBy(sliced, lambda k: k - first)
                      .mapPartitionsWithIndex(lambda k, got: by_slice(first + k, got)))
            out = out.union(spark.createDataFrame(pieces, ddl, verifySchema=False))
        return out

    # A delivery whose body had no ledger id goes by its message id, as classify counts it; other events
    # without one stay together.
    by_message = F.when(F.col("ledger_id").isNull() & (F.col("kind") == "received"), F.col("message_id")) \
        .otherwise(F.coalesce(F.col("ledger_id"), F.lit("")))
    events = (read_events(spark, archives, wanted).select(*facts.INPUT_COLUMNS)
              .repartition("run_id", "variant", by_message))

    def by_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        task = TaskContext.get().partitionId()
        yield from facts.facts(facts.slice_of_batches(batches), route, task, chunk, 1.0, seed).to_batches()

    return events.mapInArrow(by_partition, ddl)


def read_events(spark: SparkSession, archives: Sequence[Archive], variants: Sequence[str]) -> DataFrame:
    """The events of ``variants`` in ``archives`` as one Spark DataFrame with the current event columns (null
    where an older archive lacks one), read by the tasks through pyarrow as the facts are (a local path every
    node reads, s3://): Spark itself needs no connector for the archives' filesystem."""
    files = [(f, a.event_version) for a in archives for f in a.event_files]
    wanted, columns = list(variants), list(COLUMNS)

    def by_file(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from facts.read_table(*files[i], wanted, columns).to_batches()

    return spark.range(0, len(files), 1, max(1, len(files))).mapInArrow(by_file, _ddl(SCHEMA))


def parts_of(parts: DataFrame, fact: str, runs: Sequence[str] | None = None) -> DataFrame:
    """The parts (spark.facts.PARTS_SCHEMA) of one kind of fact (spark.facts.TALLY, RETRY, LEDGER_ROW), of
    ``runs`` only if given."""
    got = parts.where(F.col("fact") == fact)
    return got if runs is None else got.where(F.col("run_id").isin(list(runs)))


def local_facts(parts: DataFrame, fact: str, runs: Sequence[str] | None = None,
                columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of one kind of fact, on the driver, in the order they were made: for what is small (the
    tallies; the rows of the runs with faults). Integers stay integers (pandas' Int64 where there are nulls:
    a nanosecond time through a float would lose its last digits)."""
    got = parts_of(parts, fact, runs).select(*facts.ORDER, "data").toArrow().sort_by([(c, "ascending")
                                                                                       for c in facts.ORDER])
    schema = facts.OF_KIND[fact] if columns is None else pa.schema([facts.OF_KIND[fact].field(c) for c in columns])
    tables = [facts.decode(d, schema.names) for d in got.column("data").to_pylist()] or [schema.empty_table()]
    return pa.concat_tables(tables).to_pandas()


def summed_tallies(parts: DataFrame) -> pd.DataFrame:
    """The tallies (harness.measure.tally.TALLY_SCHEMA) added up per (run, scenario, variant, cycle, name) on the
    executors, on the driver sorted by those keys. A task's messages are a hash's slice of its run's, so every
    task tallies every cycle: brought back as they are, the tasks' rows number tasks x cycles x figures (2.2M at
    10M events, some 180M at 100M, which the driver could not hold). Every tally is a sum (``tally.totals``
    pivots with ``sum``, ``cycles`` counts the cycles whose ``sent`` is above 0 and a sum of counts is above 0
    when one of them is), so the sums give the same totals. Each part is summed in its Python worker first
    (Arrow's hash aggregation), so Spark's shuffle moves a row per task, cycle and figure at most."""
    schema = tally.TALLY_SCHEMA
    keys = [n for n in schema.names if n != "value"]

    def summed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for data in batch.column(0).to_pylist():
                rows = facts.decode(data, schema.names).group_by(keys).aggregate([("value", "sum")])
                yield from rows.rename_columns([*keys, "value"]).select(schema.names).cast(schema).to_batches()

    got = (parts_of(parts, facts.TALLY).select("data").mapInArrow(summed, _ddl(schema))
           .groupBy(*keys).agg(F.sum("value").alias("value")).toArrow())
    got = got.cast(schema) if got.num_rows else schema.empty_table()
    return got.sort_by([(k, "ascending") for k in keys]).to_pandas()


def drawn_sample(parts: DataFrame, fraction: float) -> pd.DataFrame | None:
    """The retry rows the tasks drew (spark.facts.SAMPLE_COLUMNS), each kept with probability ``fraction``, on
    the driver in the order they were made; None when the tasks drew with less than that."""
    got = parts_of(parts, facts.SAMPLE).select(*facts.ORDER, "fraction", "data").toArrow()
    if got.num_rows and pc.min(got.column("fraction")).as_py() < fraction:
        return None
    got = got.sort_by([(c, "ascending") for c in facts.ORDER])
    tables = [facts.from_ipc(d) for d in got.column("data").to_pylist()] or [facts.SAMPLE_SCHEMA.empty_table()]
    drawn = pa.concat_tables(tables)
    if fraction < 1:
        drawn = drawn.filter(pc.less(drawn.column("u"), fraction))
    return drawn.drop_columns(["row", "u"]).to_pandas()


def retry_sample(parts: DataFrame, columns: Sequence[str], fraction: float, seed: int) -> pd.DataFrame:
    """``columns`` of the retry rows on the driver, in the order they were made: every row with ``fraction``
    1, else each row with that probability, drawn on the executors (seeded by ``seed`` and the part)."""
    schema = pa.schema([facts.OF_KIND[facts.RETRY].field(c) for c in columns])
    order = [*facts.ORDER, "row"]
    out = pa.schema([*[(c, pa.int32()) for c in facts.ORDER], ("row", pa.int64()), *schema])
    names = list(columns)

    def drawn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np

        for batch in batches:
            for part in batch.to_pylist():
                table = facts.decode(part["data"], names).cast(schema)
                keep = np.arange(table.num_rows)
                if fraction < 1:
                    rng = np.random.default_rng([seed, *(part[c] for c in facts.ORDER)])
                    keep = keep[rng.random(table.num_rows) < fraction]
                table = table.take(keep)
                head = [pa.repeat(pa.scalar(part[c], pa.int32()), len(keep)) for c in facts.ORDER]
                yield from pa.table([*head, pa.array(keep, pa.int64()), *table.columns], schema=out).to_batches()

    got = parts_of(parts, facts.RETRY).select(*facts.ORDER, "data").mapInArrow(drawn, _ddl(out)).toArrow()
    return got.sort_by([(c, "ascending") for c in order]).drop_columns(order).to_pandas()


def distributions(parts: DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """harness.measure.tally.distributions of the retry rows per ``by`` (of run_id, scenario, variant), each
    group computed on an executor from the tasks' latencies (spark.facts.DIST); a row per group brought
    back."""
    by = list(by)
    columns = [*by, *tally.DISTRIBUTION_COLUMNS]
    schema = pa.schema([*[(b, pa.string()) for b in by],
                        *[(c, pa.int64() if c.endswith("_n") else pa.float64()) for c in tally.DISTRIBUTION_COLUMNS]])

    def one(group: pd.DataFrame) -> pd.DataFrame:
        values = pd.concat([facts.from_ipc(d).to_pandas() for d in group["data"]], ignore_index=True)
        for b in by:
            values[b] = group[b].iloc[0]
        return tally.distribution_rows(values, by)[columns]

    latencies = parts_of(parts, facts.DIST).select(*by, "data")
    return latencies.groupBy(*by).applyInPandas(one, _ddl(schema)).toArrow().to_pandas()


_ARROW_TO_DDL = {"string": "string", "int32": "int", "int64": "bigint", "bool": "boolean", "double": "double",
                 "binary": "binary"}


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
    return out[out["value"].notna()].reset_index(drop=True).assign(**{SAMPLE_COUNT: 1})


def outcome_samples(tallies: pd.DataFrame) -> pd.DataFrame:
    """The rest of the values the verdict compares, from the tallies per cycle: for each retry that never
    came back an endless (+inf) wakeup and redelivery, for every retry asked for whether it stalled (1.0) or
    not (0.0), and for every owed (message, group) pair whether it was lost (1.0) or not (0.0); a row per cycle
    and value, its SAMPLE_COUNT how many (harness.contracts.verdict)."""
    wide = tally.totals(tallies, ["scenario", "variant", "run_id", "cycle"])
    keys = wide[["scenario", "variant", "run_id", "cycle"]]
    never = wide["ledger_retries_never_redelivered"].to_numpy()
    stalls = wide["stalled_count"].to_numpy()
    calm = wide["ledger_retries_expected"].to_numpy() - stalls
    lost = wide["ledger_lost"].to_numpy()
    kept = wide["ledger_owed"].to_numpy() - lost
    parts = [keys.assign(metric=m, value=float("inf"), **{SAMPLE_COUNT: never}) for m in LATENCIES]
    parts += [keys.assign(metric=metric, value=v, **{SAMPLE_COUNT: n})
              for metric, yes, no in (("stalled", stalls, calm), ("lost", lost, kept))
              for n, v in ((yes, 1.0), (no, 0.0))]
    out = pd.concat(parts, ignore_index=True)
    out = out[out[SAMPLE_COUNT] > 0].reset_index(drop=True)
    return out.astype({"cycle": "int64", "value": "float64", SAMPLE_COUNT: "int64"})




def fault_impacts(archives: Sequence[Archive], parts: DataFrame,
                  variants: Sequence[str]) -> tuple[list[dict], pd.DataFrame]:
    """What each fault of every archive that injected any did to ``variants``' messages
    (harness.measure.fault_impact, over that run's ledger rows and retry rows among ``parts``, brought back
    for those runs only), with the run id and scenario of each; and those runs' traffic per second since their
    first send (scenario, variant, run_id, second, sends, deliveries: successful sends and first deliveries)."""
    runs = {a.run_id: a for a in archives if a.record.faults}
    if not runs:
        return [], pd.DataFrame(columns=TIMELINE)
    rows = local_facts(parts, facts.LEDGER_ROW, list(runs), ["run_id", "variant", "class", *TIMES])
    fault_retries = local_facts(parts, facts.RETRY, list(runs))
    for c in TIMES:
        rows[c] = rows[c].astype("Int64")
    out, lines = [], []
    for run_id, a in runs.items():
        records = [r for r in a.record.faults if r.get("variant") in variants]
        mine = rows[rows["run_id"] == run_id]
        scenario = scenario_of(a).name
        got = impact(mine, fault_retries[fault_retries["run_id"] == run_id], records)
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
