"""A real run with a planted failure and a selection: the plant waits for the load (the run arms it when the
producers start, so readiness is never planted), then the local-mode proxy hands out 2 messages without a receipt
handle; their acks fail (counted as ack_errors), they come back after their invisible time (selected.again), and
the scenario's rules say so."""

import json
from pathlib import Path

import pandas as pd

from tests.integration import leftovers

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-plants.yaml"
# The module's run: conftest.py's `archive` runs `rmq-harness run` with these options once for the module.
RUN = ["--variant", "unpatched", "--scenario", str(SCENARIO)]


def test_the_plant_was_armed_by_the_load_and_failed_exactly_its_calls(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    assert m["grpc_client"] == "native"  # the scenario's client, on record
    [variant] = m["variants"]
    said = variant["agent_report"]["pop-fault.jar"]
    armed = [i for i, line in enumerate(said) if line.startswith("armed: ")]
    planted = [i for i, line in enumerate(said) if line.startswith("planted failure ")]
    # Armed once (when the load started), then exactly its two calls, none before.
    assert len(armed) == 1 and len(planted) == 2 and armed[0] < planted[0], said
    assert variant["agent_report"]["pop-fault.jar"][armed[0]].endswith("plants-armed exists)")


def test_handle_less_deliveries_are_ack_errors_and_come_back_as_selected(archive: Path):
    [s] = json.loads((archive / "manifest.json").read_text())["summary"]
    assert s["sent"] == 24 and s["ack_errors"] == 2 and s["errors"] == 2 and s["receive_errors"] == 0
    assert s["selected"]["again"] == {"deliveries": 2, "messages": 2}
    assert s["ledger"]["lost"] == 0
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    errors = ev[ev.kind == "error"]
    assert errors.detail.str.startswith("ack: ").all() and errors.detail.str.contains("Parse failed").all()
    # The messages that failed their ack are the ones delivered again.
    again = set(ev[(ev.kind == "received") & (ev.delivery_attempt == 2)].ledger_id)
    assert again == set(errors.ledger_id)


def test_the_rules_see_the_counts_and_the_selection(archive: Path):
    from harness.contracts.record import RunRecord
    from harness.inputs.expectations import evaluate
    from harness.measure.enrich import enrich

    record = RunRecord.model_validate_json((archive / "manifest.json").read_text())
    [row] = enrich(record.summary, [record])
    tally = evaluate(record.scenario["expect"], row)
    assert (tally["failed"], tally["met"], tally["no_data"]) == (2, 0, 0), tally


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
