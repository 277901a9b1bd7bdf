"""External variants: clusters the harness measures as deployed and never starts, stops or reconfigures (a
variant with ``endpoints:``, harness.inputs.variants.ExternalEndpoints).

Before anything of a run starts, ``preflight`` asks each cluster what it is (the name server's cluster table,
each master's live settings and runtime version) and refuses, in one line, what the run cannot do there: a
scenario setting the brokers do not run with, another shape than the scenario's topology, a broker behind ACL.
The run's topics and groups carry a suffix unique to the run and variant on the wire (Endpoints.suffix), and
``down`` removes them again unless asked to keep them. ``Split`` puts an external backend beside the run's own.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.client import remoting
from harness.contracts.endpoints import BrokerNode, Endpoints, run_tag
from harness.contracts.modules import ModuleJar
from harness.core.errors import ConfigError, one_line
from harness.core.waiting import Deadline
from harness.deploy.base import Backend, ServerProcess
from harness.inputs import needs
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant

Log = Callable[[str], None]
READY_S = 60.0  # a cluster that is up answers a round trip at once; this is for a slow network
# The exporter RocketMQ serves when metricsExporterType=PROM and no port is set.
DEFAULT_EXPORTER_PORT = "5557"
# fastjson writes map keys that are integers unquoted (brokerAddrs: {0: "host:port"}).
_BARE_INT_KEY = re.compile(r"([{,])\s*(-?\d+)\s*:")


def parse_cluster_info(text: str) -> dict[str, dict[str, dict[int, str]]]:
    """The name server's GET_BROKER_CLUSTER_INFO body -> cluster -> broker name -> broker id -> address (id 0:
    the master)."""
    doc = json.loads(_BARE_INT_KEY.sub(r'\1"\2":', text))
    brokers = doc.get("brokerAddrTable") or {}
    out: dict[str, dict[str, dict[int, str]]] = {}
    for cluster, names in (doc.get("clusterAddrTable") or {}).items():
        out[cluster] = {n: {int(i): a for i, a in (brokers.get(n, {}).get("brokerAddrs") or {}).items()}
                        for n in names}
    return out


def reachable(address: str, timeout_s: float = 3.0) -> str | None:
    """None when something accepts a TCP connection at host:port; else why not, in a few words."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as e:
        return one_line(str(e.strerror or e)).lower() or type(e).__name__


@dataclass
class Cluster:
    """What preflight learned about one external variant's cluster."""

    name: str
    masters: list[tuple[str, str]]  # (broker name, address), the first one first
    slaves: list[tuple[str, str]]
    version: str | None
    settings: dict[str, str]  # the first master's, live
    metrics: str  # the first master's exporter URL, or ""
    metrics_why: str = ""  # why there is none
    removed: list[str] = field(default_factory=list)
    master_metrics: tuple[str, ...] = ()  # every master's exporter URL (or ""), in masters' order


def _truthy(value: str | None) -> bool:
    return str(value).strip().lower() == "true"


def _word(value: object) -> str:
    """A setting as the broker states it (booleans lower case), to compare a live value with a wanted one."""
    return str(value).strip().lower()


def _exporter(settings: dict[str, str], broker: str) -> tuple[str, str]:
    """(the broker's Prometheus exporter URL, "") or ("", why it has none)."""
    kind = settings.get("metricsExporterType", "DISABLE")
    if kind.upper() != "PROM":
        return "", f"metricsExporterType={kind}"
    host = settings.get("metricsPromExporterHost") or ""
    if host in ("", "0.0.0.0"):
        host = broker.rpartition(":")[0]
    address = f"{host}:{settings.get('metricsPromExporterPort') or DEFAULT_EXPORTER_PORT}"
    why = reachable(address)
    return ("", f"exporter {address} does not answer ({why})") if why else (f"http://{address}/metrics", "")


