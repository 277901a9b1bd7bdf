"""The k8s backend: variants are the Helm release's StatefulSets (a name server and a broker with its
proxy per pod), driven through the Kubernetes API.

The chart deploys every variant it lists; ``up`` gives a run fresh brokers (the pod is recreated, so
its emptyDir store starts empty, as a local run's does) with the run's broker settings, and waits for
readiness; ``down`` scales the variants to zero, keeping their logs for ``collect``.
"""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.contracts.endpoints import Endpoints
from harness.contracts.modules import ModuleJar
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Deadline, Pending, wait_until
from harness.deploy import readiness
from harness.deploy.base import ServerProcess, parse_properties
from harness.deploy.k8s import naming, transfer
from harness.deploy.k8s.faults import PodProcess
from harness.inputs.scenario import SINGLE, Topology
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
        self._server_logs: dict[str, bytes] = {}  # variant -> tar.gz of the broker's rocketmqlogs/
        self._configs: dict[str, str] = {}
        self._agents: dict[str, dict[str, list[str]]] = {}
        self._started: list[str] = []  # what `down` with no names stops: this backend's variants only
        self._variants: dict[str, Variant] = {}

    # --- the Backend interface -------------------------------------------------------------

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        if topology != SINGLE:
            raise ConfigError(f"topology {topology.model_dump()}: the chart deploys one broker inside its proxy per "
                              "variant; other topologies run on the local backend only (for now)")
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

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        chosen = list(names) if names is not None else list(dict.fromkeys(self._started))
        for name in chosen:
            self._logs[name] = self._read_logs(name)
            self._server_logs[name] = self._read_server_logs(name)
            self.apps.patch_namespaced_stateful_set_scale(
                naming.variant_name(self.full, name), self.namespace, {"spec": {"replicas": 0}}
            )
        return chosen

    def collect(self, dest: Path) -> None:
        for name in sorted(set(self._logs) | set(self._configs)):
            target = dest / name
            target.mkdir(parents=True, exist_ok=True)
            for container, text in self._logs.get(name, {}).items():
                (target / f"{container}.out").write_text(text)
            if self._server_logs.get(name):
                try:
                    transfer.unpack(self._server_logs[name], target)
                except (OSError, tarfile.TarError) as e:
                    self.log(f"{name}: server logs not unpacked: {e}")
            if name in self._configs:
                (target / "conf").mkdir(exist_ok=True)
                (target / "conf" / CONFIG_KEY).write_text(self._configs[name])

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return self._agents.get(name, {})

    def modules(self, name: str) -> list[ModuleJar]:
        return []  # the chart's images hold the jars; which modules they are is not read back from them yet

    def broker_config(self, name: str) -> dict[str, str]:
        return parse_properties(self._configs.get(name, ""))

    def process(self, name: str, target: str) -> ServerProcess:
        if name not in self._variants:
            raise HarnessError(f"variant {name} is not up")
        v = self._variants[name]

        def after_start() -> None:
            # The broker's container started again: serving, and its agents installed once more.
            if target == "broker" and self.round_trip:
                self._wait_serving(self._endpoints(self._statefulset(v)))
                self._check_agents(v)

        def exec_(pod: str, container: str, argv: list[str]) -> tuple[int, str, str]:
            return transfer.exec_in(self.core, self.namespace, pod, container, argv)

        return PodProcess(name, target, exec_, lambda: self._pods(name), self.ready_timeout_s, after_start)

    # --- internals -------------------------------------------------------------------------

    def _statefulset(self, v: Variant) -> object:
        from kubernetes.client.exceptions import ApiException

        name = naming.variant_name(self.full, v.name)
        try:
            sts = self.apps.read_namespaced_stateful_set(name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                raise ConfigError(
                    f"variant {v.name} is not deployed (no StatefulSet {name} in namespace {self.namespace}); "
                    "add it to the chart's `variants` and run `make deploy`"
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
        """Write the run's broker settings into the variant's ConfigMap; the recreated pod reads them."""
        name = naming.variant_name(self.full, v.name)
        cm = self.core.read_namespaced_config_map(name, self.namespace)
        text = merged_broker_conf((cm.data or {}).get(BASE_CONFIG_KEY, ""), v.broker)
        self.core.patch_namespaced_config_map(name, self.namespace, {"data": {CONFIG_KEY: text}})
        self._configs[v.name] = text

    def _pods(self, variant: str) -> list:
        selector = f"{naming.COMPONENT}={naming.ROCKETMQ},{naming.VARIANT}={variant}"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        return [p for p in pods if p.metadata.name.startswith(naming.variant_name(self.full, variant))]

    def _pod_uids(self, variant: str) -> set[str]:
        return {p.metadata.uid for p in self._pods(variant)}

    def _restart(self, variant: str, sts: object) -> None:
        name = naming.variant_name(self.full, variant)
        if not sts.spec.replicas:
            self.apps.patch_namespaced_stateful_set_scale(name, self.namespace, {"spec": {"replicas": 1}})
        # Its store is thrown away, and the image's sh (PID 1) ignores SIGTERM: no point waiting 30 s.
        for pod in self._pods(variant):
            self.core.delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=1)

    def _wait_pod_ready(self, variant: str, exclude: set[str]) -> None:
        def ready() -> bool | Pending:
            last = Pending("no pod yet")
            for pod in self._pods(variant):
                if pod.metadata.uid in exclude or pod.metadata.deletion_timestamp:
                    continue
                conds = {c.type: c.status for c in pod.status.conditions or []}
                if conds.get("Ready") == "True":
                    return True
                waiting = [f"{s.name}: {s.state.waiting.reason}" for s in pod.status.container_statuses or []
                           if s.state and s.state.waiting]
                last = Pending(f"pod {pod.metadata.name} {pod.status.phase}"
                               + (f" ({'; '.join(waiting)})" if waiting else ""))
            return last

        wait_until(f"{variant}'s broker pod to be ready", ready, self.ready_timeout_s, interval_s=2.0)

    def _wait_serving(self, ep: Endpoints) -> None:
        readiness.wait_serving(ep, "grpc", Deadline(self.ready_timeout_s),
                               detail=lambda: self._broker_output(ep.variant, tail_lines=40))

    def _broker_output(self, variant: str, tail_lines: int | None = None) -> str:
        out = []
        for pod in self._pods(variant):
            if pod.metadata.deletion_timestamp:
                continue
            out.append(self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace,
                                                         container=naming.BROKER_CONTAINER, tail_lines=tail_lines))
        return "".join(out)

    def _check_agents(self, v: Variant) -> None:
        """A patched variant that runs unpatched would measure the wrong build: refuse it."""
        if not v.agents:
            return
        output, jars = self._broker_output(v.name), [a.jar for a in v.agents]
        problems = readiness.agent_problems(output, jars)
        if problems:
            raise HarnessError(f"{v.name}: agents not active: {'; '.join(problems)}")
        self._agents[v.name] = readiness.agent_report(output, jars)

    def _endpoints(self, sts: object) -> Endpoints:
        labels = sts.metadata.labels or {}
        return naming.endpoints(self.full, self.namespace, labels[naming.VARIANT],
                                image_tag(broker_container(sts).image), probe=labels.get(naming.PROBE) == "true")

    def _read_logs(self, variant: str) -> dict[str, str]:
        from kubernetes.client.exceptions import ApiException

        out = {}
        for pod in self._pods(variant):
            for c in pod.spec.containers:
                try:
                    out[c.name] = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container=c.name)
                except ApiException as e:
                    out[c.name] = f"(log not readable: {e.reason})\n"
        return out

    def _read_server_logs(self, variant: str) -> bytes:
        """RocketMQ's own log files (broker.log, proxy.log, pop.log ...), which never reach stdout."""
        for pod in self._pods(variant):
            try:
                return transfer.read_tree(self.core, self.namespace, pod.metadata.name, naming.BROKER_CONTAINER,
                                          naming.SERVER_LOGS, timeout_s=120)
            except Exception as e:  # noqa: BLE001 - logs are a courtesy; the run's data is already safe
                self.log(f"{variant}: server logs not copied: {e}")
        return b""
