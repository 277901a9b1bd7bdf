"""Generated run archives for Spark tests and benchmarks: raw events with known latencies; and the run's own
summary of a set of events, what the Spark analysis is checked against."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.archive.writer import ArchiveStaging
from harness.contracts.events import EVENT_SCHEMA_VERSION, write_parquet
from harness.contracts.record import HostInfo, RunRecord, VariantRecord
from harness.measure.tally import Routing, SlicesSummary

MS = 1_000_000


def archive(
    runs: Path,
    run_id: str,
    wakeups: dict[str, Callable[[np.random.Generator, int], np.ndarray]],
    messages: int = 40,
    scenario: str = "burst",
    seed: int = 7,
    empty_polls: int = 3,
    lost: int = 1,
    cycles: int = 8,
    never_redelivered: dict[str, int] | None = None,
    scenario_doc: dict | None = None,
    probe: dict[str, list[dict]] | None = None,
    extra: dict[str, list[dict]] | None = None,
    faults: list[dict] | None = None,
    versions: dict[str, str] | None = None,
    started_at: str = "2026-11-22T00:00:00+00:00",
) -> Path:
    """Write ``runs/<run_id>`` with, per variant, ``messages`` sent in ``cycles`` cycles, each received, nacked
    (1 s), received again after the sampled wakeup by a poll already waiting, acked; ``lost`` messages are
    sent and never received; ``never_redelivered[variant]`` of the nacked ones never come back; ``probe``: the
    wakeup probe's samples per variant, as a run with --probe keeps them in its manifest; ``extra``: more events
    per variant (over the common columns); ``faults``: the manifest's fault records (harness.run.faults); ``versions``:
    each variant's RocketMQ version (default 5.3.3)."""
    rng = np.random.default_rng(seed)
    staging = ArchiveStaging(runs, run_id)
    for variant, sampler in wakeups.items():
        w = sampler(rng, messages)
        rows = []
        common = {"run_id": run_id, "variant": variant, "scenario": scenario, "worker": "worker-1",
                  "consumer": "c1", "protocol": "grpc", "topic": "T", "group": "G"}
        base_ms = 1_795_000_000_000
        missing = (never_redelivered or {}).get(variant, 0)
        for i in range(messages + lost):
            lid = f"worker-1-m{i}"
            cycle = min(i * cycles // max(messages, 1), cycles - 1)
            t0 = base_ms + cycle * 30_000 + i * 10
            rows.append({**common, "kind": "sent", "ledger_id": lid, "t_client_ns": t0 * MS, "consumer": "p1",
                         "cycle": cycle})
            if i >= messages:
                continue
            body = {"ledger_id": lid, "origin_topic": "T", "intended_group": "G", "cycle": cycle}
            rows.append({**common, **body, "kind": "received", "delivery_attempt": 1, "t_client_ns": (t0 + 5) * MS,
                         "store_ts_ms": t0 + 1, "invisible_ms": 15_000, "poll_started_ns": (t0 - 100) * MS})
            rows.append({**common, **body, "kind": "nacked", "delivery_attempt": 1, "t_client_ns": (t0 + 6) * MS,
                         "invisible_ms": 1000})
            if i < missing:
                continue
            store = t0 + 6 + 1000 + 2000  # revived ~2 s after the nack came due
            recv_ns = int((store + w[i]) * MS)
            rows.append({**common, **body, "kind": "received", "delivery_attempt": 2, "t_client_ns": recv_ns,
                         "store_ts_ms": store, "invisible_ms": 15_000, "poll_started_ns": (t0 + 10) * MS})
            rows.append({**common, **body, "kind": "acked", "delivery_attempt": 2, "t_client_ns": recv_ns + MS})
        rows += [{**common, "kind": "empty_poll", "t_client_ns": (base_ms + 50_000 + k) * MS}
                 for k in range(empty_polls)]
        rows += [{**common, "t_client_ns": (base_ms + 60_000) * MS, **e} for e in (extra or {}).get(variant, [])]
        write_parquet(rows, staging.dir("events") / f"{variant}.parquet")
    manifest = RunRecord(
        event_schema_version=EVENT_SCHEMA_VERSION, run_id=run_id, scenario=scenario_of(scenario, scenario_doc),
        variants=[VariantRecord(name=v, version=(versions or {}).get(v, "5.3.3")) for v in wakeups],
        harness_version="test",
        harness_git_sha=None,
        host=HostInfo(hostname="synth", cpus=2, memory_gib=24, python="3.11", java="17", platform="synth"),
        started_at=started_at, ended_at=started_at, duration_s=60.0,
        probe=probe or {}, faults=faults or [],
    )
    return staging.commit(manifest)


def scenario_of(name: str, override: dict | None = None) -> dict:
    """A valid scenario document for the manifest (the analysis reads its topics and groups), with
    ``override``'s top-level fields (one level of dicts merged)."""
    doc = {"name": name, "topics": [{"name": "T"}], "groups": [{"name": "G", "topic": "T"}],
           "produce": {"pattern": "burst", "count": 32}, "expect": ["wakeup_ms.p50 < 1000"]}
    for k, v in (override or {}).items():
        doc[k] = {**doc[k], **v} if isinstance(v, dict) and isinstance(doc.get(k), dict) else v
    return doc


def slow(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(14_000, 20_000, n)


def fast(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.exponential(30, n)


def own_summary(events: pd.DataFrame, subscriptions: Mapping, allowed_deliveries: Mapping[str, int],
                long_poll_ms: float, faults: Sequence[Mapping[str, object]] = ()) -> list[dict]:
    """The run's own summary rows of ``events`` (every event of the run: one slice), as a run computes them."""
    acc = SlicesSummary(Routing(subscriptions, allowed_deliveries, long_poll_ms), faults)
    acc.add(events)
    return acc.result()