def inspect(v: Variant, scenario: Scenario) -> Cluster:
    """Everything preflight checks of one external variant, against its live cluster (ConfigError: one line)."""
    ep = v.endpoints
    assert ep is not None
    where = f"variant {v.name} ({v.source})"
    for what, address in (("name server", ep.namesrv), ("proxy", ep.proxy)):
        why = address and reachable(address)
        if why:
            raise ConfigError(f"{where}: {what} {address} does not answer ({why}); is the cluster up?")
    if scenario.protocol == "grpc" and not ep.proxy:
        raise ConfigError(f"scenario {scenario.name} runs over grpc through a proxy; {where} names no "
                          "endpoints.proxy: add it, or run the scenario over remoting")
    try:
        clusters = parse_cluster_info(remoting.cluster_info(ep.namesrv))
    except (remoting.RemotingError, OSError, ValueError) as e:
        raise ConfigError(f"{where}: name server {ep.namesrv} gave no cluster table ({one_line(str(e))})") from None
    if ep.cluster:
        if ep.cluster not in clusters:
            raise ConfigError(f"{where}: name server {ep.namesrv} knows no cluster {ep.cluster} (it knows "
                              f"{', '.join(sorted(clusters)) or 'none'})")
        name = ep.cluster
    elif len(clusters) == 1:
        [name] = clusters
    else:
        raise ConfigError(f"{where}: name server {ep.namesrv} knows " + (
            f"clusters {', '.join(sorted(clusters))}; add endpoints.cluster" if clusters else "no broker"))
    brokers = clusters[name]
    masters = [(n, ids[0]) for n, ids in sorted(brokers.items()) if 0 in ids]
    slaves = [(n, a) for n, ids in sorted(brokers.items()) for i, a in sorted(ids.items()) if i > 0]
    if not masters:
        raise ConfigError(f"{where}: cluster {name} has no master registered with {ep.namesrv}")
    live: list[dict[str, str]] = []
    version = None
    for broker, address in masters:  # every master: a second one may run other settings than the first
        try:
            settings = remoting.broker_settings(address)
            version = version or remoting.version_of(remoting.runtime_info(address))
        except (remoting.RemotingError, OSError) as e:
            raise ConfigError(f"{where}: broker {broker} {address} refuses admin requests ({one_line(str(e))})") \
                from None
        _check_settings(where, broker, address, settings, version, scenario)
        live.append(settings)
    topo = scenario.topology
    if len(masters) != topo.masters or bool(slaves) != topo.slave:
        shape = f"{len(masters)} master(s)" + (f" and {len(slaves)} slave(s)" if slaves else "")
        wants = f"{topo.masters} master(s)" + (" with a slave" if topo.slave else " without a slave")
        raise ConfigError(f"{where}: cluster {name} has {shape}; scenario {scenario.name} runs on {wants} "
                          "(topology): both sides of a comparison must run the same shape")
    exporters = [_exporter(settings, address) for settings, (_, address) in zip(live, masters, strict=True)]
    metrics, why = exporters[0]
    if not metrics and scenario.observer_effect:
        raise ConfigError(f"scenario {scenario.name} measures the observer effect of broker scrapes; {where} serves "
                          f"none ({why})")
    return Cluster(name, masters, slaves, version, live[0], metrics, why,
                   master_metrics=tuple(m for m, _ in exporters))


def _check_settings(where: str, broker: str, address: str, settings: dict[str, str], version: str | None,
                    scenario: Scenario) -> None:
    """One master's live settings against what the run needs: no ACL, the scenario's settings as it needs them."""
    if _truthy(settings.get("aclEnable")) or _truthy(settings.get("authenticationEnabled")):
        raise ConfigError(f"{where}: broker {broker} {address} runs with ACL; the harness has no credentials for it")
    required = needs.required_settings(scenario)
    for key, wanted in needs.broker_overrides(scenario).items():
        live = settings.get(key)
        if live is None and key in required:
            raise ConfigError(f"{where}: broker {broker} {address} (RocketMQ {version}) does not know {key}, which "
                              f"scenario {scenario.name} needs {_word(wanted)}")
        if live is not None and _word(live) != _word(wanted):
            raise ConfigError(f"{where}: broker {broker} {address} runs {key}={live}; scenario {scenario.name} needs "
                              f"{_word(wanted)}, and the harness does not change a cluster it does not own: pick "
                              "another scenario or a cluster that runs it so")


def endpoints_of(v: Variant, c: Cluster, run_id: str) -> Endpoints:
    ep = v.endpoints
    assert ep is not None
    scraped = c.master_metrics or (c.metrics,)
    nodes = tuple(BrokerNode(n if i else "broker", a, scraped[i] if i < len(scraped) else "") for i, (n, a) in
                  enumerate(c.masters)) + tuple(BrokerNode("slave", a, "", master=False) for _, a in c.slaves)
    return Endpoints(variant=v.name, version=c.version or "unknown", grpc=ep.proxy or "", remoting="",
                     broker=c.masters[0][1], namesrv=ep.namesrv, metrics=c.metrics,
                     nodes=nodes if len(nodes) > 1 else (), suffix=run_tag(run_id, v.name))


