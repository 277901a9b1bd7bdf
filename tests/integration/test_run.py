"""A short real run: 5.3.3 brokers (unpatched and patched side by side), a Locust master and two workers per
variant, the archive they leave (the `short_burst` run of conftest.py, which test_agents reads too)."""

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.contracts.events import COLUMNS, EVENT_SCHEMA_VERSION
from harness.contracts.record import MANIFEST_SCHEMA_VERSION
from harness.run.observability import dashboards
from tests.integration import leftovers


@pytest.fixture(scope="module")
def archive(short_burst: Path) -> Path:
    return short_burst


def test_every_sent_ledger_id_is_received_and_retries_are_measured(archive: Path):
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    assert tuple(ev.columns) == COLUMNS
    sent = ev[ev.kind == "sent"]
    assert len(set(sent.ledger_id)) == 16 and sent.groupby("cycle").size().to_dict() == {0: 8, 1: 8}
    received = ev[ev.kind == "received"]
    assert set(sent.ledger_id) <= set(received.ledger_id)
    retries = received[received.delivery_attempt > 1]
    assert set(retries.ledger_id) == set(sent.ledger_id)  # every message was nacked once and came back
    # Each retry is either a wakeup (its poll was waiting when the copy was stored) or a pickup, never both.
    assert (retries.wakeup_ms.notna() ^ retries.pickup_ms.notna()).all()
    waited = retries.poll_started_ns / 1e6 <= retries.store_ts_ms
    assert (retries.wakeup_ms.notna() == waited).all() and retries.wakeup_ms.notna().any()
    assert retries.redelivery_ms.notna().all()
    # Messages carry their cycle; the producer's worker closed both cycles once the master saw them drained.
    assert (received.cycle == received.ledger_id.map(dict(zip(sent.ledger_id, sent.cycle, strict=True)))).all()
    ends = ev[ev.kind == "cycle_end"]
    assert ends.cycle.tolist() == [0, 1] and (ends.detail == "drained").all()
    # Every message body names this run, its topic and the group it was meant for.
    assert (received.origin_topic == "ShortBurstTopic").all() and (received.intended_group == "ShortBurstGroup").all()
    # The file-based pop returns every retry under the topic popped (the KV path, apache/rocketmq#11195, does not).
    assert received.delivered_topic.isna().all()
    assert (ev.loc[ev.kind == "acked", "delivery_attempt"] == 2).all()


def test_manifest_and_locust_output(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    assert m["schema_version"] == MANIFEST_SCHEMA_VERSION == 11
    assert m["event_schema_version"] == EVENT_SCHEMA_VERSION == 8
    assert m["scenario"]["name"] == "short-burst"
    assert [v["name"] for v in m["variants"]] == ["unpatched", "patched"]
    # brought up in a random order, recorded with its seed
    assert sorted(m["variant_order"]["names"]) == ["patched", "unpatched"] and m["variant_order"]["how"] == "random"
    assert isinstance(m["variant_order"]["seed"], int)
    [v] = [v for v in m["variants"] if v["name"] == "unpatched"]
    assert v["version"] == "5.3.3"
    assert v["broker_config"]["enableRetryTopicV2"] == "false"
    assert v["ignored_settings"] == []  # 5.3.3 knows every setting the harness writes (GET_BROKER_CONFIG)
    # The agents said they installed; the broker's clock was measured against ours (one clock here).
    assert any("listeners default to 127.0.0.1" in ln for ln in v["agent_report"]["loopback-bind.jar"])
    assert v["agent_report"]["pop-wakeup-probe.jar"]
    lo, hi = v["clock_offset_ms"]
    assert lo <= 0 <= hi and hi - lo < 1000
    [s] = [s for s in m["summary"] if s["variant"] == "unpatched"]
    assert s["ledger"]["never_received"] == 0 and s["ledger"]["retries_never_redelivered"] == 0
    assert s["wakeup_ms"]["n"] + s["pickup_ms"]["n"] == 16 and s["cycles"] == 2
    stats = pd.read_csv(archive / "locust" / "unpatched" / "stats_stats.csv")
    names = set(stats["Name"])
    assert {"send", "receive", "ack", "nack", "retry wakeup"} <= names
    assert int(stats.loc[stats.Name == "send", "Request Count"].iloc[0]) == 16
    assert (archive / "locust" / "unpatched" / "report.html").stat().st_size > 0
    assert (archive / "logs" / "unpatched" / "proxy" / "pop.log").exists()
    assert (archive / "logs" / "unpatched" / "locust-worker-1.log").exists()


def test_prometheus_scraped_the_workers_and_the_broker(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())["prometheus"]
    assert m["series"]["harness"] > 0 and m["series"]["broker_pop"] > 0
    answer = json.loads((archive / "prometheus" / "harness.json").read_text())
    sent = [r for r in answer["data"]["result"] if r["metric"]["__name__"] == "rmq_harness_messages_sent_total"]
    for variant in ("unpatched", "patched"):  # the last scrape saw every send of each
        assert sum(float(r["values"][-1][1]) for r in sent if r["metric"]["variant"] == variant) == 16
    broker = json.loads((archive / "prometheus" / "broker_pop.json").read_text())["data"]["result"]
    assert any(r["metric"]["__name__"] == "rocketmq_pop_revive_in_message_total" for r in broker)


def test_every_dashboard_panel_query_returned_data(archive: Path):
    panels = json.loads((archive / "prometheus" / "panels.json").read_text())["panels"]
    assert len(panels) == len(dashboards.queries()) > 0
    empty = [p["panel"] for p in panels if p["series"] == 0 or p["answer"]["status"] != "success"]
    assert empty == []


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
