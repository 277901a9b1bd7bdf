"""Benchmark of the Spark comparison on generated archives (1M and 10M events by default; 100M with
RMQ_HARNESS_BENCH_SPARK_EVENTS=1000000,10000000,100000000), on local[2] and on a standalone cluster of two
workers, each with a /tmp of its own (tests.spark.standalone), beside a single-node baseline: DuckDB (2 threads)
on the same Parquet computing the same wakeup and redelivery percentiles and message counts, so the price of
Spark is visible. Run by `make bench`; writes bench-results/spark.json. Asserts nothing.

The archives have a real run's event shapes by default (tests.benchmarks.realistic: the committed burst run
repeated; its percentiles are then the template's whatever the size, give or take the spacing of its values,
which the results show as `vs_template`); RMQ_HARNESS_BENCH_SPARK_SHAPE=synthetic gives the five-events-a-message
archives of the figures before 2026-11-29. RMQ_HARNESS_BENCH_SPARK_MASTERS picks the masters (default
"local[2],standalone-2"); RMQ_HARNESS_BENCH_SPARK_RUNS the runs per size and master (default 3; the median
kept). The archives are written outside /tmp (the workers cannot see the driver's /tmp), in
runs/.bench-spark-<pid>, removed at the end. RMQ_HARNESS_BENCH_SPARK_OUT: another file for the results (a 100M
run on one master beside the default sizes' file)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from harness.archive.writer import ArchiveStaging
from harness.contracts.events import EVENT_SCHEMA_VERSION, SCHEMA
from harness.contracts.record import HostInfo, RunRecord, VariantRecord
from harness.core.paths import REPO_ROOT
from tests.benchmarks.realistic import TEMPLATE, tiled_archive
from tests.spark.standalone import standalone
from tests.synth import scenario_of

OUT = Path(os.environ.get("RMQ_HARNESS_BENCH_SPARK_OUT", "bench-results/spark.json"))
RUNS = int(os.environ.get("RMQ_HARNESS_BENCH_SPARK_RUNS", "3"))
SIZES = [int(x) for x in os.environ.get("RMQ_HARNESS_BENCH_SPARK_EVENTS", "1000000,10000000").split(",")]
MASTERS = os.environ.get("RMQ_HARNESS_BENCH_SPARK_MASTERS", "local[2],standalone-2").split(",")
SHAPE = os.environ.get("RMQ_HARNESS_BENCH_SPARK_SHAPE", "real")
MS = 1_000_000
CHUNK_MESSAGES = 2_000_000  # messages generated (and written as a row group) at a time: flat memory at 100M


def _variant_table(run_id: str, variant: str, start: int, messages: int, rng: np.random.Generator,
                   slow: bool) -> pa.Table:
    """Five events per message (sent, received, nacked, received again, acked), built column-wise; messages
    ``start`` to ``start + messages`` of the variant."""
    i = np.arange(start, start + messages)
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
        with pq.ParquetWriter(staging.dir("events") / f"{variant}.parquet", SCHEMA) as writer:
            for start in range(0, per_variant, CHUNK_MESSAGES):
                writer.write_table(_variant_table(run_id, variant, start, min(CHUNK_MESSAGES, per_variant - start),
                                                  rng, slow))
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


def _peak_rss(proc: subprocess.Popen, also: list[psutil.Process]) -> dict[str, int]:
    """Sample the job's process tree (and ``also``'s: the standalone workers, whose children the executors are)
    until it exits; peak RSS per process name, MiB (the executors' JVMs as "executor-jvm")."""
    peak: dict[str, int] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        for top in (root, *also):
            try:
                for p in [top, *top.children(recursive=True)]:
                    argv = p.cmdline()
                    name, cmd = p.name(), " ".join(argv)
                    if "deploy.worker.Worker" in cmd:
                        name = "worker-jvm"
                    elif "CoarseGrainedExecutorBackend" in cmd:
                        name = "executor-jvm"
                    elif argv and argv[0].endswith("java"):  # a JVM may rename itself after a thread
                        name = "jvm"
                    elif top is not root:
                        name = f"executor-{name}"
                    peak[name] = max(peak.get(name, 0), p.memory_info().rss // 2**20)
            except psutil.Error:
                pass
        time.sleep(0.5)
    return peak


def _workers() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"])
            if "org.apache.spark.deploy.worker.Worker" in (p.info["cmdline"] or [])]


def _job(archive: Path, master: str, out: Path, also: list[psutil.Process]) -> tuple[float, int, dict[str, int]]:
    """One comparison in a fresh process: its wall time, exit code and peak RSS per process name."""
    t = time.monotonic()
    log = out.parent / f"{out.name}.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spark.jobs.compare", str(archive), "--baseline", "unpatched",
             "--candidate", "patched", "--master", master, "--out", str(out)],
            stdout=sink, stderr=subprocess.STDOUT)
        peak = _peak_rss(proc, also)
    if proc.returncode:  # said, with the job's last lines: a failed job has no figures to write
        said = [line for line in log.read_text().splitlines(True) if not line.lstrip().startswith("at ")]
        print(f"{master}: the comparison exited {proc.returncode} (its log without Java's stack frames):\n"
              + "".join(said[-40:]), flush=True)
    return round(time.monotonic() - t, 1), proc.returncode, peak


