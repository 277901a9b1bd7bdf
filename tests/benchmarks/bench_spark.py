"""Benchmark of the Spark comparison on generated archives of 1M and 10M events (local[2]), beside a
single-node baseline: DuckDB (2 threads) on the same Parquet computing the same wakeup and redelivery
percentiles and message counts, so the price of Spark is visible. Run by `make bench`; writes
bench-results/spark.json. Asserts nothing."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from harness.archive.writer import ArchiveStaging
from harness.contracts.events import EVENT_SCHEMA_VERSION, SCHEMA
from harness.contracts.record import HostInfo, RunRecord, VariantRecord
from tests.synth import scenario_of

OUT = Path("bench-results") / "spark.json"
RUNS = 3
MS = 1_000_000


def _variant_table(run_id: str, variant: str, messages: int, rng: np.random.Generator, slow: bool) -> pa.Table:
    """Five events per message (sent, received, nacked, received again, acked), built column-wise."""
    i = np.arange(messages)
    t0 = 1_795_000_000_000 + i // 10
    wake = rng.uniform(14_000, 20_000, messages) if slow else rng.exponential(30, messages)
    store = t0 + 3006
    t = np.stack([t0 * MS, (t0 + 5) * MS, (t0 + 6) * MS, ((store + wake) * MS).astype(np.int64),
                  ((store + wake) * MS).astype(np.int64) + MS], axis=1).ravel()
    kinds = np.tile(np.array(["sent", "received", "nacked", "received", "acked"]), messages)
    attempt = np.tile(np.array([0, 1, 1, 2, 2], dtype=np.int32), messages)
    store_col = np.stack([np.zeros(messages), t0 + 1, np.zeros(messages), store, np.zeros(messages)], axis=1).ravel()
    has_store = np.tile(np.array([False, True, False, True, False]), messages)
    # The polls that returned the deliveries started 5 ms before the first and 6 ms before the retry copy
    # was stored: every retry is a wakeup.
    poll = np.stack([np.zeros(messages), t0 * MS, np.zeros(messages), (store - 6) * MS, np.zeros(messages)],
                    axis=1).ravel().astype(np.int64)
    inv = np.tile(np.array([0, 15_000, 1000, 15_000, 0]), messages)
    has_inv = np.tile(np.array([False, True, True, True, False]), messages)
    ledger = np.repeat(np.char.add("worker-1-m", i.astype(str)), 5)
    n = messages * 5
    cols = {name: pa.nulls(n, type=SCHEMA.field(name).type) for name in SCHEMA.names}
    cols.update({
        "run_id": pa.array(np.full(n, run_id)), "variant": pa.array(np.full(n, variant)),
        "scenario": pa.array(np.full(n, "burst")), "worker": pa.array(np.full(n, "worker-1")),
        "protocol": pa.array(np.full(n, "grpc")), "group": pa.array(np.full(n, "G")),
        "topic": pa.array(np.full(n, "T")), "kind": pa.array(kinds), "ledger_id": pa.array(ledger),
        "delivery_attempt": pa.array(attempt, mask=attempt == 0), "t_client_ns": pa.array(t),
        "store_ts_ms": pa.array(store_col.astype(np.int64), mask=~has_store),
        "invisible_ms": pa.array(inv.astype(np.int64), mask=~has_inv),
        "poll_started_ns": pa.array(poll, mask=~has_store),
    })
    return pa.table(cols, schema=SCHEMA)


def make_archive(runs: Path, events: int) -> Path:
    rng = np.random.default_rng(events)
    run_id = f"bench-{events}"
    staging = ArchiveStaging(runs, run_id)
    per_variant = events // 10  # two variants, five events per message
    for variant, slow in (("unpatched", True), ("patched", False)):
        pq.write_table(_variant_table(run_id, variant, per_variant, rng, slow),
                       staging.dir("events") / f"{variant}.parquet")
    return staging.commit(RunRecord(
        event_schema_version=EVENT_SCHEMA_VERSION, run_id=run_id, scenario=scenario_of("burst"),
        variants=[VariantRecord(name="unpatched", version="5.3.3"), VariantRecord(name="patched", version="5.3.3")],
        harness_version="bench", harness_git_sha=None,
        host=HostInfo(hostname="bench", cpus=2, memory_gib=24, python="", java="", platform=""),
        started_at="", ended_at="", duration_s=0.0))


# Per variant: retry wakeups (the poll was waiting when the retry copy was stored) and redelivery against the
# latest nack of the attempt before, as harness.measure.latency defines them; messages sent, received, acked, never
# received; deliveries beyond one per (message, attempt).
DUCKDB_SQL = """
with ev as (select * from read_parquet(?)),
retries as (
  select variant, run_id, "group", ledger_id, delivery_attempt, t_client_ns, store_ts_ms, poll_started_ns
  from ev where kind = 'received' and delivery_attempt > 1),
nacks as (
  select variant, run_id, "group", ledger_id, delivery_attempt + 1 as delivery_attempt,
         arg_max(t_client_ns / 1e6 + invisible_ms, t_client_ns) as due_ms
  from ev where kind = 'nacked' group by all),
