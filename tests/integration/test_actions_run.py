"""A real run with actions: a broker setting, the group and the topic changed at runtime when the second cycle
starts, the group's offsets reset to the earliest when the third does; the brokers' answers are in the archive, and
the reset shows in what the consumers got (the first two bursts delivered again after their acks)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.integration import leftovers

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-actions.yaml"
# The module's run: conftest.py's `archive` runs `rmq-harness run` with these options once for the module.
RUN = ["--variant", "unpatched", "--scenario", str(SCENARIO)]


def test_each_action_was_carried_out_at_its_cycle_and_the_brokers_answer_is_kept(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    assert m["schema_version"] >= 10
    actions = {a["label"]: a for a in m["actions"]}
    assert set(actions) == {"broker_config popCkStayBufferTime=10001", "group_config ShortActionGroup "
                            "retry_max_times=3", "topic_queues ShortActionTopic = 2",
                            "reset_offset ShortActionGroup to earliest"}
    for a in actions.values():
        assert a["error"] is None and a["variant"] == "unpatched" and a["started_ns"] <= a["ended_ns"]
    assert "read back popCkStayBufferTime=10001" in actions["broker_config popCkStayBufferTime=10001"]["result"]
    assert "'retry_max_times': 3" in actions["group_config ShortActionGroup retry_max_times=3"]["result"]
    reset = actions["reset_offset ShortActionGroup to earliest"]
    assert reset["when"] == "cycle 2" and "q0->0" in reset["result"] and "q1->0" in reset["result"]
    # The cycle's moment, not the clock's: the reset came after the changes, once the third burst began.
    assert reset["at_s"] > actions["broker_config popCkStayBufferTime=10001"]["at_s"]


def test_the_actions_are_events_and_the_reset_brought_the_earlier_bursts_back(archive: Path):
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    rows = ev[ev.kind == "action"]
    assert len(rows) == 4 and set(rows.worker) == {"harness"} and (rows.started_ns <= rows.t_client_ns).all()
    reset_ns = rows[rows.detail.str.startswith("reset_offset")].t_client_ns.iloc[0]
    early = ev[(ev.kind == "received") & (ev.cycle < 2)]
    # Every message of cycles 0 and 1 was delivered before the reset, and again after it.
    before = set(early[early.t_client_ns < reset_ns].ledger_id)
    after = set(early[early.t_client_ns > reset_ns].ledger_id)
    assert len(before) == 16 and after == before
    [s] = json.loads((archive / "manifest.json").read_text())["summary"]
    assert s["ledger"]["duplicated"] >= 16 and s["ledger"]["lost"] == 0


def test_the_consumers_began_once_the_first_burst_was_stored(archive: Path):
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    sent = ev[(ev.kind == "sent") & (ev.cycle == 0)]
    received = ev[ev.kind == "received"]
    # The first receive that got anything was asked for after the last send of burst 0 was acknowledged.
    assert len(sent) == 8 and len(received) and received.poll_started_ns.min() > sent.t_client_ns.max()


def test_the_observations_read_the_brokers_log_metrics_and_runtime_figures(archive: Path):
    from harness.contracts.record import RunRecord
    from harness.inputs.expectations import evaluate
    from harness.measure.enrich import enrich

    record = RunRecord.model_validate_json((archive / "manifest.json").read_text())
    observed = record.variant("unpatched").observed
    # The broker logged the one runtime change; it counted messages out and gets while the load ran.
    assert observed["config_changes"] == 1 and observed["messages_out"] > 0 and observed["gets"] > 0
    [row] = enrich(record.summary, [record])
    assert row["observed"]["messages_out"] == observed["messages_out"] / row["deliveries"]
    tally = evaluate(record.scenario["expect"], row)
    assert tally["failed"] == 0 and tally["no_data"] == 0 and tally["met"] == 4, tally


def test_the_broker_jvms_gc_log_is_archived_and_its_heap_figures_read(archive: Path):
    from harness.inputs.observations import LogLines
    from harness.run.observability.observed import log_figure

    # One JVM hosts the broker (the local-mode proxy): its GC log sits with its server logs in the archive.
    [gc] = sorted((archive / "logs" / "unpatched").rglob("gc-broker-*.log"))
    assert gc.parent.name == "proxy" and "Using G1" in gc.read_text()
    afters = [int(m.group(1)) for m in re.finditer(r"Pause.* [0-9]+M->([0-9]+)M", gc.read_text())]
    heap = LogLines(log="gc-broker-*.log", pattern=r"Pause.* [0-9]+M->([0-9]+)M", how="max")
    if afters:  # a short run may end before its first collection; then there is no number, and it says so
        assert log_figure(archive / "logs" / "unpatched", heap) == max(afters)
    else:
        with pytest.raises(ValueError, match="no number"):
            log_figure(archive / "logs" / "unpatched", heap)


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
