import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.archive.writer import ArchiveStaging
from harness.contracts.events import SCHEMA, write_parquet
from harness.contracts.record import MANIFEST_SCHEMA_VERSION, HostInfo, RunRecord
from harness.core.errors import HarnessError

MS = 1_000_000


def _manifest(run_id: str) -> RunRecord:
    return RunRecord(event_schema_version=1, run_id=run_id, scenario={"name": "s"}, variants=[],
                    harness_version="0", harness_git_sha=None,
                    host=HostInfo(hostname="h", cpus=2, memory_gib=24, python="3.11", java="17", platform="x"),
                    started_at="a", ended_at="b", duration_s=1.0)


def _shard(path: Path, variant: str) -> None:
    common = {"run_id": "r", "variant": variant, "scenario": "s", "group": "G", "ledger_id": "a"}
    write_parquet([
        {**common, "kind": "sent", "t_client_ns": 0},
        {**common, "kind": "received", "delivery_attempt": 1, "t_client_ns": 5 * MS, "store_ts_ms": 1},
        {**common, "kind": "nacked", "delivery_attempt": 1, "t_client_ns": 6 * MS, "invisible_ms": 1000},
        {**common, "kind": "received", "delivery_attempt": 2, "t_client_ns": 9000 * MS, "store_ts_ms": 4000,
         "poll_started_ns": 10 * MS},
    ], path)


def test_merge_and_commit(tmp_path: Path):
    runs = tmp_path / "runs"
    staging = ArchiveStaging(runs, "run-1")
    _shard(tmp_path / "shards-v" / "worker-1-0000.parquet", "v")
    _shard(tmp_path / "shards-w" / "worker-1-0000.parquet", "w")
    for variant in ("v", "w"):
        path = staging.merge_events(variant, tmp_path / f"shards-{variant}")
        merged = pq.read_table(path).to_pandas()
        assert len(merged) == 4 and (merged.variant == variant).all()
        assert merged.loc[(merged.kind == "received") & (merged.delivery_attempt == 2), "wakeup_ms"].tolist() == [5000]
        assert pq.read_schema(path).remove_metadata() == SCHEMA  # the event schema's own types, no dictionaries
    assert staging.merge_events("x", tmp_path / "no-shards") is None
    final = staging.commit(_manifest("run-1"))
    assert final == runs / "run-1" and not staging.path.exists()
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["schema_version"] == MANIFEST_SCHEMA_VERSION
    assert manifest["files"]["events"] == ["events/v.parquet", "events/w.parquet"]


def test_an_existing_archive_is_never_overwritten(tmp_path: Path):
    runs = tmp_path / "runs"
    (runs / "run-1").mkdir(parents=True)
    (runs / "run-1" / "keep.txt").write_text("data")
    with pytest.raises(HarnessError, match="already exists"):
        ArchiveStaging(runs, "run-1")
    assert (runs / "run-1" / "keep.txt").read_text() == "data"


def test_archive_appearing_during_the_run_keeps_both(tmp_path: Path):
    runs = tmp_path / "runs"
    staging = ArchiveStaging(runs, "run-2")
    (runs / "run-2").mkdir()
    with pytest.raises(HarnessError, match="appeared while"):
        staging.commit(_manifest("run-2"))
    assert staging.path.exists() and (staging.path / "manifest.json").exists()


def test_a_staging_directory_says_it_is_incomplete_until_committed(tmp_path: Path):
    import os

    from harness.core.publish import INCOMPLETE

    runs = tmp_path / "runs"
    staging = ArchiveStaging(runs, "run-3")
    note = (staging.path / INCOMPLETE).read_text()
    assert staging.path.name == ".run-3.partial"
    assert note.startswith("INCOMPLETE: this run archive of run run-3 was never completed.")
    assert f"process {os.getpid()} " in note and str(runs / "run-3") in note
    assert "starts with '.' and ends with '.partial'" in note
    (staging.dir("logs") / "x.log").write_text("x")
    final = staging.commit(_manifest("run-3"))
    assert not (final / INCOMPLETE).exists()
    files = json.loads((final / "manifest.json").read_text())["files"]
    assert INCOMPLETE not in str(files) and files["logs"] == ["logs/x.log"]
    assert sorted(p.name for p in final.iterdir()) == ["logs", "manifest.json"]


def test_a_commit_that_cannot_rename_leaves_the_marker(tmp_path: Path):
    from harness.core.publish import INCOMPLETE

    runs = tmp_path / "runs"
    staging = ArchiveStaging(runs, "run-4")
    (runs / "run-4").mkdir()
    with pytest.raises(HarnessError, match="appeared while"):
        staging.commit(_manifest("run-4"))
    assert (staging.path / INCOMPLETE).is_file()


def test_a_failed_rename_puts_the_marker_back(tmp_path: Path, monkeypatch):
    from harness.core import publish

    runs = tmp_path / "runs"
    staging = ArchiveStaging(runs, "run-5")

    def interrupted(src, dst):
        assert not (Path(src) / publish.INCOMPLETE).exists()  # taken away just before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(publish.os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        staging.commit(_manifest("run-5"))
    assert (staging.path / publish.INCOMPLETE).is_file() and not (runs / "run-5").exists()