lat as (
  select r.variant,
         quantile_cont(case when r.poll_started_ns / 1e6 <= r.store_ts_ms
                            then r.t_client_ns / 1e6 - r.store_ts_ms end, [0.5, 0.9]) as wakeup_ms,
         quantile_cont(case when coalesce(r.poll_started_ns / 1e6 <= r.store_ts_ms, false) = false
                            then r.t_client_ns / 1e6 - r.store_ts_ms end, [0.5, 0.9]) as pickup_ms,
         quantile_cont(r.t_client_ns / 1e6 - n.due_ms, [0.5, 0.9]) as redelivery_ms
  from retries r left join nacks n using (variant, run_id, "group", ledger_id, delivery_attempt)
  group by r.variant),
msgs as (
  select variant, max(kind = 'sent') as s, max(kind = 'received') as r, max(kind = 'acked') as a
  from ev where kind in ('sent', 'received', 'acked') group by variant, run_id, ledger_id),
counts as (
  select variant, sum(s::int) as sent, sum((s and r)::int) as received, sum((s and a)::int) as acked,
         sum((s and not r)::int) as never_received from msgs group by variant),
dups as (
  select variant, sum(n - 1) as duplicate_deliveries from (
    select variant, count(*) as n from ev where kind = 'received'
    group by variant, run_id, "group", ledger_id, delivery_attempt) group by variant)
select lat.variant, wakeup_ms, pickup_ms, redelivery_ms, sent, received, acked, never_received, duplicate_deliveries
from lat join counts on lat.variant = counts.variant join dups on lat.variant = dups.variant order by lat.variant
"""


def duckdb_baseline(archive: Path, threads: int = 2) -> dict:
    import duckdb

    t = time.monotonic()
    con = duckdb.connect(config={"threads": threads})
    con.execute("set enable_progress_bar = false")
    rows = con.execute(DUCKDB_SQL, [str(archive / "events" / "*.parquet")]).fetchall()
    cols = [d[0] for d in con.description]
    con.close()
    out = {"seconds": round(time.monotonic() - t, 1), "threads": threads}
    for row in rows:
        r = dict(zip(cols, row, strict=True))
        variant = r.pop("variant")
        out[variant] = {k: [round(x, 1) for x in v] if isinstance(v, list) else v for k, v in r.items()}
    return out


def _peak_rss(proc: subprocess.Popen) -> dict[str, int]:
    """Sample the job's process tree until it exits; peak RSS per process name, MiB."""
    peak: dict[str, int] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                name = "jvm" if p.name() == "java" else p.name()
                peak[name] = max(peak.get(name, 0), p.memory_info().rss // 2**20)
        except psutil.Error:
            pass
        time.sleep(0.5)
    return peak


def main() -> None:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for events in (1_000_000, 10_000_000):
            t = time.monotonic()
            archive = make_archive(Path(tmp) / "runs", events)
            gen_s = time.monotonic() - t
            # A child process per job, so its peak RSS (driver JVM is a grandchild) is measured alone; the job
            # RUNS times (its wall time moves by a second or two from one run to the next here), the median kept.
            walls, peak = [], {}
            for i in range(RUNS):
                t = time.monotonic()
                out = Path(tmp) / f"report-{events}-{i}"
                proc = subprocess.Popen(
                    [sys.executable, "-m", "spark.jobs.compare", str(archive), "--baseline", "unpatched",
                     "--candidate", "patched", "--master", "local[2]", "--out", str(out)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for k, v in _peak_rss(proc).items():
                    peak[k] = max(v, peak.get(k, 0))
                walls.append(round(time.monotonic() - t, 1))
                if proc.returncode:
                    break
            wall = statistics.median(walls)
            report = Path(tmp) / f"report-{events}-0"
            summary = json.loads((report / "summary.json").read_text()) if proc.returncode == 0 else {}
            metrics = ("wakeup_ms", "pickup_ms", "redelivery_ms")
            spark_says = {r["variant"]: {m: [r[m]["p50"], r[m]["p90"]] for m in metrics}
                          | {"sent": r["sent"], "never_received": r["ledger"]["never_received"]}
                          for r in summary.get("per_variant", [])}
            duck = duckdb_baseline(archive)
            results.append({"events": events, "generate_s": round(gen_s, 1), "compare_wall_s": round(wall, 1),
                            "compare_wall_s_runs": walls,
                            "exit_code": proc.returncode, "peak_rss_mib": peak,
                            "parquet_mb": round(sum(f.stat().st_size for f in (archive / "events").glob("*"))
                                                / 1e6, 1),
                            "spark_p50_p90": spark_says, "duckdb": duck,
                            "spark_over_duckdb": round(wall / duck["seconds"], 1)})
            print(results[-1], flush=True)
    results.append({"note": "compare_wall_s: the median of compare_wall_s_runs (the whole job, a fresh process each); "
                            "peak_rss_mib: largest RSS of each process of the job (python driver and its Spark "
                            "workers, Spark JVM), sampled every 0.5 s; master local[2], driver memory 2g"})
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
