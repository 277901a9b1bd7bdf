"""FIFO order metrics through Spark (local) agree with the run's own summary (one definition)."""

import pandas as pd

from harness.archive.writer import ArchiveStaging
from harness.contracts.events import EVENT_SCHEMA_VERSION, write_parquet
from harness.contracts.record import HostInfo, RunRecord, VariantRecord
from harness.measure.latency import derive
from spark.comparison import collect
from spark.io import load_archives, scenario_of
from tests import synth

MS = 1_000_000


def _fifo_archive(runs, run_id):
    doc = synth.scenario_of("fifo", {"topics": [{"name": "T", "message_type": "FIFO"}],
                                     "produce": {"pattern": "burst", "message_groups": 2}})
    staging = ArchiveStaging(runs, run_id)
    rows = []
    for variant, overtakes in (("good", False), ("bad", True)):
        common = {"run_id": run_id, "variant": variant, "scenario": "fifo", "worker": "worker-1", "consumer": "c",
                  "protocol": "grpc", "topic": "T", "group": "G", "origin_topic": "T", "intended_group": "G"}
        t = 1_795_000_000_000
        for i in range(8):  # m0..m7 in mg0, mg1 alternately; m0 and m1 nacked once
            rows.append({**common, "kind": "sent", "ledger_id": f"m{i}", "message_group": f"mg{i % 2}",
                         "cycle": 0, "t_client_ns": (t + i) * MS})
        clock = t + 100
        for i in range(8):
            mg = f"mg{i % 2}"
            ev = {**common, "ledger_id": f"m{i}", "message_group": mg, "cycle": 0}
            rows.append({**ev, "kind": "received", "delivery_attempt": 1, "t_client_ns": clock * MS,
                         "store_ts_ms": t + i, "poll_started_ns": (clock - 5) * MS})
            if i < 2:
                rows.append({**ev, "kind": "nacked", "delivery_attempt": 1, "invisible_ms": 1000,
                             "t_client_ns": (clock + 1) * MS})
                back = clock + 3000 if not (overtakes and i == 0) else clock + 9000
                rows.append({**ev, "kind": "received", "delivery_attempt": 2, "t_client_ns": back * MS,
                             "store_ts_ms": t + i, "poll_started_ns": (back - 5) * MS})
                rows.append({**ev, "kind": "acked", "delivery_attempt": 2, "t_client_ns": (back + 1) * MS})
                clock = back + 10 if not overtakes else clock + 10  # "bad" goes on with mg0 while m0 waits
            else:
                rows.append({**ev, "kind": "acked", "delivery_attempt": 1, "t_client_ns": (clock + 1) * MS})
                clock += 10
    write_parquet(rows, staging.dir("events") / "all.parquet")
    return staging.commit(RunRecord(
        event_schema_version=EVENT_SCHEMA_VERSION, run_id=run_id, scenario=doc,
        variants=[VariantRecord(name=v, version="5.3.3") for v in ("good", "bad")], harness_version="test",
        harness_git_sha=None, host=HostInfo(hostname="t", cpus=2, memory_gib=24, python="", java="", platform=""),
        started_at="2026-11-22T00:00:00+00:00", ended_at="2026-11-22T00:01:00+00:00", duration_s=60.0))


def test_fifo_metrics_in_spark_are_the_summary_s(spark, tmp_path):
    path = _fifo_archive(tmp_path / "runs", "fifo-run")
    [archive] = load_archives([str(path)])
    c = collect(spark, [archive], ["good", "bad"])
    got = {r["variant"]: r["fifo"] for r in c.per_variant}
    sc = scenario_of(archive)
    raw = pd.read_parquet(path / "events" / "all.parquet")
    want = {s["variant"]: s["fifo"] for s in synth.own_summary(derive(raw), sc.subscriptions(),
                                                               sc.allowed_deliveries(), sc.consume.long_poll_s * 1000)}
    assert got == want
    assert (got["good"]["overtaken"], got["good"]["out_of_order"], got["good"]["block_n"]) == (0, 0, 2)
    assert got["bad"]["overtaken"] > 0  # mg0 went on while m0 waited for its retry
