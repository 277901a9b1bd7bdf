"""Pure DataFrame -> DataFrame functions over the events of run archives (no I/O, no deployment).

Wakeup, pickup and redelivery are recomputed from the raw columns (the analysis does not trust what the
writer derived) with harness.latency's own functions: one definition for workers, archive writer and Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from harness import ledger as message_ledger
from harness import ordering
from harness.latency import (
    DISTRIBUTIONS,
    DUPLICATE_KEYS,
    LATEST_NACK_ORDER,
    NACK_KEYS,
    QUANTILES,
    due_ms,
    is_retry_delivery,
    nack_retry_ms,
    redelivery_ms,
    stalled,
    waited,
    wakeup_ms,
)
from spark.stats import MEDIAN, STATISTIC

KEYS = list(NACK_KEYS)
# Version 1 archives have no cycles: each run is one cycle there.
CYCLE = F.coalesce(F.col("cycle"), F.lit(0))


def retry_deliveries(events: DataFrame) -> DataFrame:
    """One row per retry delivery (attempt > 1): wakeup_ms when its poll was already waiting at the retry's
    store time, pickup_ms when not, and redelivery_ms (against the latest nack of the previous attempt)."""
    latency = wakeup_ms(F.col("t_client_ns"), F.col("store_ts_ms"))
    was_waiting = F.coalesce(waited(F.col("poll_started_ns"), F.col("store_ts_ms")), F.lit(False))
    retries = (
        events.filter(is_retry_delivery(F.col("kind"), F.col("delivery_attempt")))
        .withColumn("cycle", CYCLE)
        .withColumn("waited", was_waiting)
        .withColumn("wakeup_ms", F.when(was_waiting, latency))
        .withColumn("pickup_ms", F.when(~was_waiting, latency))
    )
    nacks = (
        events.filter(F.col("kind") == "nacked")
        .withColumn("delivery_attempt", F.col("delivery_attempt") + 1)
        .withColumn("due_ms", due_ms(F.col("t_client_ns"), F.col("invisible_ms")))
        .withColumn("nacked_ns", F.col("t_client_ns"))
        .withColumn("rank", F.row_number().over(
            Window.partitionBy(*KEYS, "delivery_attempt").orderBy(F.col(LATEST_NACK_ORDER).desc())))
        .filter(F.col("rank") == 1)
        .select(*KEYS, "delivery_attempt", "due_ms", "nacked_ns")
    )
    return (
        retries.drop("redelivery_ms").join(nacks, on=[*KEYS, "delivery_attempt"], how="left")
        .withColumn("redelivery_ms", redelivery_ms(F.col("t_client_ns"), F.col("due_ms")))
        .withColumn("nack_retry_ms", nack_retry_ms(F.col("t_client_ns"), F.col("nacked_ns")))
        .select("run_id", "scenario", "variant", "group", "worker", "consumer", "ledger_id", "delivery_attempt",
                "cycle", "t_client_ns", "poll_started_ns", "store_ts_ms", "waited", "wakeup_ms", "pickup_ms",
                "redelivery_ms", "nack_retry_ms")
    )


def retry_outcomes(events: DataFrame, allowed_deliveries: Mapping[str, Mapping[str, int]],
                   long_poll_ms: Mapping[str, float]) -> DataFrame:
    """One row per retry asked for (a nack of attempt n expects attempt n + 1 in the same group, unless n is
    the last delivery the group allows), with its cycle, whether it came back, how long its first delivery
    waited after the copy was stored, and whether it stalled; the same rules as
    harness.latency.retry_outcomes. ``allowed_deliveries``: run id -> group -> retryMaxTimes + 1;
    ``long_poll_ms``: run id -> its scenario's long poll."""
    spark = events.sparkSession
    allowed = spark.createDataFrame(
        [(run, g, int(n)) for run, groups in allowed_deliveries.items() for g, n in groups.items()],
        "run_id string, group string, allowed int")
    polls = spark.createDataFrame([(run, float(ms)) for run, ms in long_poll_ms.items()],
                                  "run_id string, long_poll_ms double")
    nacks = (
        events.filter(F.col("kind") == "nacked")
        .join(F.broadcast(allowed), on=["run_id", "group"], how="left")
        .filter(F.col("allowed").isNull() | (F.col("delivery_attempt") < F.col("allowed")))
        .select(*KEYS, (F.col("delivery_attempt") + 1).alias("delivery_attempt"), CYCLE.alias("cycle"))
        .dropDuplicates([*KEYS, "delivery_attempt"])
    )
    came = (
        events.filter(is_retry_delivery(F.col("kind"), F.col("delivery_attempt")))
        .groupBy(*KEYS, "delivery_attempt")
        .agg(F.min(wakeup_ms(F.col("t_client_ns"), F.col("store_ts_ms"))).alias("wait_ms"))
        .withColumn("redelivered", F.lit(True))
    )
    return (nacks.join(came, on=[*KEYS, "delivery_attempt"], how="left")
            .withColumn("redelivered", F.coalesce(F.col("redelivered"), F.lit(False)))
            .join(F.broadcast(polls), on="run_id", how="left")
            .withColumn("stalled", ~F.col("redelivered")
                        | stalled(F.coalesce(F.col("wait_ms"), F.lit(0.0)), F.col("long_poll_ms")))
            .drop("long_poll_ms"))


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


