"""A real run on the largest topology: two masters, the first with a slave acting master, and a cluster-mode
proxy, each broker a JVM of its own; the slave killed and started again while the load runs."""

import json
from pathlib import Path

from tests.integration import leftovers

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-topology.yaml"
# The module's run: conftest.py's `archive` runs `rmq-harness run` with these options once for the module.
RUN = ["--variant", "patched", "--scenario", str(SCENARIO)]


def test_every_broker_ran_with_its_role_and_the_agents(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    [v] = m["variants"]
    nodes = {n["name"]: n for n in v["endpoints"]["nodes"]}
    assert set(nodes) == {"broker", "slave", "broker-b"} and not nodes["slave"]["master"]
    assert len({n["address"] for n in nodes.values()}) == 3
    # Every broker JVM printed that the fix and the loopback agents installed.
    for node in nodes:
        assert v["agent_report"][f"{node}/pop-retry-wakeup.jar"] and v["agent_report"][f"{node}/loopback-bind.jar"]
    conf = archive / "logs" / "patched" / "conf"
    assert "brokerRole=SLAVE\n" in (conf / "slave.conf").read_text()
    assert "supportActingMaster=true\n" in (conf / "namesrv.conf").read_text()
    for node in nodes:
        assert (archive / "logs" / "patched" / node / "broker.log").exists()


def test_the_slave_was_killed_and_came_back(archive: Path):
    [f] = json.loads((archive / "manifest.json").read_text())["faults"]
    assert f["label"] == "kill9 slave" and f["error"] is None and f["back"] != f["process"]


def test_messages_went_through_both_masters_and_are_accounted_for(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    [s] = m["summary"]
    assert s["sent"] > 0 and s["ledger"]["owed"] == s["sent"]
    assert sum(s["ledger"][c] for c in ("acked_first", "acked_after_retry", "late", "duplicated",
                                        "dead_lettered", "lost")) == s["ledger"]["owed"]
    # Both masters served pops of the scenario's topic: each one's revive service saw its checkpoints.
    pop = json.loads((archive / "prometheus" / "broker_pop.json").read_text())["data"]["result"]
    served = {r["metric"]["node_id"] for r in pop if r["metric"]["__name__"] == "rocketmq_pop_revive_in_message_total"
              and r["metric"].get("topic") == "ShortTopoTopic" and float(r["values"][-1][1]) > 0}
    assert served == {"broker-patched", "broker-patched-b"}


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