class ExternalBackend:
    """The Backend of a run's external variants: it deploys and stops nothing."""

    def __init__(self, variants: Sequence[Variant], protocol: str, run_id: str, log: Log = print,
                 keep: bool = False) -> None:
        self.variants = {v.name: v for v in variants if v.is_external}
        self.protocol, self.run_id, self.log, self.keep = protocol, run_id, log, keep
        self.clusters: dict[str, Cluster] = {}
        self._endpoints: dict[str, Endpoints] = {}

    def preflight(self, scenario: Scenario) -> None:
        """Inspect every external cluster; ConfigError (nothing started, nothing created) on what it refuses."""
        for name, v in self.variants.items():
            c = inspect(v, scenario)
            self.clusters[name] = c
            self._endpoints[name] = endpoints_of(v, c, self.run_id)
            if not c.metrics:
                self.log(f"warning: {name}: no broker metrics ({c.metrics_why}); its broker series will be empty")

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        from harness.deploy import readiness

        out = []
        for v in variants:
            ep = self._endpoints[v.name]
            readiness.wait_serving(ep, self.protocol, Deadline(READY_S))
            self.log(f"{v.name}: external cluster {self.clusters[v.name].name} (RocketMQ {ep.version}) at {ep.namesrv}"
                     f", the run's names end in {ep.suffix}")
            out.append(ep)
        return out

    def endpoints(self) -> list[Endpoints]:
        return list(self._endpoints.values())

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        """Stops nothing; removes the run's topics and groups (every name with the variant's suffix, the
        broker's own %RETRY% and %DLQ% ones included) unless they are to be kept."""
        for name in names if names is not None else list(self._endpoints):
            ep = self._endpoints.get(name)
            if ep is None or self.keep:
                continue
            self.clusters[name].removed = self._remove(ep)
        return []

    def _remove(self, ep: Endpoints) -> list[str]:
        removed: list[str] = []
        routes: set[str] = set()
        for broker in ep.masters:
            try:
                topics = sorted(t for t in remoting.topics(broker) if t.endswith(ep.suffix))
                groups = sorted(g for g in remoting.groups(broker) if g.endswith(ep.suffix))
            except (remoting.RemotingError, OSError) as e:
                self.log(f"warning: {ep.variant}: could not list the run's topics on {broker}: {e}")
                continue
            # Topics before groups: the broker's revive service and a pop woken from its long poll look the
            # topic up first and then the group, which they create again when it is gone (autoCreateSubscription
            # Group); with the topic gone first they stop there.
            for topic in topics:
                self._try(lambda b=broker, t=topic: remoting.delete_topic(b, t), ep, removed, f"topic {topic}")
            for group in groups:
                self._try(lambda b=broker, g=group: remoting.delete_group(b, g), ep, removed, f"group {group}")
            routes.update(topics)
        # The routes last, once every master has dropped the topic: a master still holding it would register
        # the route again with its next heartbeat.
        for topic in sorted(routes):
            self._try(lambda t=topic: remoting.delete_topic_in_namesrv(ep.namesrv, t), ep, [], "")
        return removed

    def _try(self, fn: Callable[[], None], ep: Endpoints, done: list[str], what: str) -> None:
        try:
            fn()
            if what:
                done.append(what)
        except (remoting.RemotingError, OSError) as e:
            self.log(f"warning: {ep.variant}: {e}")

    def collect(self, dest: Path) -> None:
        for name in self.clusters:
            (dest / name).mkdir(parents=True, exist_ok=True)
            (dest / name / "external.json").write_text(json.dumps(self.report(name), indent=2) + "\n")

    def report(self, name: str) -> dict[str, object]:
        """What the manifest keeps of an external variant's cluster."""
        c, ep = self.clusters[name], self._endpoints[name]
        return {"cluster": c.name, "version": c.version, "masters": [list(m) for m in c.masters],
                "slaves": [list(s) for s in c.slaves], "suffix": ep.suffix, "kept": self.keep,
                "removed": c.removed, "metrics": c.metrics or f"none ({c.metrics_why})"}

    def broker_config(self, name: str) -> dict[str, str]:
        """The first master's settings as it runs them now (not a file the harness wrote)."""
        try:
            return remoting.broker_settings(self._endpoints[name].broker)
        except (remoting.RemotingError, OSError):
            return self.clusters[name].settings

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return {}

    def modules(self, name: str) -> list[ModuleJar]:
        return []  # a cluster the harness did not start: its jars are not known here

    def arm_plants(self, name: str) -> None:
        pass  # plants are refused on a cluster the harness did not start (harness.run.plan)

    def process(self, name: str, target: str) -> ServerProcess:
        raise ConfigError(f"variant {name} is an external cluster: the harness owns none of its processes")


class Split:
    """A run's backend when some variants are external: each variant goes to the backend that has it."""

    def __init__(self, owned: Backend, external: ExternalBackend) -> None:
        self.owned, self.external = owned, external

    def _of(self, name: str) -> Backend:
        return self.external if name in self.external.variants else self.owned  # type: ignore[return-value]

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        owned = [v for v in variants if not v.is_external]
        got = {ep.variant: ep for ep in [*(self.owned.up(owned, topology) if owned else []),
                                          *self.external.up([v for v in variants if v.is_external], topology)]}
        return [got[v.name] for v in variants]

    def endpoints(self) -> list[Endpoints]:
        return [*self.owned.endpoints(), *self.external.endpoints()]

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        mine = None if names is None else [n for n in names if n not in self.external.variants]
        theirs = None if names is None else [n for n in names if n in self.external.variants]
        try:
            return self.owned.down(mine) if mine != [] else []
        finally:  # the run's names leave the external cluster even when a local broker would not stop
            self.external.down(theirs)

    def collect(self, dest: Path) -> None:
        self.owned.collect(dest)
        self.external.collect(dest)

    def broker_config(self, name: str) -> dict[str, str]:
        return self._of(name).broker_config(name)

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return self._of(name).agent_report(name)

    def modules(self, name: str) -> list[ModuleJar]:
        return self._of(name).modules(name)

    def arm_plants(self, name: str) -> None:
        self._of(name).arm_plants(name)

    def process(self, name: str, target: str) -> ServerProcess:
        return self._of(name).process(name, target)