def test_the_columnar_merge_derives_what_the_pandas_definition_does(tmp_path: Path):
    """Over every edge the derivation knows (tests.synth's runs: slow and fast retries, never redelivered
    nacks), the merged file's derived columns equal harness.measure.latency.derive over the same events, in time order,
    whatever the shards' split and their sealed last parts."""
    import pandas as pd

    from harness.measure.latency import derive
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=40)
    events = pd.read_parquet(archive / "events" / "v.parquet").sample(frac=1, random_state=3)  # any order
    shards = _as_shards(events, tmp_path / "shards")
    staging = ArchiveStaging(tmp_path / "runs", "r2")
    merged = pq.read_table(staging.merge_events("v", shards)).to_pandas()
    expected = derive(events.drop(columns=["wakeup_ms", "redelivery_ms", "pickup_ms"]))
    expected = expected.sort_values("t_client_ns", kind="stable").reset_index(drop=True)
    assert merged["t_client_ns"].is_monotonic_increasing and len(merged) == len(expected)
    key = ["t_client_ns", "kind", "ledger_id", "group", "delivery_attempt"]
    got = merged.sort_values(key, kind="stable").reset_index(drop=True)
    want = expected.sort_values(key, kind="stable").reset_index(drop=True)
    for c in ("wakeup_ms", "redelivery_ms", "pickup_ms"):
        pd.testing.assert_series_equal(got[c], want[c], check_names=False)
    assert got["wakeup_ms"].notna().sum() + got["pickup_ms"].notna().sum() > 0


def _as_shards(events: object, shards: Path, workers: int = 3) -> Path:
    """``events`` as the shards of ``workers`` workers (each a part of them, its log sealed)."""
    from harness.contracts.events import EventLog

    for i, part in enumerate([events.iloc[k::workers] for k in range(workers)]):
        log = EventLog(shards, f"worker-{i}", {})
        for row in part.astype(object).where(part.notna(), None).to_dict("records"):
            log.record(row.pop("kind"), **{k: v for k, v in row.items() if v is not None})
        log.close()
    return shards


def test_a_merge_a_slice_of_messages_at_a_time_writes_and_summarises_what_the_whole_merge_does(tmp_path, monkeypatch):
    """A long run is merged a slice of its messages at a time (flat memory): the same file, events of one time
    in the same order, and the same summary from the slices it hands over as from the whole run."""
    import pandas as pd

    from harness.archive import writer
    from harness.measure.tally import Routing, SlicesSummary
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=120, lost=2)
    events = pd.read_parquet(archive / "events" / "v.parquet").sample(frac=1, random_state=5)
    events["t_client_ns"] = events["t_client_ns"] // 10**9 * 10**9  # many events of one time
    shards = _as_shards(events.drop(columns=["wakeup_ms", "redelivery_ms", "pickup_ms"]), tmp_path / "shards")
    subs, allowed = {"T": {"G": ["*"]}}, {"G": 3}

    def merged(run_id: str) -> tuple[Path, list, list]:
        staging = ArchiveStaging(tmp_path / "runs", run_id)
        acc = SlicesSummary(Routing(subs, allowed, 20_000.0))
        slices: list = []
        path = staging.merge_events("v", shards, lambda ev: (slices.append(ev), acc.add(ev)))
        assert sorted(p.name for p in staging.path.iterdir()) == ["INCOMPLETE", "events"]  # no work left
        return path, slices, acc.result()

    whole, [one], whole_summary = merged("whole")
    monkeypatch.setattr(writer, "MERGE_SLICE_EVENTS", 100)
    monkeypatch.setattr(writer, "SPLIT_ROWS", 37)  # batches that end within a shard, and span shards
    streamed, slices, summary = merged("streamed")
    assert len(slices) >= 5 and sum(map(len, slices)) == len(one) == len(events)
    assert pq.read_table(streamed).equals(pq.read_table(whole))
    assert summary == whole_summary
    assert summary[0]["ledger"]["lost"] == 2 and summary[0]["wakeup_ms"]["n"] > 0


def test_deliveries_under_another_topic_name_are_counted(tmp_path: Path):
    import pandas as pd

    from harness.measure.tally import Routing, SlicesSummary
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=40)
    events = pd.read_parquet(archive / "events" / "v.parquet")
    retries = (events["kind"] == "received") & (events["delivery_attempt"] > 1)
    routing = Routing({"T": {"G": ["*"]}}, {"G": 3}, 20_000.0)

    def summary(ev: pd.DataFrame) -> dict:
        acc = SlicesSummary(routing)
        acc.add(ev)
        [row] = acc.result()
        return row

    assert summary(events)["renamed_deliveries"] == 0  # an archive before the column: none
    renamed = events.assign(delivered_topic=pd.Series(None, index=events.index, dtype=object))
    renamed.loc[retries, "delivered_topic"] = "%RETRY%G_T"
    row = summary(renamed)
    assert row["renamed_deliveries"] == int(retries.sum()) == row["retry_deliveries"] > 0


