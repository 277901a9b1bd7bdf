"""The files and command lines of one local variant, in the scenario's topology: a name server, the brokers
(inside the proxy's JVM when the proxy runs in local mode, each a JVM of its own in cluster mode), the proxy.

Pure functions of (variant, ports, directories, topology), so they can be checked without starting anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.paths import REPO_ROOT
from harness.core.process import owner_flag
from harness.deploy.agents import ARM_FILE, LOOPBACK_JAR
from harness.deploy.local.distribution import MAIN_CLASSES, Distribution
from harness.deploy.local.ports import NodePorts, VariantPorts
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Scalar, Variant

LOOPBACK = "127.0.0.1"
CLUSTER = "rmq-harness"


@dataclass(frozen=True)
class Placement:
    """Where a variant's processes listen and what address they give clients: ``bind`` None leaves the address
    to the servers (they listen on every interface and name the host's own address in routes: a pod's IP)."""

    bind: str | None
    metrics_host: str


# This machine: everything on loopback. A pod (harness.deploy.k8s.pod): every interface, routes naming the pod's IP.
ON_LOOPBACK = Placement(LOOPBACK, LOOPBACK)
IN_POD = Placement(None, "0.0.0.0")

# What every local broker gets unless the variant overrides it. Sizes are shrunk from the 1 GiB
# commit log and 5M-entry index defaults so three variants fit on a 2-core, 24 GiB machine.
BROKER_DEFAULTS: dict[str, Scalar] = {
    # V1 retry topic names are upstream's default and what the wakeup bug is about; written out so
    # every archived config says which one ran.
    "enableRetryTopicV2": False,
    # Pop is refused without the timer wheel.
    "timerWheelEnable": True,
    # The lag gauges would otherwise force-wake every suspended pop request on each metrics scrape
    # (ConsumerLagCalculator), capping the retry stall at the scrape interval and hiding the bug.
    # A variant sets it true to measure how much scraping masks.
    "enableNotifyBeforePopCalculateLag": False,
    "metricsExporterType": "PROM",
    # Topics are created by the harness; a mistyped topic should fail, not appear.
    "autoCreateTopicEnable": False,
    "autoCreateSubscriptionGroup": True,
    "mappedFileSizeCommitLog": 128 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 30_000 * 20,
    "maxHashSlotNum": 100_000,
    "maxIndexNum": 400_000,
    "flushDiskType": "ASYNC_FLUSH",
}

# The name server compiles with C1 only: nothing it does in a run is hot (routes asked for every 30 s, a broker's
# heartbeat), no pop passes through it, and C2 costs a third of its start: 2.8-3.0 CPU-seconds a start against
# 1.4-2.2 (2026-12-07, 2 cores), of some 40 name servers a `make test` starts. The brokers and proxies, whose code is
# what a run measures, compile as upstream's scripts start them.
NAMESRV_JVM = ["-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=128m", "-XX:TieredStopAtLevel=1"]
BROKER_JVM = ["-Xms512m", "-Xmx1g", "-XX:MaxDirectMemorySize=512m"]
PROXY_JVM = ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m"]
COMMON_JVM = [
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    # No hsperfdata files in /tmp, no 4-8 GB pre-touched heaps as the upstream scripts do.
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
]


# A plain logback config for releases that bundle none: everything at INFO into one file per role, where the
# harness collects server logs from (VariantDirs.server_logs).
OWN_LOGBACK = """<configuration>
  <appender name="File" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/rocketmqlogs/{role}.log</file>
    <encoder><pattern>%d{{yyy-MM-dd HH:mm:ss,SSS}} %-5level [%thread] %logger{{32}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="File"/></root>
</configuration>
"""


@dataclass(frozen=True)
class VariantDirs:
    """Where one variant's processes keep their files (under a run or state directory): each process its own
    user.home (store, logs) under ``root/<process>``."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def plants_armed(self) -> Path:
        """The pop-fault agent's arm file (harness.deploy.agents.ARM_FILE): made when the variant's load starts."""
        return self.root / "plants-armed"

    @property
    def rocketmq_home(self) -> Path:
        # The servers refuse to start unless rocketmq.home.dir exists; nothing is read from it.
        return self.root / "rocketmq-home"

    def home(self, process: str) -> Path:
        return self.root / process

    @property
    def namesrv_home(self) -> Path:
        return self.home("namesrv")

    @property
    def proxy_home(self) -> Path:
        return self.home("proxy")

    def store(self, process: str) -> Path:
        return self.home(process) / "store"

    def stdout(self, process: str) -> Path:
        return self.root / f"{process}.out"

    def server_logs(self, process: str) -> Path:
        return logs_of(self.home(process))

    def config_file(self, process: str) -> Path:
        """The file a process is started with: namesrv.conf, rmq-proxy.json, <broker node>.conf."""
        return self.conf / {"namesrv": "namesrv.conf", "proxy": "rmq-proxy.json"}.get(process, f"{process}.conf")

    def create(self, processes: Sequence[str]) -> None:
        # The server logs' directory before the JVM starts: its GC log goes there (_jvm), and -Xlog refuses to start
        # a JVM whose log file cannot be opened.
        for d in (self.conf, self.rocketmq_home, *(self.server_logs(p) for p in processes)):
            d.mkdir(parents=True, exist_ok=True)
        # 5.0.0's servers read ${rocketmq.home.dir}/conf/logback_<role>.xml and exit without it (its jars bundle
        # none; later releases bundle rmq.<role>.logback.xml, which _jvm points them at instead).
        (self.rocketmq_home / "conf").mkdir(exist_ok=True)
        for role in ("namesrv", "broker", "proxy"):
            (self.rocketmq_home / "conf" / f"logback_{role}.xml").write_text(OWN_LOGBACK.format(role=role))


def broker_name(variant: Variant) -> str:
    return f"broker-{variant.name}"


@dataclass(frozen=True)
class Node:
    """One broker of a variant's topology: ``name`` is what a fault targets (broker, broker-b, slave)."""

    name: str
    broker_name: str
    broker_id: int  # 0: a master; the slave of a master shares its brokerName with id 1
    ports: NodePorts

    @property
    def master(self) -> bool:
        return self.broker_id == 0


def node_names(topology: Topology) -> list[str]:
    """The brokers of ``topology``: the first master, its slave, the second master."""
    return ["broker", *(["slave"] if topology.slave else []), *(["broker-b"] if topology.masters > 1 else [])]


def nodes(variant: Variant, topology: Topology, ports: VariantPorts) -> list[Node]:
    first = broker_name(variant)
    names = {"broker": (first, 0), "slave": (first, 1), "broker-b": (f"{first}-b", 0)}
    return [Node(n, *names[n], ports.node(n)) for n in node_names(topology)]


def processes(topology: Topology) -> tuple[str, ...]:
    """The variant's processes in start order (stop order is the reverse): with the proxy in local mode the
    first broker runs inside the proxy's JVM."""
    return ("namesrv", "proxy") if topology.proxy == "local" else ("namesrv", *node_names(topology), "proxy")


def host_process(target: str, topology: Topology) -> str:
    """The process a fault on ``target`` (a scenario's fault target) hits."""
    return "proxy" if target == "broker" and topology.proxy == "local" else target


def namesrv_properties(ports: VariantPorts, topology: Topology = SINGLE,
                       placement: Placement = ON_LOOPBACK) -> dict[str, Scalar]:
    props: dict[str, Scalar] = {"listenPort": ports.namesrv}
    if placement.bind:
        props["bindAddress"] = placement.bind
    if topology.slave:
        # Routes name the slave in its master's place while the master is down (RIP-32).
        props["supportActingMaster"] = True
    return props


def broker_properties(variant: Variant, ports: VariantPorts, dirs: VariantDirs, topology: Topology = SINGLE,
                      node: Node | None = None, placement: Placement = ON_LOOPBACK) -> dict[str, Scalar]:
    node = node or nodes(variant, topology, ports)[0]
    shape, owned = broker_shape(variant, topology, node), broker_owned(variant, ports, dirs, topology, node, placement)
    return {**BROKER_DEFAULTS, **shape, **variant.broker, **owned}


def broker_shape(variant: Variant, topology: Topology, node: Node) -> dict[str, Scalar]:
    """What the topology sets on a broker that a variant may still change (e.g. SYNC_MASTER)."""
    shape: dict[str, Scalar] = {}
    if topology.slave:
        # RIP-32: while the master is down its slave serves pops and acks, and writes what it cannot store
        # itself (checkpoints, revived retries) to another master ("escape"). totalReplicas keeps a master that
        # comes back isolated until it has caught up with its slave; the heartbeats let the name server notice
        # a dead master within seconds. A variant may still choose SYNC_MASTER.
        shape = {"enableSlaveActingMaster": True, "enableRemoteEscape": True, "brokerRole": "ASYNC_MASTER",
                 "totalReplicas": 2 if node.broker_name == broker_name(variant) else 1,
                 "brokerHeartbeatInterval": 1000, "brokerNotActiveTimeoutMillis": 5000,
                 "sendHeartbeatTimeoutMillis": 1000}
    return shape


def broker_owned(variant: Variant, ports: VariantPorts, dirs: VariantDirs, topology: Topology, node: Node,
                 placement: Placement = ON_LOOPBACK) -> dict[str, Scalar]:
    """What the harness sets on a broker and no variant may (HARNESS_BROKER_KEYS, and a slave's role)."""
    process = host_process(node.name, topology)
    owned: dict[str, Scalar] = {
        "brokerClusterName": CLUSTER,
        "brokerName": node.broker_name,
        "brokerId": node.broker_id,
        "listenPort": node.ports.listen,
        "haListenPort": node.ports.ha,
    }
    if placement.bind:
        owned.update({
            "bindAddress": placement.bind,
            "brokerIP1": placement.bind,
            # The HA address a slave is told to connect to (the machine's own address otherwise).
            "brokerIP2": placement.bind,
        })
    owned.update({
        # The name server always runs beside the brokers (the same machine, the same pod).
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
        "storePathRootDir": str(dirs.store(process)),
        "storePathCommitLog": str(dirs.store(process) / "commitlog"),
        "metricsPromExporterHost": placement.metrics_host,
        "metricsPromExporterPort": node.ports.metrics,
    })
    if not node.master:
        owned["brokerRole"] = "SLAVE"
    return owned


def proxy_settings(variant: Variant, ports: VariantPorts, topology: Topology = SINGLE,
                   placement: Placement = ON_LOOPBACK) -> dict[str, Scalar]:
    return {**variant.proxy, **proxy_owned(ports, topology, placement)}


def proxy_owned(ports: VariantPorts, topology: Topology = SINGLE,
                placement: Placement = ON_LOOPBACK) -> dict[str, Scalar]:
    owned: dict[str, Scalar] = {
        "rocketMQClusterName": CLUSTER,
        "proxyMode": topology.proxy,
        "grpcServerPort": ports.grpc,
        "remotingListenPort": ports.proxy_remoting,
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
    }
    if topology.proxy == "cluster" and placement.bind:
        # The address it gives remoting clients for itself (the machine's own otherwise).
        owned["localServeAddr"] = placement.bind
    return owned


def jvm_sizes(process: str, topology: Topology = SINGLE) -> list[str]:
    """Heap and direct memory of a process's JVM: a broker's wherever a broker runs (the proxy in local mode
    holds the first one)."""
    if process == "namesrv":
        return NAMESRV_JVM
    if process == "proxy" and topology.proxy == "cluster":
        return PROXY_JVM
    return BROKER_JVM


def render_properties(props: Mapping[str, Scalar]) -> str:
    def fmt(v: Scalar) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return "".join(f"{k}={fmt(v)}\n" for k, v in props.items())


def write_configs(variant: Variant, ports: VariantPorts, dirs: VariantDirs,
                  topology: Topology = SINGLE) -> dict[str, Path]:
    """Every process's file, by process; the first broker's is ``broker`` whichever process runs it."""
    dirs.create(processes(topology))
    files = {"namesrv": dirs.config_file("namesrv"), "proxy": dirs.config_file("proxy")}
    files["namesrv"].write_text(render_properties(namesrv_properties(ports, topology)))
    for node in nodes(variant, topology, ports):
        files[node.name] = dirs.config_file(node.name)
        files[node.name].write_text(render_properties(broker_properties(variant, ports, dirs, topology, node)))
    files["proxy"].write_text(json.dumps(proxy_settings(variant, ports, topology), indent=2) + "\n")
    return files


def logs_of(home: Path) -> Path:
    """Where a server whose user.home is ``home`` writes its logs (the logback configs' ${user.home}/logs/...)."""
    return home / "logs" / "rocketmqlogs"


def gc_log(logs: Path, role: str) -> str:
    """The JVM's own GC log (one line per collection, the heap before and after it) beside its server logs, so the
    archive holds it and a scenario can read a memory defect off it (harness.inputs.observations: ``how: growth``).
    ``role``: broker for every JVM that hosts a broker; the PID keeps a JVM started again after a fault apart."""
    return f"-Xlog:gc:file={logs}/gc-{role}-%p.log"


def _jvm(java: str, dist: Distribution, home: Path, dirs: VariantDirs, token: str, sizes: Sequence[str],
         logback: str, hosts: str = "") -> list[str]:
    """``logback``: whose bundled logback config the JVM takes (namesrv, proxy, broker); ``hosts``: what its GC log
    is named for, when not that (a local-mode proxy hosts a broker)."""
    argv = [java, *COMMON_JVM, *sizes]
    argv += [
        f"-Drocketmq.home.dir={dirs.rocketmq_home}",
        f"-Duser.home={home}",
        f"-XX:ErrorFile={home}/hs_err_%p.log",
        gc_log(logs_of(home), hosts or logback),
        owner_flag(token),
    ]
    if logback in dist.logback:
        argv.append(f"-Drmq.logback.configurationFile={dist.logback[logback]}")
    return argv


def agent_options(options: str, ports: VariantPorts | NodePorts, dirs: VariantDirs | None = None) -> str:
    """Agent argument strings may name the broker's ports, {probe_port} and {metrics_port}, and the variant's
    arm file, {arm_file} (harness.deploy.agents.ARM_FILE)."""
    node = ports if isinstance(ports, NodePorts) else ports.node("broker")
    out = options.replace("{probe_port}", str(node.probe)).replace("{metrics_port}", str(node.metrics))
    return out if dirs is None else out.replace(ARM_FILE, str(dirs.plants_armed))


def _broker_agents(variant: Variant, node: NodePorts, dirs: VariantDirs) -> list[str]:
    """The loopback-bind agent first, then the variant's agents and JVM options (every broker JVM)."""
    agents = [f"-javaagent:{a.path()}" + (f"={agent_options(a.options, node, dirs)}" if a.options else "")
              for a in variant.agents]
    return [f"-javaagent:{REPO_ROOT / LOOPBACK_JAR}", *agents, *variant.jvm_options]


def namesrv_command(java: str, dist: Distribution, dirs: VariantDirs, conf: Path, token: str) -> list[str]:
    return [
        *_jvm(java, dist, dirs.namesrv_home, dirs, token, NAMESRV_JVM, "namesrv"),
        "-cp", dist.classpath(), MAIN_CLASSES["namesrv"], "-c", str(conf),
    ]


def proxy_command(
    java: str,
    dist: Distribution,
    variant: Variant,
    ports: VariantPorts,
    dirs: VariantDirs,
    files: Mapping[str, Path],
    token: str,
    topology: Topology = SINGLE,
) -> list[str]:
    if topology.proxy == "local":
        # The broker runs inside: its heap, its agents and its broker.conf.
        jvm = [*_jvm(java, dist, dirs.proxy_home, dirs, token, jvm_sizes("proxy", topology), "proxy", "broker"),
               *_broker_agents(variant, ports.node("broker"), dirs)]
        brokers = ["-bc", str(files["broker"])]
    else:
        jvm = [*_jvm(java, dist, dirs.proxy_home, dirs, token, jvm_sizes("proxy", topology), "proxy"),
               f"-javaagent:{REPO_ROOT / LOOPBACK_JAR}"]
        brokers = []
    return [
        *jvm,
        "-cp", dist.classpath(), MAIN_CLASSES["proxy"],
        "-pm", topology.proxy,
        *brokers,
        "-pc", str(files["proxy"]),
        "-n", f"{LOOPBACK}:{ports.namesrv}",
    ]


def broker_command(java: str, dist: Distribution, variant: Variant, ports: VariantPorts, dirs: VariantDirs,
                   node: Node, conf: Path, token: str) -> list[str]:
    """A broker JVM of its own (the proxy in cluster mode)."""
    return [
        *_jvm(java, dist, dirs.home(node.name), dirs, token, BROKER_JVM, "broker"),
        *_broker_agents(variant, node.ports, dirs),
        "-cp", dist.classpath(), MAIN_CLASSES["broker"],
        "-c", str(conf),
        "-n", f"{LOOPBACK}:{ports.namesrv}",
    ]


def commands(java: str, dist: Distribution, variant: Variant, ports: VariantPorts, dirs: VariantDirs,
             files: Mapping[str, Path], token: str, topology: Topology = SINGLE) -> dict[str, list[str]]:
    """Every process's command line, by process, in start order."""
    out = {"namesrv": namesrv_command(java, dist, dirs, files["namesrv"], token)}
    if topology.proxy == "cluster":
        for node in nodes(variant, topology, ports):
            out[node.name] = broker_command(java, dist, variant, ports, dirs, node, files[node.name], token)
    out["proxy"] = proxy_command(java, dist, variant, ports, dirs, files, token, topology)
    return out
