"""A campaign's second run on the brokers of its first (`--keep-brokers`, harness.run.kept), on real brokers: the
same scenario twice, the second under names of its own on the wire, every message of both accounted for, each
archive with what the servers wrote during its own run, and nothing left running after the campaign."""

import json
import re
from pathlib import Path

import pytest

from harness.campaigns.loop import Campaign
from harness.contracts.endpoints import run_tag
from harness.contracts.options import RunOptions
from harness.contracts.record import RunRecord
from harness.core import process
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import load_variants, select
from spark.outputs import what_ran

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"
LEDGER = ("acked_first", "acked_after_retry", "late", "duplicated", "dead_lettered", "lost")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    runs = tmp_path_factory.mktemp("kept")
    lines: list[str] = []
    c = Campaign(runs, RunOptions(), lines.append, keep_brokers=True)
    variants = select(load_variants(), ["patched"])
    scenario = load_scenario(str(SCENARIO))
    results = [c.run(scenario, variants, f"run {i}") for i in (1, 2)]
    prefix = c.kept.backend.token_prefix
    workdir = c.kept.workdir
    c.finish()
    manifests = [json.loads((Path(r.archive) / "manifest.json").read_text()) for r in results]
    return [Path(r.archive) for r in results], manifests, lines, prefix, workdir


def test_the_second_run_ran_on_the_first_runs_brokers_under_its_own_names(campaign):
    archives, (first, second), lines, _, _ = campaign
    [v1], [v2] = first["variants"], second["variants"]
    assert v1["kept"] is None and "suffix" not in v1["endpoints"]
    assert v2["kept"] == {"started_by": first["run_id"], "scenario": "short-burst", "runs_on_them": 1}
    assert v2["endpoints"]["suffix"] == run_tag(second["run_id"], "patched")
    assert v2["endpoints"]["grpc"] == v1["endpoints"]["grpc"]
    assert sum("started RocketMQ" in ln for ln in lines) == 1
    assert any(f"patched: brokers kept from run {first['run_id']}" in ln for ln in lines)
    # and what a report's first screen says ran (summary schema 17)
    [build] = what_ran(RunRecord.model_validate(second))["builds"]
    assert build["kept"] == v2["kept"]


def test_every_message_of_both_runs_is_accounted_for(campaign):
    _, manifests, _, _, _ = campaign
    for m in manifests:
        [s] = m["summary"]
        ledger = s["ledger"]
        assert s["sent"] > 0 and ledger["owed"] == s["sent"] and ledger["lost"] == 0
        assert sum(ledger[c] for c in LEDGER) == ledger["owed"]
        assert s["retry_deliveries"] > 0 and ledger["retries_never_redelivered"] == 0


def test_each_archive_has_what_the_servers_wrote_during_its_run(campaign):
    (a1, a2), _, _, _, _ = campaign
    booted = re.compile(r"The broker\[broker-patched, [^]]+\] boot success")
    assert booted.search((a1 / "logs" / "patched" / "proxy" / "proxy.log").read_text())
    assert "startup successfully" in (a1 / "logs" / "patched" / "proxy.out").read_text()
    # The second's logs start where the first's ended: no boot, but its own pops.
    assert not booted.search((a2 / "logs" / "patched" / "proxy" / "proxy.log").read_text())
    assert "startup successfully" not in (a2 / "logs" / "patched" / "proxy.out").read_text()
    assert (a2 / "logs" / "patched" / "conf" / "broker.conf").is_file()


def test_the_campaign_leaves_nothing_running(campaign):
    _, _, _, prefix, workdir = campaign
    assert process.find_owned(prefix) == [] and not workdir.exists()
