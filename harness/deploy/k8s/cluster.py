"""The k8s backend: variants are the Helm release's StatefulSets, one per variant and topology (a pod whose
containers are the topology's processes: harness.deploy.k8s.pod), driven through the Kubernetes API.

The chart deploys every variant it lists in every topology it lists; ``up`` gives a run fresh brokers in the
scenario's topology (that StatefulSet's pod is recreated, so its emptyDir store starts empty, as a local run's
does; the variant's other topologies are scaled to zero) with the run's broker settings, and waits for
readiness; ``down`` scales the variants to zero, keeping their logs for ``collect``.
"""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.client import remoting
from harness.contracts.endpoints import Endpoints
from harness.contracts.modules import ModuleJar
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Deadline, Pending, wait_until
from harness.deploy import readiness
from harness.deploy.base import ServerProcess, parse_properties
from harness.deploy.k8s import naming, pod, transfer
from harness.deploy.k8s.faults import PodProcess
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Variant

CONFIG_KEY = "broker.conf"
BASE_CONFIG_KEY = "broker-base.conf"  # as the chart rendered it; broker.conf = base + the run's overrides


def in_cluster() -> bool:
    """True inside a pod (the service account's token is mounted and the API's address is in the env)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    ).is_file()


def load_api_client() -> object:
    """An ApiClient for the cluster this process runs in, or else the current kubeconfig context."""
    from kubernetes import client, config

    try:
        if in_cluster():
            config.load_incluster_config()
        else:
            # KUBECONFIG as it is now: the client library reads it once, when it is first imported.
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    except config.ConfigException as e:
        raise HarnessError(
            f"no Kubernetes cluster to talk to ({e}); create one with `make kind-up` or set KUBECONFIG"
        ) from None
    return client.ApiClient()


def merged_broker_conf(base: str, overrides: Mapping[str, object]) -> str:
    """broker.conf text: the chart's settings with the run's overrides on top (Java booleans lower-case)."""
    conf = parse_properties(base)
    for k, v in overrides.items():
        conf[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return "".join(f"{k}={v}\n" for k, v in sorted(conf.items()))


def topology_of(key: str) -> Topology:
    """The topology a StatefulSet's label names (harness.deploy.k8s.pod.key)."""
    for t in pod.TOPOLOGIES:
        if pod.key(t) == key:
            return t
    raise HarnessError(f"unknown topology {key!r} (the chart's: {', '.join(pod.key(t) for t in pod.TOPOLOGIES)})")


def config_keys(data: Mapping[str, str]) -> dict[str, str]:
    """A topology ConfigMap's broker files: <node>.conf by its <node>-base.conf."""
    return {k: k.removesuffix("-base.conf") + ".conf" for k in sorted(data) if k.endswith("-base.conf")}


def broker_container(sts: object) -> object:
    return next(c for c in sts.spec.template.spec.containers if c.name == naming.BROKER_CONTAINER)


def image_tag(image: str) -> str:
    return image.rsplit(":", 1)[-1]


def agent_option(jvm_options: str, jar: str) -> bool:
    return any(part.startswith("-javaagent:") and jar in part for part in jvm_options.split())


def jvm_options(broker: object) -> str:
    """The broker's JVM options in either image flavor: the java command line (harness) or JAVA_OPT_EXT
    (apache, read by the image's start script)."""
    env = {e.name: e.value or "" for e in broker.env or []}
    return " ".join([*(broker.command or []), env.get("JAVA_OPT_EXT", "")])