def ledger(events: DataFrame,
           routing: Mapping[str, tuple[message_ledger.Subscriptions, Mapping[str, int]]]) -> DataFrame:
    """harness.ledger's classification: one row per (message, group). ``routing``: run id -> (topic ->
    groups -> tag filters, group -> deliveries allowed).

    classify keys everything by message, so the events split by message give the same rows as a whole run:
    they are spread over the partitions by (run, variant, message), which keeps every event of a message
    together (a delivery whose body had no ledger id goes by its message id, as classify counts it; other
    events without one stay together), and each partition is classified run by run, in Arrow batches."""
    plain = {run: ({t: {g: list(f) for g, f in gs.items()} for t, gs in subs.items()}, dict(allowed))
             for run, (subs, allowed) in routing.items()}
    by_message = F.when(F.col("ledger_id").isNull() & (F.col("kind") == "received"), F.col("message_id")) \
        .otherwise(F.coalesce(F.col("ledger_id"), F.lit("")))
    wanted = (events.filter(F.col("kind").isin(list(message_ledger.KINDS)))
              .select(*message_ledger.INPUT_COLUMNS)
              .repartition("run_id", "variant", by_message))

    def classify_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        if not batches:
            return
        # Arrow-backed strings: no Python object per cell, and faster joins on them. (Nothing here may
        # name this module's globals: the function travels to Python workers without a SparkContext.)
        ev = pa.Table.from_batches(batches).to_pandas(
            types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_string(t) else None)
        for run, part in ev.groupby("run_id", sort=False):
            rows = message_ledger.classify(part, *plain[run])
            yield from pa.Table.from_pandas(rows, schema=message_ledger.SCHEMA, preserve_index=False).to_batches()

    return wanted.mapInArrow(classify_partition, _ddl(message_ledger.SCHEMA))


def fifo(events: DataFrame) -> DataFrame:
    """harness.ordering's rows of FIFO messages, one run at a time (runs without message groups give none)."""
    return _per_run(events.filter(F.col("message_group").isNotNull()), ordering.fifo_rows, ordering.SCHEMA)


def dlq_reader_errors(events: DataFrame) -> DataFrame:
    """Per (scenario, variant, group), the errors of the harness's reader of that group's dead-letter queue
    (a DLQ the broker would not let it read): while it fails, a dead-lettered message counts as lost."""
    return (events.filter((F.col("kind") == "error") & F.col("topic").startswith("%DLQ%"))
            .groupBy("scenario", "variant", "group")
            .agg(F.count(F.lit(1)).alias("errors"), F.min("detail").alias("example"))
            .orderBy("scenario", "variant", "group"))


