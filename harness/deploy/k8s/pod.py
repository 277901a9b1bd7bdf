"""A variant's pod in each topology, from the local backend's own definition (harness.deploy.local.config): one
container per process (name server, brokers, a proxy of its own in cluster mode; in local mode the first broker
runs inside the proxy's JVM, in the container named ``broker``), the same broker settings per node, the same
ports per node (RocketMQ's defaults for the first broker, the local slot's pattern for the others: broker-b
listens on 10931, the slave on 10921), the same JVM sizes.

The chart renders its StatefulSets from charts/rocketmq-pop-harness/files/topologies.json, which
`python -m harness.deploy.k8s.pod` prints; a chart test keeps the committed file equal to it, so the templates
type no broker setting, port or heap size of their own. The k8s backend reads the same layout to know a pod's
containers (faults), its brokers (endpoints) and its configuration files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.deploy.local import config
from harness.deploy.local.distribution import MAIN_CLASSES
from harness.deploy.local.ports import VariantPorts
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Variant

# RocketMQ's default ports (naming.PORTS): the first broker's; the other nodes' follow ports.NODE_OFFSETS.
PORTS = VariantPorts(slot=0, namesrv=9876, broker=10911, proxy_remoting=8080, grpc=8081, metrics=5557, probe=5558)
DATA = Path("/data")  # the pod's emptyDir: each process's user.home (store, logs) under /data/<process>
CONF_DIR = Path("/etc/rocketmq")  # the variant's ConfigMap for this topology
# A variant named so in the layout; the chart puts the real name in its place.
VARIANT_PLACEHOLDER = "VARIANT"
# A broker node's port names (a port name has at most 15 characters): the first broker's are the chart's
# (broker, metrics, probe), the others' carry a prefix.
PORT_PREFIX = {"broker": "", "broker-b": "b-", "slave": "slave-"}
# Every topology a scenario can ask for (harness.inputs.brokers.Topology), single first.
TOPOLOGIES = (SINGLE, Topology(proxy="cluster"), Topology(proxy="cluster", masters=2),
              Topology(proxy="cluster", slave=True), Topology(proxy="cluster", masters=2, slave=True))


def key(topology: Topology) -> str:
    """The topology's name in object names and labels, short enough for a StatefulSet's (52 characters with the
    release's and the variant's): single, cluster (a broker and a proxy of its own), 2m (two masters), slave
    (a slave acting master), 2m-slave; the last three run their proxy in cluster mode too."""
    if topology == SINGLE:
        return "single"
    parts = [*(["2m"] if topology.masters > 1 else []), *(["slave"] if topology.slave else [])]
    return "-".join(parts) or "cluster"


@dataclass(frozen=True)
class Container:
    """One process of a variant's pod: its container, the file it is started with (which also tells its JVM from
    the others in the pod's shared process table: no file name is part of another's), its ports by name."""

    name: str  # the container; also the fault target it hosts (the combined JVM of single: broker)
    process: str  # harness.deploy.local.config's process name (namesrv, broker, broker-b, slave, proxy)
    config_file: str
    main_class: str
    args: list[str]
    jvm: list[str]
    ports: dict[str, int]
    ready_port: str  # the named port the container is ready on
    brokers: list[str]  # the broker nodes it runs
    agents: bool  # a broker JVM: the variant's agents (and the probe) are mounted
    # Before its JVM starts: these log files (of the pod's emptyDir) say their broker registered with the name server
    # (a first boot does on its 10 s timer, after "boot success"). Nothing to wait for: empty.
    waits_for: list[str]
    # Ports of the pod that listen before its JVM starts: a broker's name server, as the local backend starts them in
    # order (a broker whose registration at start finds no name server registers only 10 s later, on its timer).
    after_ports: list[int]

    @property
    def marker(self) -> str:
        return str(CONF_DIR / self.config_file)


def containers(topology: Topology) -> list[Container]:
    dirs = config.VariantDirs(DATA)
    names = config.node_names(topology)
    out = []
    for process in config.processes(topology):
        conf = dirs.config_file(process).name
        combined = process == "proxy" and topology.proxy == "local"  # the first broker inside the proxy's JVM
        brokers = [process] if process in names else (["broker"] if combined else [])
        name = "broker" if combined else process
        ports: dict[str, int] = {}
        if process == "namesrv":
            ports["namesrv"] = PORTS.namesrv
            args = ["-c", str(CONF_DIR / conf)]
        if process == "proxy":
            ports.update({"grpc": PORTS.grpc, "proxy-remoting": PORTS.proxy_remoting})
            args = (["-pm", topology.proxy]
                    + (["-bc", str(CONF_DIR / dirs.config_file("broker").name)] if topology.proxy == "local" else [])
                    + ["-pc", str(CONF_DIR / conf), "-n", f"{config.LOOPBACK}:{PORTS.namesrv}"])
        elif process != "namesrv":
            args = ["-c", str(CONF_DIR / conf), "-n", f"{config.LOOPBACK}:{PORTS.namesrv}"]
        for b in brokers:
            n = PORTS.node(b)
            p = PORT_PREFIX[b]
            ports.update({f"{p}broker": n.listen, f"{p}metrics": n.metrics, f"{p}probe": n.probe})
        ready = {"proxy": "grpc", "namesrv": "namesrv"}.get(process, f"{PORT_PREFIX.get(process, '')}broker")
        main = MAIN_CLASSES["proxy" if process == "proxy" else "namesrv" if process == "namesrv" else "broker"]
        # A cluster-mode proxy creates its system topics on the brokers at start and exits when none is registered
        # ("create system broadcast topic DefaultHeartBeatSyncerTopic failed": the local backend starts it once they
        # are, startup.spawn_when_ready): it waits until every broker logged its registration with the name server
        # (it listens, connects to the name server and logs its boot seconds before it registers; each restart of the
        # proxy by the kubelet would cost 10 s more).
        waits = [str(dirs.server_logs(b) / "broker.log") for b in names] \
            if process == "proxy" and topology.proxy == "cluster" else []
        out.append(Container(name, process, conf, main, args, config.jvm_sizes(process, topology), ports, ready,
                             brokers, bool(brokers), waits, [PORTS.namesrv] if brokers else []))
    return out


def container_of(target: str, topology: Topology) -> Container:
    """The container hosting a fault's target (harness.inputs.brokers.Topology.targets)."""
    process = config.host_process(target, topology)
    for c in containers(topology):
        if c.process == process:
            return c
    raise KeyError(target)


