"""harness.deploy.external against a cluster made of monkeypatched admin answers (pure logic: what preflight
reads from a cluster, what it refuses, what down removes). The run against real brokers is the integration
layer's."""

import pytest

from harness.client import remoting
from harness.core.errors import ConfigError
from harness.deploy import external
from harness.inputs.catalogue import load_scenario
from tests.unit.by_hand import variant

ONE_MASTER = '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911"},"brokerName":"broker-a",' \
             '"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
WITH_SLAVE = '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"}},' \
             '"broker-b":{"brokerAddrs":{0:"10.0.0.7:10911"}}},"clusterAddrTable":{"C1":["broker-a","broker-b"]}}'
SETTINGS = {"enableRetryTopicV2": "false", "enableNotifyBeforePopCalculateLag": "false", "aclEnable": "false",
            "metricsExporterType": "PROM", "metricsPromExporterHost": "0.0.0.0", "metricsPromExporterPort": "5557"}


def _staging(**endpoints):
    """A cluster of one's own, staging: its name server and proxy, and ``endpoints``."""
    return variant("staging", endpoints={"namesrv": "ns:9876", "proxy": "px:8081", **endpoints})


@pytest.fixture
def cluster(monkeypatch):
    """A cluster whose answers a test can change: its cluster table, the first master's settings, what answers."""
    state = {"info": ONE_MASTER, "settings": dict(SETTINGS), "down": set(), "topics": set(), "groups": set(),
             "deleted": []}
    monkeypatch.setattr(external, "reachable", lambda a, timeout_s=3.0: "connection refused" if a in state["down"]
                        else None)
    monkeypatch.setattr(remoting, "cluster_info", lambda ns: state["info"])
    monkeypatch.setattr(remoting, "broker_settings", lambda b: dict(state["settings"]))
    monkeypatch.setattr(remoting, "runtime_info", lambda b: {"brokerVersionDesc": "V5_3_3"})
    monkeypatch.setattr(remoting, "topics", lambda b: set(state["topics"]))
    monkeypatch.setattr(remoting, "groups", lambda b: set(state["groups"]))
    monkeypatch.setattr(remoting, "delete_topic", lambda b, t: state["deleted"].append(("topic", b, t)))
    monkeypatch.setattr(remoting, "delete_topic_in_namesrv", lambda ns, t: state["deleted"].append(("route", ns, t)))
    monkeypatch.setattr(remoting, "delete_group", lambda b, g: state["deleted"].append(("group", b, g)))
    return state


def test_the_cluster_table_is_read_with_fastjsons_bare_integer_keys():
    assert external.parse_cluster_info(WITH_SLAVE) == {
        "C1": {"broker-a": {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}, "broker-b": {0: "10.0.0.7:10911"}}}


def test_preflight_learns_the_version_shape_and_exporter_and_names_the_runs_resources(cluster):
    backend = external.ExternalBackend([_staging()], "grpc", "20261127-060000-burst-abcd", log=lambda _m: None)
    backend.preflight(load_scenario("burst"))
    [ep] = backend.endpoints()
    assert (ep.version, ep.broker, ep.grpc, ep.namesrv) == ("5.3.3", "10.0.0.5:10911", "px:8081", "ns:9876")
    assert ep.metrics == "http://10.0.0.5:5557/metrics" and ep.suffix.startswith("-rh") and not ep.nodes
    assert backend.report("staging")["cluster"] == "DefaultCluster"
    assert backend.agent_report("staging") == {}
    with pytest.raises(ConfigError, match="owns none of its processes"):
        backend.process("staging", "broker")


@pytest.mark.parametrize(("change", "scenario", "why"), [
    ({"down": {"ns:9876"}}, "burst", "name server ns:9876 does not answer .connection refused.; is the cluster up"),
    ({"down": {"px:8081"}}, "burst", "proxy px:8081 does not answer"),
    ({"settings": {**SETTINGS, "enableRetryTopicV2": "false"}}, "fourgroups-v2",
     "runs enableRetryTopicV2=false; scenario fourgroups-v2 needs true, and the harness does not change"),
    ({"settings": {**SETTINGS, "aclEnable": "true"}}, "burst", "runs with ACL"),
    ({"info": WITH_SLAVE}, "burst", "has 2 master.s. and 1 slave.s.; scenario burst runs on 1 master.s. without a "
                                    "slave"),
    ({"info": '{"brokerAddrTable":{},"clusterAddrTable":{}}'}, "burst", "knows no broker"),
    ({"info": ONE_MASTER.replace('"clusterAddrTable":{"DefaultCluster":["broker-a"]}',
                                 '"clusterAddrTable":{"A":["broker-a"],"B":["broker-a"]}')}, "burst",
     "knows clusters A, B; add endpoints.cluster"),
])
def test_what_the_run_cannot_do_on_the_cluster_is_refused_in_one_line(cluster, change, scenario, why):
    cluster.update(change)
    backend = external.ExternalBackend([_staging()], "grpc", "r", log=lambda _m: None)
    with pytest.raises(ConfigError, match=why) as e:
        backend.preflight(load_scenario(scenario))
    assert "\n" not in str(e.value) and "variant staging" in str(e.value)


