"""A real run on lite topics (RIP-83, 5.5.0): a LITE parent, 16 messages a burst over 4 lite topics, one client
subscribed to all four popping over remoting, half the first deliveries nacked; every message accounted for, each
lite topic in order."""

import json
from pathlib import Path

import pandas as pd

from tests.integration import leftovers

RESOURCES = Path(__file__).parent.parent / "resources"
# The module's run: conftest.py's `archive` runs `rmq-harness run` with these options once for the module.
RUN = ["--variants", str(RESOURCES / "variants-5.5.yaml"), "--variant", "release-5-5-0",
       "--scenario", str(RESOURCES / "scenarios" / "short-lite.yaml")]


def test_every_message_of_every_lite_topic_is_accounted_for(archive: Path):
    [s] = json.loads((archive / "manifest.json").read_text())["summary"]
    ledger = s["ledger"]
    assert s["sent"] == 32 and ledger["owed"] == 32 and ledger["lost"] == 0 and ledger["duplicated"] == 0
    assert ledger["acked_first"] + ledger["acked_after_retry"] == 32 and ledger["acked_after_retry"] > 0
    assert ledger["retries_never_redelivered"] == 0


def test_each_lite_topic_was_delivered_in_the_order_it_was_sent(archive: Path):
    ev = pd.read_parquet(archive / "events" / "release-5-5-0.parquet")
    received = ev[ev.kind == "received"]
    assert sorted(received.message_group.unique()) == ["mg0", "mg1", "mg2", "mg3"]  # the lite topics
    sent = ev[ev.kind == "sent"].set_index("ledger_id").t_client_ns
    for lite, got in received[received.delivery_attempt == 1].sort_values("t_client_ns").groupby("message_group"):
        first = got.drop_duplicates("ledger_id")
        assert list(sent[first.ledger_id].values) == sorted(sent[first.ledger_id].values), lite
    # Each lite topic is one queue (the LMQ's), and messages were given back and came back.
    assert (ev.kind == "nacked").sum() > 0 and (received.queue_id == 0).all()


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
