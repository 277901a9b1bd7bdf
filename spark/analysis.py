"""Pure DataFrame -> DataFrame functions over the events of run archives (no I/O, no deployment).

Wakeup and redelivery are recomputed from the raw columns (the analysis does not trust what the writer
derived) with harness.latency's own functions: one definition for workers, archive writer and Spark.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from harness.latency import LATEST_NACK_ORDER, NACK_KEYS, QUANTILES, due_ms, is_retry_delivery, redelivery_ms, wakeup_ms

KEYS = list(NACK_KEYS)
METRICS = ("wakeup_ms", "redelivery_ms")


def retry_deliveries(events: DataFrame) -> DataFrame:
    """One row per retry delivery (attempt > 1) with wakeup_ms and redelivery_ms recomputed."""
    retries = (
        events.filter(is_retry_delivery(F.col("kind"), F.col("delivery_attempt")))
        .withColumn("wakeup_ms", wakeup_ms(F.col("t_client_ns"), F.col("store_ts_ms")))
    )
    nacks = (
        events.filter(F.col("kind") == "nacked")
        .withColumn("delivery_attempt", F.col("delivery_attempt") + 1)
        .withColumn("due_ms", due_ms(F.col("t_client_ns"), F.col("invisible_ms")))
        .withColumn("rank", F.row_number().over(
            Window.partitionBy(*KEYS, "delivery_attempt").orderBy(F.col(LATEST_NACK_ORDER).desc())))
        .filter(F.col("rank") == 1)
        .select(*KEYS, "delivery_attempt", "due_ms")
    )
    return (
        retries.drop("redelivery_ms").join(nacks, on=[*KEYS, "delivery_attempt"], how="left")
        .withColumn("redelivery_ms", redelivery_ms(F.col("t_client_ns"), F.col("due_ms")))
        .select("run_id", "scenario", "variant", "group", "worker", "consumer", "ledger_id", "delivery_attempt",
                "t_client_ns", "store_ts_ms", "wakeup_ms", "redelivery_ms")
    )


def per_variant(events: DataFrame, retries: DataFrame) -> DataFrame:
    """Per (scenario, variant): counts by kind, the ledger, and exact wakeup / redelivery quantiles."""
    ledger = F.concat_ws("/", "run_id", "ledger_id")
    counts = events.groupBy("scenario", "variant").agg(
        F.countDistinct("run_id").alias("runs"),
        F.sum((F.col("kind") == "sent").cast("long")).alias("sent"),
        F.sum((F.col("kind") == "received").cast("long")).alias("deliveries"),
        F.sum(((F.col("kind") == "received") & (F.col("delivery_attempt") > 1)).cast("long")).alias("retry_deliveries"),
        F.sum((F.col("kind") == "acked").cast("long")).alias("acks"),
        F.sum((F.col("kind") == "nacked").cast("long")).alias("nacks"),
        F.sum((F.col("kind") == "empty_poll").cast("long")).alias("empty_polls"),
        F.sum((F.col("kind") == "error").cast("long")).alias("errors"),
    )
    sent = events.filter(F.col("kind") == "sent").select("scenario", "variant", ledger.alias("lid")).distinct()
    recv = events.filter(F.col("kind") == "received").select("scenario", "variant", ledger.alias("lid")).distinct()
    acked = events.filter(F.col("kind") == "acked").select("scenario", "variant", ledger.alias("lid")).distinct()
    on = ["scenario", "variant", "lid"]
    ledger_counts = (
        sent.withColumn("is_sent", F.lit(1))
        .join(recv.withColumn("is_recv", F.lit(1)), on=on, how="full")
        .join(acked.withColumn("is_acked", F.lit(1)), on=on, how="left")
        .groupBy("scenario", "variant").agg(
            F.sum(F.col("is_sent")).alias("ledger_sent"),
            F.sum(F.when(F.col("is_sent").isNotNull() & F.col("is_recv").isNotNull(), 1)).alias("ledger_received"),
            F.sum(F.when(F.col("is_sent").isNotNull() & F.col("is_acked").isNotNull(), 1)).alias("ledger_acked"),
            F.sum(F.when(F.col("is_sent").isNotNull() & F.col("is_recv").isNull(), 1)).alias("ledger_never_received"),
            F.sum(F.when(F.col("is_sent").isNull(), 1)).alias("ledger_unknown_received"),
        )
    )
    dups = (
        events.filter(F.col("kind") == "received")
        .groupBy("scenario", "variant", "run_id", "ledger_id", "delivery_attempt").count()
        .groupBy("scenario", "variant").agg(F.sum(F.col("count") - 1).alias("ledger_duplicate_deliveries"))
    )
    aggs = []
    for m in METRICS:
        aggs.append(F.count(m).alias(f"{m}_n"))
        aggs.append(F.percentile(m, list(QUANTILES)).alias(f"{m}_q"))
        aggs.append(F.max(m).alias(f"{m}_max"))
    lat = retries.groupBy("scenario", "variant").agg(*aggs)
    for m in METRICS:
        for i, q in enumerate(QUANTILES):
            lat = lat.withColumn(f"{m}_p{round(q * 100)}", F.col(f"{m}_q")[i])
        lat = lat.drop(f"{m}_q")
    out = (
        counts.join(ledger_counts, on=["scenario", "variant"], how="left")
        .join(dups, on=["scenario", "variant"], how="left")
        .join(lat, on=["scenario", "variant"], how="left")
    )
    return out.na.fill(0, [c for c in out.columns if c.startswith("ledger_") or c.endswith("_n")]).orderBy(
        "scenario", "variant")