def test_a_grpc_scenario_needs_the_clusters_proxy(cluster):
    v = variant("staging", endpoints={"namesrv": "ns:9876"})
    with pytest.raises(ConfigError, match="names no endpoints.proxy"):
        external.inspect(v, load_scenario("burst"))


def test_a_broker_without_an_exporter_is_measured_without_broker_series_and_said(cluster):
    cluster["settings"] = {**SETTINGS, "metricsExporterType": "DISABLE"}
    said = []
    backend = external.ExternalBackend([_staging()], "grpc", "r", log=said.append)
    backend.preflight(load_scenario("burst"))
    assert backend.endpoints()[0].metrics == "" and "no broker metrics (metricsExporterType=DISABLE)" in said[0]
    assert backend.report("staging")["metrics"] == "none (metricsExporterType=DISABLE)"


def test_down_removes_only_the_runs_own_names_and_nothing_when_kept(cluster):
    backend = external.ExternalBackend([_staging()], "grpc", "r", log=lambda _m: None)
    backend.preflight(load_scenario("burst"))
    tag = backend.endpoints()[0].suffix
    cluster["topics"] = {f"PopBurstTopic{tag}", f"%RETRY%PopBurstGroup{tag}_PopBurstTopic{tag}", "TheirTopic",
                         "PopBurstTopic-rh00000000"}
    cluster["groups"] = {f"PopBurstGroup{tag}", "TheirGroup"}
    assert backend.down() == []  # nothing stopped
    assert sorted(x[2] for x in cluster["deleted"] if x[0] == "topic") == sorted(
        [f"PopBurstTopic{tag}", f"%RETRY%PopBurstGroup{tag}_PopBurstTopic{tag}"])
    assert [x[2] for x in cluster["deleted"] if x[0] == "group"] == [f"PopBurstGroup{tag}"]
    assert len(backend.report("staging")["removed"]) == 3
    # A master's topics go before its groups: its revive service would create a deleted group again while the
    # topic is there; the routes go last.
    kinds = [x[0] for x in cluster["deleted"]]
    assert kinds == ["topic", "topic", "group", "route", "route"]
    cluster["deleted"].clear()
    kept = external.ExternalBackend([_staging()], "grpc", "r", log=lambda _m: None, keep=True)
    kept.preflight(load_scenario("burst"))
    kept.down()
    assert cluster["deleted"] == [] and kept.report("staging")["kept"]


TWO_MASTERS = '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911"}},' \
              '"broker-b":{"brokerAddrs":{0:"10.0.0.7:10911"}}},"clusterAddrTable":{"C1":["broker-a","broker-b"]}}'


def test_every_master_is_checked_and_scraped_and_the_routes_go_after_every_master_dropped_the_topic(cluster,
                                                                                                monkeypatch):
    cluster["info"] = TWO_MASTERS
    per_broker = {"10.0.0.5:10911": dict(SETTINGS), "10.0.0.7:10911": {**SETTINGS, "metricsPromExporterPort": "5558"}}
    monkeypatch.setattr(remoting, "broker_settings", lambda b: dict(per_broker[b]))
    backend = external.ExternalBackend([_staging()], "grpc", "r", log=lambda _m: None)
    backend.preflight(load_scenario("two-masters"))
    [ep] = backend.endpoints()
    assert [n.metrics for n in ep.nodes] == ["http://10.0.0.5:5557/metrics", "http://10.0.0.7:5558/metrics"]
    tag = ep.suffix
    cluster["topics"] = {f"T{tag}"}
    backend.down()
    assert [x[0] for x in cluster["deleted"]] == ["topic", "topic", "route"]  # both masters first, the route once
    # The second master running another setting than the scenario needs is refused, naming it.
    per_broker["10.0.0.7:10911"]["enableRetryTopicV2"] = "true"
    with pytest.raises(ConfigError, match="broker broker-b 10.0.0.7:10911 runs enableRetryTopicV2=true"):
        external.ExternalBackend([_staging()], "grpc", "r", log=lambda _m: None).preflight(
            load_scenario("two-masters"))