def _vs_template(summary: dict) -> float | None:
    """The largest relative difference between the comparison's per-variant percentiles (p50, p90, p99 of wakeup
    and redelivery) and the template run's own (its committed summary). A repeated run has the same values, so its
    percentiles move only within the spacing of neighbouring values; more than a few per cent is the analysis
    going wrong at size."""
    committed = TEMPLATE.parent / "summary.json"
    if not summary or not committed.is_file():
        return None
    want = {r["variant"]: r for r in json.loads(committed.read_text())["per_variant"]}
    diffs = [abs(r[m][q] - want[r["variant"]][m][q]) / abs(want[r["variant"]][m][q])
             for r in summary["per_variant"] for m in ("wakeup_ms", "redelivery_ms") for q in ("p50", "p90", "p99")
             if want[r["variant"]][m][q]]
    return round(max(diffs), 4) if diffs else None


def main() -> None:
    results = []
    scratch = REPO_ROOT / "runs" / f".bench-spark-{os.getpid()}"
    try:
        for events in SIZES:
            t = time.monotonic()
            archive = (make_archive(scratch / "runs", events) if SHAPE == "synthetic"
                       else tiled_archive(scratch / "runs", events, f"bench-{events}"))
            events = len(pq.ParquetDataset(archive / "events").read(columns=["kind"]))
            gen_s = time.monotonic() - t
            duck = duckdb_baseline(archive)
            for master in MASTERS:
                with ExitStack() as stack:
                    if master.startswith("standalone-"):
                        n = int(master.split("-")[1])
                        # Each worker one core and its executor's memory (spark.executor.memory 4g + overhead).
                        # Their /tmp on disk (each its own): the shuffled pieces of 100M events outgrow memory.
                        cluster = stack.enter_context(standalone(scratch / "logs" / master, cores=1, memory="6g",
                                                                 workers=n, tmp_on=scratch / "worker-tmp"))
                        url, also = cluster.master, _workers()
                    else:
                        url, also = master, []
                    # A fresh process per job, so its peak RSS is its own; RUNS times, the median kept (the wall
                    # time moves by a second or two from one run to the next here).
                    walls, peak, code = [], {}, 0
                    for i in range(RUNS):
                        wall, code, p = _job(archive, url, scratch / f"report-{events}-{master}-{i}", also)
                        walls.append(wall)
                        for k, v in p.items():
                            peak[k] = max(v, peak.get(k, 0))
                        if code:
                            break
                report = scratch / f"report-{events}-{master}-0"
                summary = json.loads((report / "summary.json").read_text()) if code == 0 else {}
                metrics = ("wakeup_ms", "pickup_ms", "redelivery_ms")
                spark_says = {r["variant"]: {m: [r[m]["p50"], r[m]["p90"]] for m in metrics}
                              | {"sent": r["sent"], "never_received": r["ledger"]["never_received"]}
                              for r in summary.get("per_variant", [])}
                wall = statistics.median(walls)
                results.append({"events": events, "shape": SHAPE, "master": master, "generate_s": round(gen_s, 1),
                                "vs_template": _vs_template(summary) if SHAPE == "real" else None,
                                "compare_wall_s": round(wall, 1), "compare_wall_s_runs": walls, "exit_code": code,
                                "peak_rss_mib": peak,
                                "parquet_mb": round(sum(f.stat().st_size for f in (archive / "events").glob("*"))
                                                    / 1e6, 1),
                                "spark_p50_p90": spark_says, "duckdb": duck,
                                "spark_over_duckdb": round(wall / duck["seconds"], 1)})
                print(results[-1], flush=True)
            shutil.rmtree(archive, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results.append({"note": "compare_wall_s: the median of compare_wall_s_runs (the whole job, a fresh process each, "
                            "Spark's start included); peak_rss_mib: largest RSS of each process (python: the driver "
                            "and, on local[2], its Spark workers; jvm: the driver's JVM; executor-*: the standalone "
                            "workers' executors and their Python workers, and the Worker JVMs), sampled every 0.5 s; "
                            "standalone-2: two workers of one core each, each with its own /tmp (a directory on disk); "
                            "driver memory 2g"})
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