def test_each_client_calls_failures_are_counted_on_their_own(tmp_path: Path):
    import pandas as pd

    from harness.inputs.expectations import ERROR_CALLS
    from harness.measure.tally import Routing, SlicesSummary
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=40)
    events = pd.read_parquet(archive / "events" / "v.parquet")
    routing = Routing({"T": {"G": ["*"]}}, {"G": 3}, 20_000.0)
    first = events.iloc[0]
    # What the recorder writes (harness.workload.recorder): "<call>: <why>", a receive's and a DLQ reader's alike.
    details = ["receive: INTERNAL_SERVER_ERROR", "receive: no answer", "ack: Parse failed, dataList size 1",
               "dlq receive: refused", "nack: INVALID_RECEIPT_HANDLE", None]
    errors = pd.DataFrame([{**first.to_dict(), "kind": "error", "detail": d, "ledger_id": None,
                            "delivery_attempt": None} for d in details])
    acc = SlicesSummary(routing)
    acc.add(pd.concat([events, errors], ignore_index=True))
    [row] = acc.result()
    assert row["errors"] == len(details)
    assert {c: row[f"{c}_errors"] for c in ERROR_CALLS} == {"send": 0, "receive": 2, "ack": 1, "nack": 1,
                                                            "extend": 0}


def test_cycles_the_run_stopped_waiting_for_are_counted_and_said_beside_the_losses(tmp_path: Path, capsys):
    import pandas as pd
    from rich.text import Text

    from harness.measure.tally import Routing, SlicesSummary
    from harness.report.run_tables import print_summary
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=40)
    events = pd.read_parquet(archive / "events" / "v.parquet")
    routing = Routing({"T": {"G": ["*"]}}, {"G": 3}, 20_000.0)
    first = events.iloc[0]
    # What the recorder writes when a cycle closes (harness.workload.recorder): drained, or timeout.
    ends = pd.DataFrame([{**first.to_dict(), "kind": "cycle_end", "detail": d, "cycle": c, "ledger_id": None,
                          "delivery_attempt": None} for c, d in ((0, "timeout"), (1, "drained"), (2, "timeout"))])
    acc = SlicesSummary(routing)
    acc.add(pd.concat([events, ends], ignore_index=True))
    [row] = acc.result()
    assert row["cycles_timed_out"] == 2
    acc = SlicesSummary(routing)
    acc.add(events)
    [calm] = acc.result()
    assert calm["cycles_timed_out"] == 0
    # The run's table says so beside the losses (synth.slow loses some), and nothing when every cycle drained.
    print_summary([row])
    assert "2 timed out" in capsys.readouterr().out
    row["ledger"] = {**row["ledger"], "lost": 1}
    print_summary([row])
    said = Text.from_ansi(capsys.readouterr().out).plain  # (colours, when a test before forced a terminal)
    assert "late or lost alike" in " ".join(said.split())
    print_summary([calm])
    assert "timed out" not in capsys.readouterr().out


def test_a_scenarios_selections_count_the_deliveries_and_messages_that_match(tmp_path: Path):
    import pandas as pd

    from harness.inputs.expectations import evaluate
    from harness.inputs.selections import Selection
    from harness.measure.tally import Routing, SlicesSummary
    from tests import synth

    archive = synth.archive(tmp_path / "synth", "r", {"v": synth.slow}, messages=40)
    events = pd.read_parquet(archive / "events" / "v.parquet")
    received = events["kind"] == "received"
    firsts, retries = received & (events["delivery_attempt"] == 1), received & (events["delivery_attempt"] > 1)
    renamed = events.assign(delivered_topic=pd.Series(None, index=events.index, dtype=object))
    renamed.loc[retries, "delivered_topic"] = "%RETRY%G_T"
    # Two first deliveries renamed as well: what a misaligned recoding does (apache/rocketmq#10945's shape).
    renamed.loc[firsts[firsts].index[:2], "delivered_topic"] = "%RETRY%G_T"
    selections = {"renamed_first": Selection(attempt=1, renamed=True), "retries": Selection(min_attempt=2),
                  "none": Selection(tag="no-such-tag")}
    acc = SlicesSummary(Routing({"T": {"G": ["*"]}}, {"G": 3}, 20_000.0, selections=selections))
    acc.add(renamed)
    [row] = acc.result()
    assert row["selected"]["renamed_first"] == {"deliveries": 2, "messages": 2}
    assert row["selected"]["retries"]["deliveries"] == int(retries.sum()) == row["retry_deliveries"]
    assert 0 < row["selected"]["retries"]["messages"] <= row["selected"]["retries"]["deliveries"]
    assert row["selected"]["none"] == {"deliveries": 0, "messages": 0}  # nothing matched: 0, not no data
    tally = evaluate(["selected.renamed_first.deliveries == 0", "selected.none.messages == 0"], row)
    assert (tally["failed"], tally["met"]) == (1, 1)