class K8sBackend:
    def __init__(
        self,
        full: str,
        namespace: str,
        api_client: object | None = None,
        ready_timeout_s: float = 600.0,
        round_trip: bool = True,
        log: Callable[[str], None] = print,
    ) -> None:
        from kubernetes import client

        self.full = full
        self.namespace = namespace
        self.api = api_client or load_api_client()
        self.apps = client.AppsV1Api(self.api)
        self.core = client.CoreV1Api(self.api)
        self.ready_timeout_s = ready_timeout_s
        # Service DNS names resolve inside the cluster only; a stand-in API in tests has no brokers to try.
        self.round_trip = round_trip
        self.log = log
        self._logs: dict[str, dict[str, str]] = {}  # variant -> container -> log text, kept at `down`
        self._server_logs: dict[str, dict[str, bytes]] = {}  # variant -> process -> tar.gz of its rocketmqlogs/
        self._configs: dict[str, str] = {}  # variant -> the first broker's broker.conf
        self._node_configs: dict[str, dict[str, str]] = {}  # variant -> every broker's <node>.conf
        self._agents: dict[str, dict[str, list[str]]] = {}
        self._started: list[str] = []  # what `down` with no names stops: this backend's variants only
        self._variants: dict[str, Variant] = {}
        self._topology: dict[str, Topology] = {}  # variant -> the topology it was brought up in

    # --- the Backend interface -------------------------------------------------------------

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        for v in variants:
            self._topology[v.name] = topology
        sets = {v.name: self._statefulset(v) for v in variants}
        for v in variants:
            self._configure(v)
        old = {v.name: self._pod_uids(v.name) for v in variants}
        for v in variants:
            self._restart(v.name, sets[v.name])
            self._started.append(v.name)
            self._variants[v.name] = v
        eps = []
        for v in variants:
            started = time.monotonic()
            self._wait_pod_ready(v.name, exclude=old[v.name])
            ep = self._endpoints(sets[v.name])
            if self.round_trip:
                self._wait_serving(ep)
                self._check_agents(v)
            self.log(f"{v.name}: ready in {time.monotonic() - started:.1f} s ({ep.grpc})")
            eps.append(ep)
        return eps

    def endpoints(self) -> list[Endpoints]:
        selector = f"{naming.COMPONENT}={naming.ROCKETMQ}"
        sets = self.apps.list_namespaced_stateful_set(self.namespace, label_selector=selector).items
        return [self._endpoints(s) for s in sets
                if s.metadata.name.startswith(f"{self.full}-") and (s.status.ready_replicas or 0) > 0]

    def _name(self, variant: str) -> str:
        return naming.variant_name(self.full, variant, pod.key(self._topology.get(variant, SINGLE)))

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        chosen = list(names) if names is not None else list(dict.fromkeys(self._started))
        for name in chosen:
            self._logs[name] = self._read_logs(name)
            self._server_logs[name] = self._read_server_logs(name)
            pods = self._pods(name)
            self.apps.patch_namespaced_stateful_set_scale(self._name(name), self.namespace, {"spec": {"replicas": 0}})
            # Their logs are read and their store is thrown away: no point in 30 s of graceful shutdown (a broker's
            # hooks take 15-20 s, the CPU the next run or comparison starts on), as the local backend cuts it short.
            for p in pods:
                self._delete_pod(p.metadata.name)
        return chosen

    def _delete_pod(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=1)
        except ApiException as e:
            if e.status != 404:  # gone already
                raise

    def collect(self, dest: Path) -> None:
        for name in sorted(set(self._logs) | set(self._configs)):
            target = dest / name
            target.mkdir(parents=True, exist_ok=True)
            for container, text in self._logs.get(name, {}).items():
                (target / f"{container}.out").write_text(text)
            for process, data in self._server_logs.get(name, {}).items():
                try:
                    transfer.unpack(data, target / process)
                except (OSError, tarfile.TarError) as e:
                    self.log(f"{name}: server logs of the {process} not unpacked: {e}")
            for key, text in self._node_configs.get(name, {}).items():
                (target / "conf").mkdir(exist_ok=True)
                (target / "conf" / key).write_text(text)

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return self._agents.get(name, {})

    def modules(self, name: str) -> list[ModuleJar]:
        return []  # the chart's images hold the jars; which modules they are is not read back from them yet

    def arm_plants(self, name: str) -> None:
        pass  # the chart mounts the agents with the options it was deployed with (no arm file: armed at start)

    def broker_config(self, name: str) -> dict[str, str]:
        return parse_properties(self._configs.get(name, ""))

    def process(self, name: str, target: str) -> ServerProcess:
        if name not in self._variants:
            raise HarnessError(f"variant {name} is not up")
        v = self._variants[name]

        topology = self._topology.get(name, SINGLE)
        hosted = pod.container_of(target, topology) if target in topology.targets else None

        def after_start() -> None:
            # Its container started again and is ready (its port listens): as the local backend after a fault
            # (launcher._wait_process), the brokers it runs registered with the name server once more, and their
            # agents installed. No send/pop round trip: that would test the proxy's path, which a remoting run
            # does not take, whichever process the fault hit.
            if hosted is None or not hosted.brokers or not self.round_trip:
                return
            ep = self._endpoints(self._statefulset(v))
            for node in hosted.brokers:
                listen = pod.PORTS.node(node).listen
                wait_until(f"{name}'s {node} to register with the name server {ep.namesrv}",
                           lambda listen=listen: True if self._registered(ep.namesrv, listen) else Pending(),
                           self.ready_timeout_s, interval_s=0.5)
            self._check_agents(v, hosted.name)

        def exec_(pod_name: str, container: str, argv: list[str]) -> tuple[int, str, str]:
            return transfer.exec_in(self.core, self.namespace, pod_name, container, argv,
                                    log=lambda m: self.log(f"{name}: {m}"))

        return PodProcess(name, target, exec_, lambda: self._pods(name), self.ready_timeout_s, after_start,
                          topology)

    @staticmethod
    def _registered(namesrv: str, listen: int) -> bool:
        try:
            return f":{listen}\"" in remoting.cluster_info(namesrv)
        except (remoting.RemotingError, OSError):
            return False

    # --- internals -------------------------------------------------------------------------

    def _statefulset(self, v: Variant) -> object:
        from kubernetes.client.exceptions import ApiException

        name = self._name(v.name)
        topology = self._topology.get(v.name, SINGLE)
        try:
            sts = self.apps.read_namespaced_stateful_set(name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                where = "add it to the chart's `variants`" if topology == SINGLE else \
                    f"add the variant to the chart's `variants` and {topology.model_dump()} to its `topologies`"
                raise ConfigError(
                    f"variant {v.name} in topology {pod.key(topology)} is not deployed (no StatefulSet {name} in "
                    f"namespace {self.namespace}); {where} and run `make deploy`"
                ) from None
            raise
        broker = broker_container(sts)
        if image_tag(broker.image) != v.version:
            raise ConfigError(
                f"variant {v.name}: deployed image {broker.image} is not version {v.version}; "
                "make the chart's variant and the run's variant agree and `make deploy`"
            )
        opts = jvm_options(broker)
        for agent in v.agents:
            jar = Path(agent.jar).name
            if not agent_option(opts, jar):
                raise ConfigError(
                    f"variant {v.name}: agent {jar} is not mounted in {name}; "
                    + ("deploy with probe.enabled=true" if "probe" in jar else "list it under the variant's agents")
                    + " and `make deploy`"
                )
        return sts

    def _configure(self, v: Variant) -> None:
        """Write the run's broker settings into every broker's file of the variant's ConfigMap (the chart's
        <node>-base.conf with the run's overrides on top); the recreated pod reads them."""
        if v.proxy:  # the chart writes the proxy's rmq-proxy.json once; a run cannot change it (yet)
            raise ConfigError(f"variant {v.name}: proxy settings ({', '.join(sorted(v.proxy))}) are not applied on "
                              "Kubernetes, where the chart fixes the proxy's configuration; run it locally")
        name = self._name(v.name)
        data = self.core.read_namespaced_config_map(name, self.namespace).data or {}
        texts = {conf: merged_broker_conf(data[base], v.broker) for base, conf in config_keys(data).items()}
        texts = texts or {CONFIG_KEY: merged_broker_conf(data.get(BASE_CONFIG_KEY, ""), v.broker)}
        self.core.patch_namespaced_config_map(name, self.namespace, {"data": texts})
        self._configs[v.name] = texts.get(CONFIG_KEY, "")
        self._node_configs[v.name] = texts

    def _pods(self, variant: str) -> list:
        key = pod.key(self._topology.get(variant, SINGLE))
        selector = f"{naming.COMPONENT}={naming.ROCKETMQ},{naming.VARIANT}={variant}"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        # A StatefulSet's pods are <name>-<ordinal>: the topology's own (single's name is every other's prefix).
        return [p for p in pods if p.metadata.name.rpartition("-")[0] == self._name(variant)
                and (p.metadata.labels or {}).get(naming.TOPOLOGY, naming.SINGLE) == key]

    def _pod_uids(self, variant: str) -> set[str]:
        return {p.metadata.uid for p in self._pods(variant)}

    def _restart(self, variant: str, sts: object) -> None:
        name = self._name(variant)
        # The variant's other topologies stop: one pod per variant at a time, as a local run has.
        selector = f"{naming.COMPONENT}={naming.ROCKETMQ},{naming.VARIANT}={variant}"
        for other in self.apps.list_namespaced_stateful_set(self.namespace, label_selector=selector).items:
            if other.metadata.name != name and other.metadata.name.startswith(f"{self.full}-") and other.spec.replicas:
                self.apps.patch_namespaced_stateful_set_scale(other.metadata.name, self.namespace,
                                                              {"spec": {"replicas": 0}})
        if not sts.spec.replicas:
            self.apps.patch_namespaced_stateful_set_scale(name, self.namespace, {"spec": {"replicas": 1}})
        # Its store is thrown away, and the image's sh (PID 1) ignores SIGTERM: no point waiting 30 s.
        for p in self._pods(variant):
            self.core.delete_namespaced_pod(p.metadata.name, self.namespace, grace_period_seconds=1)

    def _wait_pod_ready(self, variant: str, exclude: set[str]) -> None:
        def ready() -> bool | Pending:
            last = Pending("no pod yet")
            for p in self._pods(variant):
                if p.metadata.uid in exclude or p.metadata.deletion_timestamp:
                    continue
                conds = {c.type: c.status for c in p.status.conditions or []}
                if conds.get("Ready") == "True":
                    return True
                waiting = [f"{s.name}: {s.state.waiting.reason}" for s in p.status.container_statuses or []
                           if s.state and s.state.waiting]
                last = Pending(f"pod {p.metadata.name} {p.status.phase}"
                               + (f" ({'; '.join(waiting)})" if waiting else ""))
            return last

        wait_until(f"{variant}'s broker pod to be ready", ready, self.ready_timeout_s, interval_s=2.0)

    def _wait_serving(self, ep: Endpoints) -> None:
        readiness.wait_serving(ep, "grpc", Deadline(self.ready_timeout_s),
                               detail=lambda: self._broker_output(ep.variant, tail_lines=40))

    def _broker_output(self, variant: str, tail_lines: int | None = None,
                       container: str = naming.BROKER_CONTAINER) -> str:
        out = []
        for p in self._pods(variant):
            if p.metadata.deletion_timestamp:
                continue
            out.append(self.core.read_namespaced_pod_log(p.metadata.name, self.namespace,
                                                         container=container, tail_lines=tail_lines))
        return "".join(out)

    def _check_agents(self, v: Variant, only: str | None = None) -> None:
        """A patched variant that runs unpatched would measure the wrong build: refuse it. Every broker's
        container (or ``only`` that one); keyed by jar, and by node as the local backend's when there are several."""
        if not v.agents:
            return
        topology = self._topology.get(v.name, SINGLE)
        hosts = [c for c in pod.containers(topology) if c.brokers and only in (None, c.name)]
        several = len([c for c in pod.containers(topology) if c.brokers]) > 1
        jars = [a.jar for a in v.agents]
        report = dict(self._agents.get(v.name, {}))
        for c in hosts:
            output = self._broker_output(v.name, container=c.name)
            problems = readiness.agent_problems(output, jars)
            if problems:
                raise HarnessError(f"{v.name}: agents not active in {c.name}: {'; '.join(problems)}")
            report.update({(f"{c.brokers[0]}/{jar}" if several else jar): lines
                           for jar, lines in readiness.agent_report(output, jars).items()})
        self._agents[v.name] = report

    def _endpoints(self, sts: object) -> Endpoints:
        labels = sts.metadata.labels or {}
        key = labels.get(naming.TOPOLOGY, naming.SINGLE)
        nodes = tuple((n, ports.listen, ports.metrics, ports.probe)
                      for n in pod.config.node_names(topology_of(key)) for ports in [pod.PORTS.node(n)])
        return naming.endpoints(self.full, self.namespace, labels[naming.VARIANT],
                                image_tag(broker_container(sts).image), probe=labels.get(naming.PROBE) == "true",
                                topology=key, nodes=nodes)

    def _read_logs(self, variant: str) -> dict[str, str]:
        from kubernetes.client.exceptions import ApiException

        out = {}
        for p in self._pods(variant):
            for c in p.spec.containers:
                try:
                    # None for a container that never started (a pod left Pending).
                    out[c.name] = self.core.read_namespaced_pod_log(p.metadata.name, self.namespace,
                                                                    container=c.name) or ""
                except ApiException as e:
                    out[c.name] = f"(log not readable: {e.reason})\n"
        return out

    def _read_server_logs(self, variant: str) -> dict[str, bytes]:
        """RocketMQ's own log files (broker.log, proxy.log, pop.log ...), which never reach stdout, by process."""
        out = {}
        for p in self._pods(variant):
            for c in pod.containers(self._topology.get(variant, SINGLE)):
                try:
                    out[c.process] = transfer.read_tree(self.core, self.namespace, p.metadata.name, c.name,
                                                        naming.server_logs(c.process), timeout_s=120)
                except Exception as e:  # noqa: BLE001 - logs are a courtesy; the run's data is already safe
                    self.log(f"{variant}: server logs of the {c.process} not copied: {e}")
        return out
