"""A variant's pod in each topology (harness/deploy/k8s/pod.py): the local backend's processes, settings and
sizes, laid out so that Kubernetes accepts them and a fault can tell each JVM from the others."""

from __future__ import annotations

import pytest

from harness.deploy.k8s import naming, pod
from harness.deploy.local import config
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Variant

V = Variant(name="patched", version="5.3.3")


@pytest.mark.parametrize("topology", pod.TOPOLOGIES, ids=pod.key)
def test_a_container_per_process_of_the_local_backend_each_told_apart_by_its_file(topology: Topology):
    cs = pod.containers(topology)
    assert [c.process for c in cs] == list(config.processes(topology))
    # Every fault target has a container, and no JVM's marker is part of another's command line.
    assert {pod.container_of(t, topology).name for t in topology.targets} == {c.name for c in cs}
    for c in cs:
        others = " ".join(" ".join(o.args) for o in cs if o is not c)
        assert c.marker in " ".join(c.args) and f"{c.marker} " not in f"{others} "
        assert c.jvm == config.jvm_sizes(c.process, topology)
    # Ports: distinct in the pod, names Kubernetes accepts (at most 15 characters), the readiness port among them.
    ports = [(n, p) for c in cs for n, p in c.ports.items()]
    assert len({p for _, p in ports}) == len(ports) and len({n for n, _ in ports}) == len(ports)
    assert all(len(n) <= 15 for n, _ in ports)
    assert all(c.ready_port in c.ports for c in cs)
    # The brokers' fast-remoting (listen - 2) and HA (listen + 1) ports collide with nothing either.
    extra = [p for n in config.node_names(topology) for p in (pod.PORTS.node(n).listen - 2, pod.PORTS.node(n).ha)]
    assert not set(extra) & {p for _, p in ports}


def test_single_keeps_the_charts_names_ports_and_the_broker_inside_the_proxys_jvm():
    namesrv, broker = pod.containers(SINGLE)
    assert pod.key(SINGLE) == naming.SINGLE and naming.variant_name("f", "v", pod.key(SINGLE)) == "f-v"
    assert broker.name == naming.BROKER_CONTAINER and broker.process == "proxy" and broker.brokers == ["broker"]
    assert {k: broker.ports[k] for k in ("grpc", "broker", "metrics", "probe")} == {
        "grpc": naming.PORTS["grpc"], "broker": naming.PORTS["broker"], "metrics": naming.PORTS["metrics"],
        "probe": naming.PORTS["probe"]}
    assert broker.args[:4] == ["-pm", "local", "-bc", "/etc/rocketmq/broker.conf"]
    # The JVM that holds the broker gets a broker's heap and direct memory (the local backend's).
    assert broker.jvm == config.BROKER_JVM and not broker.waits_for and not namesrv.agents


def test_a_cluster_mode_proxy_waits_for_every_brokers_port():
    t = Topology(proxy="cluster", masters=2, slave=True)
    proxy = pod.containers(t)[-1]
    assert proxy.process == "proxy" and proxy.jvm == config.PROXY_JVM
    assert proxy.waits_for == [f"/data/{b}/logs/rocketmqlogs/broker.log" for b in ("broker", "slave", "broker-b")]
    assert not proxy.agents and not proxy.after_ports
    # Every broker's JVM starts once the name server listens (its registration at start then finds it).
    assert all(c.after_ports == [9876] for c in pod.containers(t) if c.brokers)


def test_the_brokers_files_are_the_local_settings_listening_everywhere_and_named_by_the_pod():
    t = Topology(proxy="cluster", masters=2, slave=True)
    files = pod.files(V, t)
    assert set(files) == {"namesrv.conf", "rmq-proxy.json", "broker.conf", "slave.conf", "broker-b.conf"}
    slave = files["slave.conf"]
    assert slave["owned"]["brokerRole"] == "SLAVE" and slave["owned"]["brokerId"] == 1
    assert slave["owned"]["brokerName"] == "broker-patched" and slave["shape"]["enableSlaveActingMaster"] is True
    assert files["broker-b.conf"]["owned"]["listenPort"] == 10931
    for f in files.values():
        assert not {"bindAddress", "brokerIP1", "brokerIP2", "localServeAddr"} & set(f["owned"])
    assert files["namesrv.conf"]["owned"] == {"listenPort": 9876, "supportActingMaster": True}
    # The local backend's own files still bind loopback.
    local = config.broker_properties(V, pod.PORTS, config.VariantDirs(pod.DATA), t)
    assert local["bindAddress"] == local["brokerIP1"] == config.LOOPBACK


def test_the_layout_names_the_variant_by_a_placeholder_the_chart_replaces():
    layout = pod.layout()
    assert list(layout) == [pod.key(t) for t in pod.TOPOLOGIES]
    assert layout["2m"]["files"]["broker-b.conf"]["owned"]["brokerName"] == "broker-VARIANT-b"
