"""The benchmarks' archives of a real run's shapes (tests.benchmarks.realistic): the template repeated, every
message renamed and every clock and cycle moved on, so that the repeated run reads as one longer run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.benchmarks.realistic import TEMPLATE, tiled_archive


def test_a_tiled_archive_is_the_template_repeated_with_new_names_clocks_and_cycles(tmp_path: Path):
    template = pd.read_parquet(TEMPLATE / "events")
    archive = tiled_archive(tmp_path, 3 * len(template) - 10, "bench-x")
    ev = pd.read_parquet(archive / "events")
    assert len(ev) == 3 * len(template) and set(ev.run_id) == {"bench-x"}
    # Every kind three times over, per variant: the variants' own rates kept.
    assert (ev.groupby(["variant", "kind"]).size() == 3 * template.groupby(["variant", "kind"]).size()).all()
    # Each repetition's messages are its own, and its clocks follow the previous one's.
    msgs = ev.dropna(subset=["ledger_id"]).groupby("variant").ledger_id.nunique()
    assert (msgs == 3 * template.dropna(subset=["ledger_id"]).groupby("variant").ledger_id.nunique()).all()
    for variant, mine in ev.groupby("variant"):
        named = mine.dropna(subset=["ledger_id"])
        first, later = named[~named.ledger_id.str.contains("-r")], named[named.ledger_id.str.endswith("-r2")]
        assert later.t_client_ns.min() > first.t_client_ns.max(), variant
    assert ev.cycle.max() == 3 * (template.cycle.max() + 1) - 1
    # A message's own timings (what every latency is made of) are the template's.
    def deltas(frame: pd.DataFrame) -> list[int]:
        f = frame.dropna(subset=["ledger_id"])
        return sorted((f.t_client_ns - f.groupby(["variant", "ledger_id"]).t_client_ns.transform("min")).tolist())
    assert deltas(ev) == sorted(deltas(template) * 3)
    assert ev.wakeup_ms.dropna().sort_values().tolist() == sorted(template.wakeup_ms.dropna().tolist() * 3)
    # The broker's clock moves with the client's: a retry's wait from its store time is the template's.
    def waits(frame: pd.DataFrame) -> list[int]:
        r = frame[(frame.kind == "received") & (frame.delivery_attempt > 1)]
        return sorted((r.t_client_ns - r.store_ts_ms.astype("int64") * 1_000_000).tolist())
    assert waits(ev) == sorted(waits(template) * 3)
