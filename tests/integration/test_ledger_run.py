"""The message ledger on a real 5.3.3 broker: steady traffic whose drain phase closes every window (the
nacked share retried and acked, the rest acked first; driven by the native gRPC client), and tagged messages
of which one group's end in its dead-letter queue, read by the harness, while the other group's are acked."""

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.cli.main import main
from harness.inputs import timing
from harness.inputs.catalogue import load_scenario
from harness.measure.ledger import classify
from tests.events import counts

SCENARIOS = Path(__file__).parent.parent / "resources" / "scenarios"
SCENARIO = SCENARIOS / "short-steady.yaml"


def _run(tmp_path_factory, scenario: Path, *more: str) -> tuple[Path, float]:
    runs = tmp_path_factory.mktemp("runs")
    t0 = time.monotonic()
    assert main(["run", "--variant", "unpatched", "--scenario", str(scenario), "--runs-dir", str(runs), *more]) == 0
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return archive, time.monotonic() - t0


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, float]:
    # Through the native gRPC driver (its own HTTP/2 transport) against the real proxy: sends, receives, nacks
    # (ChangeInvisibleDuration) and acks, each message accounted for; the DLQ run below drives the official one.
    return _run(tmp_path_factory, SCENARIO, "--grpc-client", "native")


def test_the_drain_phase_closes_every_window_and_ends_the_run(run):
    archive, took = run
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    sent = ev[ev.kind == "sent"]
    windows = sorted(sent.cycle.unique())
    assert len(sent) >= 24 and windows[0] == 0 and len(windows) >= 2
    ends = ev[ev.kind == "cycle_end"]
    assert sorted(ends.cycle) == list(range(windows[-1] + 1)) and (ends.detail == "drained").all()
    # Nothing is sent after the drain phase began: the last send precedes every window's close.
    assert sent.t_client_ns.max() < ends.t_client_ns.min()
    sc = load_scenario(str(SCENARIO))
    assert took < timing.run_time_s(sc) + 120  # it ended on the producers' word, not by the run-time limit alone


def test_every_message_is_in_the_ledger_once_and_the_nacked_share_came_back(run):
    archive, _ = run
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    sc = load_scenario(str(SCENARIO))
    ledger = classify(ev, sc.subscriptions(), sc.allowed_deliveries())
    sent = set(ev.loc[ev.kind == "sent", "ledger_id"])
    assert set(ledger.ledger_id) == sent and ledger.ledger_id.is_unique
    picked = {lid for lid in sent if sc.nack.applies(1, lid)}
    assert 0 < len(picked) < len(sent)  # the hash picked a share, not all or none
    by_class = ledger.groupby("class")["ledger_id"].apply(set).to_dict()
    assert by_class == {"acked_after_retry": picked, "acked_first": sent - picked}
    manifest = json.loads((archive / "manifest.json").read_text())
    [s] = manifest["summary"]
    assert {k: s["ledger"][k] for k in counts(ledger)} == counts(ledger)
    assert manifest["grpc_client"] == "native"


def test_tagged_messages_reach_their_groups_and_dead_letters_are_read_back(tmp_path_factory):
    scenario = SCENARIOS / "short-dlq-tags.yaml"
    archive, _ = _run(tmp_path_factory, scenario)
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    sc = load_scenario(str(scenario))
    ledger = classify(ev, sc.subscriptions(), sc.allowed_deliveries())
    sent = ev[ev.kind == "sent"].set_index("ledger_id")["tag"]
    assert sorted(sent.value_counts().to_dict().items()) == [("TagA", 4), ("TagB", 4)]
    by = ledger.set_index(["ledger_id", "group"])
    for lid, tag in sent.items():
        if tag == "TagA":  # nacked twice (all the group allows), then in %DLQ%DeadA, seen once
            assert (by.loc[(lid, "DeadA"), "class"], by.loc[(lid, "DeadA"), "deliveries"]) == ("dead_lettered", 2)
        else:
            # the same nacks, but LiveB allows 16 retries: back twice (with its tag), then acked
            assert (by.loc[(lid, "LiveB"), "class"], by.loc[(lid, "LiveB"), "retries"]) == ("acked_after_retry", 2)
    assert set(ledger.group) == {"DeadA", "LiveB"} and len(ledger) == 8  # nothing crossed to the other group
    seen = ev[ev.kind == "dlq_seen"]
    assert sorted(seen.ledger_id) == sorted(sent[sent == "TagA"].index) and (seen.tag == "TagA").all()
    received = ev[ev.kind == "received"]
    assert (received.delivery_attempt > 1).sum() == 4 + 8  # TagA: one retry each in DeadA; TagB: two in LiveB
    assert (received.tag == received.ledger_id.map(sent)).all()  # every delivery, retries too, kept its tag
    [s] = json.loads((archive / "manifest.json").read_text())["summary"]
    assert (s["ledger"]["dead_lettered"], s["ledger"]["dlq_early"], s["ledger"]["lost"]) == (4, 0, 0)