def per_variant(events: DataFrame, retries: DataFrame, outcomes: DataFrame, ledger_rows: DataFrame,
                by: tuple[str, ...] = ("scenario", "variant")) -> DataFrame:
    """Per (scenario, variant), or per ``by``: counts by kind, the ledger (its classes from ``ledger_rows``),
    and exact quantiles of each distribution."""
    by = list(by)
    ledger = F.concat_ws("/", "run_id", "ledger_id")
    counts = events.groupBy(*by).agg(
        F.countDistinct("run_id").alias("runs"),
        F.countDistinct(F.when(F.col("kind") == "sent", F.concat_ws("/", "run_id", CYCLE))).alias("cycles"),
        F.sum((F.col("kind") == "sent").cast("long")).alias("sent"),
        F.sum((F.col("kind") == "received").cast("long")).alias("deliveries"),
        F.sum(is_retry_delivery(F.col("kind"), F.col("delivery_attempt")).cast("long")).alias("retry_deliveries"),
        F.sum((F.col("kind") == "acked").cast("long")).alias("acks"),
        F.sum((F.col("kind") == "nacked").cast("long")).alias("nacks"),
        F.sum((F.col("kind") == "empty_poll").cast("long")).alias("empty_polls"),
        F.sum((F.col("kind") == "error").cast("long")).alias("errors"),
    )
    # Per message (by run and ledger id): sent, received, acked; one shuffle for all three.
    seen = (events.filter(F.col("kind").isin("sent", "received", "acked"))
            .groupBy(*by, ledger.alias("lid"))
            .agg(*[F.max((F.col("kind") == k).cast("int")).alias(k) for k in ("sent", "received", "acked")]))
    is_sent, is_recv, is_acked = (F.col(k) == 1 for k in ("sent", "received", "acked"))
    ledger_counts = seen.groupBy(*by).agg(
        F.sum(is_sent.cast("long")).alias("ledger_sent"),
        F.sum((is_sent & is_recv).cast("long")).alias("ledger_received"),
        F.sum((is_sent & is_acked).cast("long")).alias("ledger_acked"),
        F.sum((is_sent & ~is_recv).cast("long")).alias("ledger_never_received"),
        F.sum((~is_sent & is_recv).cast("long")).alias("ledger_unknown_received"),
    )
    dups = (
        events.filter(F.col("kind") == "received")
        .groupBy(*dict.fromkeys([*by, *DUPLICATE_KEYS])).count()
        .groupBy(*by).agg(F.sum(F.col("count") - 1).alias("ledger_duplicate_deliveries"))
    )
    classes = ledger_rows.groupBy(*by).agg(
        F.sum(F.col("class").isin(list(message_ledger.OWED_CLASSES)).cast("long")).alias("ledger_owed"),
        *[F.sum((F.col("class") == c).cast("long")).alias(f"ledger_{c}") for c in message_ledger.CLASSES],
        *[F.sum(((F.col("class") == "dead_lettered")
                 & cmp(F.coalesce(F.col("max_attempt"), F.lit(0)), F.col("allowed_deliveries")))
                .cast("long")).alias(f"ledger_{name}")
          for name, cmp in (("dlq_early", lambda a, b: a < b), ("dlq_late", lambda a, b: a > b))],
        F.sum((F.col("class").isin(list(message_ledger.OWED_CLASSES)) & F.col("tag_changed")).cast("long"))
        .alias("ledger_tag_changed"))
    retried = outcomes.groupBy(*by).agg(
        F.count(F.lit(1)).alias("ledger_retries_expected"),
        F.sum((~F.col("redelivered")).cast("long")).alias("ledger_retries_never_redelivered"),
        F.sum(F.col("stalled").cast("long")).alias("stalled_count"),
    )
    aggs = []
    for m in DISTRIBUTIONS:
        aggs.append(F.count(m).alias(f"{m}_n"))
        aggs.append(F.percentile(m, list(QUANTILES)).alias(f"{m}_q"))
        aggs.append(F.max(m).alias(f"{m}_max"))
    lat = retries.groupBy(*by).agg(*aggs)
    for m in DISTRIBUTIONS:
        for i, q in enumerate(QUANTILES):
            lat = lat.withColumn(f"{m}_p{round(q * 100)}", F.col(f"{m}_q")[i])
        lat = lat.drop(f"{m}_q")
    out = counts
    for part in (ledger_counts, dups, classes, retried, lat):
        out = out.join(part, on=by, how="left")
    return out.na.fill(0, [c for c in out.columns if c.startswith("ledger_") or c.endswith("_n")
                           or c == "stalled_count"]).orderBy(*by)


def cycle_samples(retries: DataFrame, outcomes: DataFrame) -> DataFrame:
    """The values the verdict compares, one row per (run, cycle, metric) value: every measured wakeup and
    redelivery, for each retry that never came back an endless (+inf) value of both, and for every retry
    asked for whether it stalled (1.0) or not (0.0)."""
    latencies = [m for m, statistic in STATISTIC.items() if statistic == MEDIAN]
    measured = retries.select(
        "scenario", "variant", "run_id", "cycle",
        F.explode(F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).alias("value")) for m in latencies]))
        .alias("s"),
    ).select("scenario", "variant", "run_id", "cycle", "s.metric", "s.value").filter(F.col("value").isNotNull())
    endless = (
        outcomes.filter(~F.col("redelivered"))
        .select("scenario", "variant", "run_id", "cycle",
                F.explode(F.array(*[F.lit(m) for m in latencies])).alias("metric"))
        .withColumn("value", F.lit(float("inf")))
    )
    stalls = outcomes.select("scenario", "variant", "run_id", "cycle", F.lit("stalled").alias("metric"),
                             F.col("stalled").cast("double").alias("value"))
    return measured.unionByName(endless).unionByName(stalls)