def files(variant: Variant, topology: Topology) -> dict[str, dict]:
    """Every configuration file of the variant's pod by file name, split as the chart merges it: ``owned`` (the
    harness's), ``shape`` (the topology's, a variant may override it) for a broker; the proxy's and the name
    server's owned settings."""
    dirs = config.VariantDirs(DATA)
    out: dict[str, dict] = {
        dirs.config_file("namesrv").name: {"owned": config.namesrv_properties(PORTS, topology, config.IN_POD)},
        dirs.config_file("proxy").name: {"owned": config.proxy_owned(PORTS, topology, config.IN_POD)},
    }
    for node in config.nodes(variant, topology, PORTS):
        out[dirs.config_file(node.name).name] = {
            "owned": config.broker_owned(variant, PORTS, dirs, topology, node, config.IN_POD),
            "shape": config.broker_shape(variant, topology, node),
        }
    return out


def layout() -> dict[str, dict]:
    """What the chart renders a variant's pod from, by topology key (the variant's name as VARIANT_PLACEHOLDER)."""
    v = Variant(name=VARIANT_PLACEHOLDER.lower(), version="0.0.0")
    out = {}
    for t in TOPOLOGIES:
        text = json.dumps({"topology": t.model_dump(), "containers": [c.__dict__ for c in containers(t)],
                           "files": files(v, t)})
        out[key(t)] = json.loads(text.replace(config.broker_name(v), f"broker-{VARIANT_PLACEHOLDER}"))
    return out


def render() -> str:
    return json.dumps(layout(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
