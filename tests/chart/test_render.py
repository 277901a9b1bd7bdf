"""The chart rendered in every CI profile: what it would apply, checked object by object.

The contracts tested here are the ones a cluster run depends on: the patched broker really loads the
agent, Prometheus finds the workers and brokers, Grafana gets every dashboard, no secret sits in plain
values, and the k8s backend's names, labels, environment and permissions match the objects.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cli.main import parser
from harness.core.paths import REPO_ROOT
from harness.deploy.agents import PROBE_JAR, WAKEUP_FIX_JAR
from harness.deploy.k8s import cluster, naming, pod
from harness.deploy.k8s.chart_values import ChartValues
from harness.deploy.local.config import BROKER_DEFAULTS, BROKER_JVM, COMMON_JVM, NAMESRV_JVM, jvm_sizes
from harness.deploy.local.distribution import MAIN_CLASSES
from harness.inputs.scenario import parse_scenario
from harness.inputs.variants import Variant, load_variants, parse_variants
from tests.chart.helm import (
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    PROFILES,
    RELEASE,
    container,
    env_of,
    find,
    helm,
    one,
    render,
)

FULL = naming.fullname(RELEASE)


def _merged(base: object, override: object) -> object:
    """Helm's merge of a values file over the chart's: maps key by key, at every depth; anything else replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in override.items()}}
    return override


def values_of(profile: str) -> ChartValues:
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    override = yaml.safe_load((CHART / "ci" / profile).read_text()) or {}
    return ChartValues.model_validate(_merged(base, override))


def test_there_are_profiles_for_defaults_and_many_variants():
    names = [p.name for p in PROFILES]
    assert names[0] == "01-default-values.yaml" and len(names) >= 3


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_helm_lint_is_clean_in_every_profile(profile: Path):
    out = helm("lint", str(CHART), "--strict", "--values", str(profile), "--namespace", NAMESPACE,
               "--kube-version", KUBE_VERSION)
    assert "0 chart(s) failed" in out.stdout


def test_the_kind_cluster_runs_the_kubernetes_version_the_chart_is_checked_against():
    cluster = yaml.safe_load((REPO_ROOT / "charts" / "kind" / "cluster.yaml").read_text())
    [node] = cluster["nodes"]
    assert node["image"].startswith(f"kindest/node:v{KUBE_VERSION}@sha256:")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.30.0-0"


def test_values_schema_is_generated_from_the_model():
    from harness.deploy.k8s.chart_values import render as render_schema

    committed = (CHART / "values.schema.json").read_text()
    assert committed == render_schema(), "regenerate: python -m harness.deploy.k8s.chart_values > values.schema.json"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("variants[0].name=Bad_Name,variants[0].version=5.3.3", "/variants/0/name"),
        ("variants[0].name=x,variants[0].version=5.3.3,variants[0].broker.listenPort=1",
         "/variants/0/broker/listenPort"),
        ("variants[0].name=x,variants[0].version=5.3.3,variants[0].proxy.grpcServerPort=1",
         "/variants/0/proxy/grpcServerPort"),
        ("broker.config.brokerIP1=10.0.0.1", "/broker/config/brokerIP1"),
        ("loadtest.scenario=no-such-scenario", "loadtest.scenario"),
        ("loadtest.variants[0]=nobody", "loadtest.variants"),
        ("probe.enabled=maybe", "/probe/enabled"),
        ("fullnameOverride=" + "y" * 50, "longer than 52"),
        ("harnessImage.pullPolicy=Sometimes", "/harnessImage/pullPolicy"),
        ("loadtest.workers.resources.requests.gpu=1", "invalid propertyName 'gpu'"),
        ("loadtest.workers.resources.limits.cpu=lots", "/loadtest/workers/resources/limits/cpu"),
        ("loadtest.workers.replicas=4", "/loadtest/workers"),
        ("loadtest.workers=null", "/loadtest"),
        # A variant is a build (version) or a cluster of yours (endpoints), never both, never neither.
        ("variants[0].name=x", "/variants/0"),
        ("variants[0].name=x,variants[0].version=5.3.3,variants[0].endpoints.namesrv=ns:9876", "/variants/0"),
        ("variants[0].name=x,variants[0].endpoints.namesrv=ns:9876,variants[0].agents[0].jar=a.jar", "/variants/0"),
        # An alert counts what lies beyond a bound of the wakeup histogram, so its threshold is one.
        ("monitoring.prometheusRule.waitBucketSeconds=4", "/monitoring/prometheusRule/waitBucketSeconds"),
        ("monitoring.dashboards.label=Bad Label", "/monitoring/dashboards/label"),
        ("canary.enabled=true,canary.variant=nope", "canary.variant: \"nope\" is not one of the chart's variants"),
        ("canary.enabled=true,canary.scenario=nope", "canary.scenario: \"nope\" is neither"),
        ("canary.enabled=true,canary.scenario=burst", "canary.scenario: \"burst\" sends in bursts"),
        ("placement.brokers.tolerations[0].operator=Maybe", "/placement/brokers/tolerations/0/operator"),
        ("placement.brokers.nodeSelector.BAD_=x", "/placement/brokers/nodeSelector"),
        ("placement.canary.affinity.nodeAfinity.x=1", "/placement/canary/affinity"),
        ("placement.dashboards.nodeSelector.a=b", "/placement"),
        ("loadtest.runsVolume.accessMode=ReadWriteOncePod", "/loadtest/runsVolume/accessMode"),
        # The load test and the comparison placed apart cannot share a volume one node mounts at a time.
        ("placement.loadtest.nodeSelector.role=load", "placement: loadtest and analysis are placed apart, but the "
                                                      "runs volume is ReadWriteOnce"),
    ],
)
def test_bad_values_fail_naming_the_field(setting: str, message: str):
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION,
            "--set", setting]
    out = helm(*args, check=False)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


def test_rendered_objects_carry_standard_labels_and_the_namespace(rendered):
    for objs in rendered.values():
        for o in objs:
            labels = o["metadata"].get("labels", {})
            for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                        "app.kubernetes.io/managed-by", "helm.sh/chart"):
                assert key in labels, f"{o['kind']} {o['metadata']['name']} lacks label {key}"
            assert o["metadata"]["namespace"] == NAMESPACE


def pod_specs(objs: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for o in objs:
        if o["kind"] in ("StatefulSet", "Deployment"):
            out.append((o["metadata"]["name"], o["spec"]["template"]["spec"]))
        elif o["kind"] == "CronJob":
            out.append((o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
        elif o["kind"] == "PodTemplate":
            out.append((o["metadata"]["name"], o["template"]["spec"]))
    return out


def test_every_container_is_non_root_read_only_and_bounded(rendered):
    for objs in rendered.values():
        for name, spec in pod_specs(objs):
            assert spec["securityContext"]["runAsNonRoot"] is True, name
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
            for c in spec["containers"] + spec.get("initContainers", []):
                sc = c["securityContext"]
                assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"], (name, c["name"])
                assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
                assert {"cpu", "memory"} <= set(c["resources"]["requests"]) <= set(c["resources"]["limits"])


def variant_sets(objs: list[dict], topology: str = naming.SINGLE) -> dict[str, dict]:
    return {o["metadata"]["labels"][naming.VARIANT]: o for o in find(objs, "StatefulSet")
            if o["metadata"]["labels"][naming.TOPOLOGY] == topology}


def _patched_spec(objs: list[dict]) -> tuple[dict, dict]:
    sets = variant_sets(objs)
    patched = sets["patched"]["spec"]["template"]["spec"]
    jar = Path(WAKEUP_FIX_JAR).name
    init = next(c for c in patched["initContainers"] if c["name"] == "agents")
    assert init["command"][-1] == "/agents/" and f"/app/{WAKEUP_FIX_JAR}" in init["command"]
    assert {"name": "agents", "mountPath": "/agents"} in init["volumeMounts"]
    broker = container(patched, naming.BROKER_CONTAINER)
    mount = next(m for m in broker["volumeMounts"] if m["name"] == "agents")
    assert mount["mountPath"] == "/agents" and mount["readOnly"]
    assert any(v["name"] == "agents" and "emptyDir" in v for v in patched["volumes"])
    unpatched = sets["unpatched"]["spec"]["template"]["spec"]
    assert "initContainers" not in unpatched
    assert "-javaagent" not in " ".join(container(unpatched, naming.BROKER_CONTAINER)["command"])
    assert f"-javaagent:/agents/{jar}" in cluster.jvm_options(_as_container(broker))
    return patched, broker


def _as_container(c: dict):
    from types import SimpleNamespace as NS

    return NS(command=c.get("command"), env=[NS(name=e["name"], value=e.get("value")) for e in c.get("env", [])])


def test_patched_variant_runs_the_jars_of_the_local_backend_with_the_fix_agent(rendered):
    objs = rendered["01-default-values.yaml"]
    assert set(variant_sets(objs)) == {"unpatched", "patched"}
    _, broker = _patched_spec(objs)
    # Its JVM starts once the pod's name server listens (a sh loop, then exec java).
    assert broker["command"][:2] == ["sh", "-c"] and "exec" in broker["command"][2]
    cmd = broker["command"][broker["command"].index("java"):]
    assert broker["image"] == "rmq-harness-rocketmq:5.3.3"
    # Java 17 with RocketMQ on the application class path: the agent is defined by the loader that loads
    # RocketMQ, as on the local backend, whose JVM flags these are.
    assert cmd[0] == "java" and set(COMMON_JVM) <= set(cmd) and "-Duser.home=/data/proxy" in cmd
    # The broker's heap and direct memory are the local backend's for the JVM that holds it (the proxy's in
    # single): 512 MiB of direct memory, not the 256 MiB the chart once typed, which remoting load ran out of.
    assert jvm_sizes("proxy") == BROKER_JVM and set(BROKER_JVM) <= set(cmd)
    cp = cmd.index("-cp")
    assert cmd[cp + 1] == "/opt/rocketmq/lib/*" and cmd[cp + 2] == MAIN_CLASSES["proxy"]
    assert cmd[cp + 3:cp + 9] == ["-pm", "local", "-bc", "/etc/rocketmq/broker.conf",
                                  "-pc", "/etc/rocketmq/rmq-proxy.json"]
    assert cmd.index(f"-javaagent:/agents/{Path(WAKEUP_FIX_JAR).name}") < cp
    namesrv = container(variant_sets(objs)["patched"]["spec"]["template"]["spec"], "namesrv")["command"]
    assert namesrv[0] == "java" and namesrv[-3:] == [MAIN_CLASSES["namesrv"], "-c", "/etc/rocketmq/namesrv.conf"]
    assert set(NAMESRV_JVM) <= set(namesrv)


def test_the_official_image_loads_the_agent_from_the_loader_of_its_scripts(rendered):
    _, broker = _patched_spec(rendered["03-registry-names-values.yaml"])
    assert broker["image"] == "registry.example.com/mirror/apache/rocketmq:5.3.3"
    # Loaded by the class loader that loads RocketMQ in the image (java.ext.dirs), the last setting wins.
    script = broker["command"][-1]
    assert broker["command"][:2] == ["sh", "-c"]
    assert script.rstrip().split(";")[-1].strip().startswith("exec sh mqbroker --enable-proxy")
    ext_dirs = re.search(r'-Djava\.ext\.dirs=(\S+?)"', script).group(1).split(":")
    assert ext_dirs == ["$JAVA_HOME/jre/lib/ext", "$home/lib", "/agents"]


def test_the_agents_the_chart_names_are_the_jars_the_image_ships():
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    for jar in (WAKEUP_FIX_JAR, PROBE_JAR):
        assert Path(jar).name in dockerfile
    assert "/app" in dockerfile and "WORKDIR /app" in dockerfile


def test_probe_profile_mounts_the_probe_last_on_every_broker_reachable_from_prometheus(rendered):
    objs = rendered["02-multi-variant-values.yaml"]
    sets = variant_sets(objs)
    assert set(sets) == {"unpatched", "patched", "upstream-5.4.0", "patched-v2"}
    for variant, sts in sets.items():
        assert sts["metadata"]["labels"][naming.PROBE] == "true"
        broker = container(sts["spec"]["template"]["spec"], naming.BROKER_CONTAINER)
        agents = [o for o in broker["command"] if o.startswith("-javaagent:")]
        assert agents[-1] == f"-javaagent:/agents/{Path(PROBE_JAR).name}=port={naming.PORTS['probe']},host=0.0.0.0"
        # Every broker of every topology has its own probe port, on the Service.
        for topology in ("2m-slave",):
            spec = variant_sets(objs, topology)[variant]["spec"]["template"]["spec"]
            svc = one(objs, "Service", naming.variant_name(FULL, variant, topology))
            for node, prefix in pod.PORT_PREFIX.items():
                c, port = container(spec, node), pod.PORTS.node(node).probe
                agents = [o for o in c["command"] if o.startswith("-javaagent:")]
                assert agents[-1].endswith(f"=port={port},host=0.0.0.0")
                assert {"name": f"{prefix}probe", "port": port, "targetPort": f"{prefix}probe"} in svc["spec"]["ports"]
        assert {"name": "probe", "containerPort": naming.PORTS["probe"]} in broker["ports"]
        svc = one(objs, "Service", naming.variant_name(FULL, variant))
        assert {"name": "probe", "port": naming.PORTS["probe"], "targetPort": "probe"} in svc["spec"]["ports"]
    image = container(sets["upstream-5.4.0"]["spec"]["template"]["spec"], naming.BROKER_CONTAINER)["image"]
    assert image == "rmq-harness-rocketmq:5.4.0"


def test_variant_services_are_where_the_backend_looks(rendered):
    for profile, objs in rendered.items():
        cron = one(objs, "CronJob", f"-{naming.LOADTEST}")
        full = env_of(container(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"], "harness"))[
            naming.ENV_FULLNAME]
        for variant, sts in variant_sets(objs).items():
            ep = naming.endpoints(full, NAMESPACE, variant, "x", probe=False)
            svc_name = ep.grpc.split(".")[0]
            assert sts["metadata"]["name"] == svc_name == naming.variant_name(full, variant), profile
            svc = one(objs, "Service", svc_name)
            ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
            assert ports["grpc"] == naming.PORTS["grpc"] and ports["broker"] == naming.PORTS["broker"]
            assert ports["metrics"] == naming.PORTS["metrics"] and ports["namesrv"] == naming.PORTS["namesrv"]
            selector = svc["spec"]["selector"]
            assert all(sts["spec"]["template"]["metadata"]["labels"][k] == v for k, v in selector.items())
            assert sts["metadata"]["labels"][naming.COMPONENT] == naming.ROCKETMQ
            cm = one(objs, "ConfigMap", svc_name)
            assert cm["data"]["broker.conf"] == cm["data"]["broker-base.conf"]


def test_a_faults_signals_reach_each_jvm_of_a_variants_pod_from_the_other_container(rendered):
    from harness.deploy.k8s.faults import containers

    for profile, objs in rendered.items():
        for t in pod.TOPOLOGIES:
            for variant, sts in variant_sets(objs, pod.key(t)).items():
                spec = sts["spec"]["template"]["spec"]
                assert spec["shareProcessNamespace"] is True, (profile, variant)
                # A container per target; each JVM's command line names its marker, and no other's does.
                targets = containers(t)
                assert {c["name"] for c in spec["containers"]} == {c for c, _ in targets.values()}
                for name, marker in targets.values():
                    others = [c for c in spec["containers"] if c["name"] != name]
                    assert marker in " ".join(container(spec, name).get("command", [])), (profile, name)
                    assert not any(marker in " ".join(c.get("command", [])).replace(f"{marker[:-5]}-", "")
                                   for c in others), (profile, name)


def test_the_pod_layout_is_generated_from_the_local_backends_definition():
    committed = (CHART / "files" / "topologies.json").read_text()
    assert committed == pod.render(), "regenerate: python -m harness.deploy.k8s.pod > " \
                                      "charts/rocketmq-pop-harness/files/topologies.json"


@pytest.mark.parametrize("topology", pod.TOPOLOGIES, ids=pod.key)
def test_every_topology_renders_the_local_backends_processes_ports_and_broker_settings(rendered, topology):
    """Each process of the local backend is a container, started as the local backend starts it (main class,
    heap, the file it reads); each broker's file holds what harness/deploy/local/config.py writes for that node
    in a pod (bound to every interface, routes naming the pod's address); only single runs after install."""
    from harness.deploy.local import config

    objs = rendered["01-default-values.yaml"]
    key = pod.key(topology)
    v = Variant(name="patched", version="5.3.3")
    sts = variant_sets(objs, key)["patched"]
    assert sts["spec"]["replicas"] == (1 if key == naming.SINGLE else 0)
    assert sts["metadata"]["name"] == naming.variant_name(FULL, "patched", key)
    spec = sts["spec"]["template"]["spec"]
    names = [c["name"] for c in spec["containers"]]
    assert names == [c.name for c in pod.containers(topology)]
    for c in pod.containers(topology):
        cmd = container(spec, c.name)["command"]
        java = cmd[cmd.index("java"):]
        assert java[java.index("-cp") + 2:] == [MAIN_CLASSES[{"namesrv": "namesrv", "proxy": "proxy"}.get(
            c.process, "broker")], *c.args]
        assert set(config.jvm_sizes(c.process, topology)) <= set(java) and f"-Duser.home=/data/{c.process}" in java
        # A broker's JVM starts once its name server listens, a cluster-mode proxy's once its brokers booted.
        assert (cmd[0] == "sh") == bool(c.waits_for or c.after_ports)
        assert ("0A" in cmd[2]) == bool(c.after_ports)
        assert ("Registering current broker to name server completed" in cmd[2]) == bool(c.waits_for)
    cm = one(objs, "ConfigMap", naming.variant_name(FULL, "patched", key))["data"]
    ports = pod.PORTS
    dirs = config.VariantDirs(pod.DATA)
    for node in config.nodes(v, topology, ports):
        expected = config.broker_properties(v, ports, dirs, topology, node, config.IN_POD)
        conf = dict(line.split("=", 1) for line in cm[f"{node.name}.conf"].splitlines())
        assert conf == {k: str(x).lower() if isinstance(x, bool) else str(x) for k, x in expected.items()}, node
        assert "brokerIP1" not in conf and "bindAddress" not in conf
    assert json.loads(cm["rmq-proxy.json"]) == config.proxy_settings(v, ports, topology, config.IN_POD)
    namesrv = dict(line.split("=", 1) for line in cm["namesrv.conf"].splitlines())
    assert namesrv == {k: str(x).lower() for k, x in config.namesrv_properties(ports, topology, config.IN_POD).items()}
    # The Service gives every process's ports, the first broker's on RocketMQ's defaults.
    svc = one(objs, "Service", naming.variant_name(FULL, "patched", key))
    by_name = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    for node in config.node_names(topology):
        assert by_name[f"{pod.PORT_PREFIX[node]}broker"] == ports.node(node).listen
    assert by_name["grpc"] == naming.PORTS["grpc"] and by_name["broker"] == naming.PORTS["broker"]


def test_a_scenarios_topology_is_deployed_unless_values_leave_it_out():
    objs = render(sets=("topologies=null",))
    assert {o["metadata"]["labels"][naming.TOPOLOGY] for o in find(objs, "StatefulSet")} == {naming.SINGLE}
    objs = render(sets=("topologies[0].proxy=cluster", "topologies[0].masters=2"))
    assert {o["metadata"]["labels"][naming.TOPOLOGY] for o in find(objs, "StatefulSet")} == {naming.SINGLE,
                                                                                         "2m"}


@pytest.mark.parametrize(("release", "override"), [("rmq", ""), ("team-rocketmq-pop-harness", ""), ("rmq", "ph")])
def test_fullname_matches_the_backend(release: str, override: str):
    sets = () if not override else (f"fullnameOverride={override}",)
    objs = render(release=release, sets=sets)
    cron = one(objs, "CronJob", f"-{naming.LOADTEST}")
    assert cron["metadata"]["name"] == f"{naming.fullname(release, override)}-{naming.LOADTEST}"


def test_broker_config_is_the_local_defaults_plus_the_pods_own_settings(rendered):
    objs = rendered["02-multi-variant-values.yaml"]
    conf = {}
    cm = one(objs, "ConfigMap", naming.variant_name(FULL, "patched-v2"))
    for line in cm["data"]["broker-base.conf"].splitlines():
        k, v = line.split("=", 1)
        conf[k] = v
    for k, v in BROKER_DEFAULTS.items():
        expected = str(v).lower() if isinstance(v, bool) else str(v)
        if k != "enableRetryTopicV2":
            assert conf[k] == expected, k
    assert conf["enableRetryTopicV2"] == "true" and conf["popPollingMapSize"] == "100000"
    assert conf["brokerName"] == "broker-patched-v2" and conf["namesrvAddr"] == "127.0.0.1:9876"
    assert conf["metricsPromExporterHost"] == "0.0.0.0" and conf["metricsPromExporterPort"] == "5557"
    proxy = json.loads(one(objs, "ConfigMap", naming.variant_name(FULL, "patched-v2"))["data"]["rmq-proxy.json"])
    assert proxy["grpcServerPort"] == 8081 and proxy["grpcThreadPoolNums"] == 8 and proxy["proxyMode"] == "local"


def test_load_test_runs_the_harness_with_what_the_chart_mounts(rendered):
    for profile, objs in rendered.items():
        cron = one(objs, "CronJob", f"-{naming.LOADTEST}")
        assert cron["spec"]["suspend"] is True and cron["spec"]["concurrencyPolicy"] == "Forbid"
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        harness = container(pod, "harness")
        args = parser().parse_args(harness["args"])
        assert args.command == "run" and args.backend == "k8s"
        assert str(args.variants) == naming.VARIANTS_FILE and str(args.runs_dir) == naming.RUNS_MOUNT
        mounts = {m["mountPath"]: m["name"] for m in harness["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert mounts[naming.RUNS_MOUNT] == "runs"
        assert volumes["runs"]["persistentVolumeClaim"]["claimName"] == one(objs, "PersistentVolumeClaim")[
            "metadata"]["name"]
        assert mounts[naming.SCENARIO_DIR] == naming.SCENARIO_VOLUME
        # The scenario it names is in the ConfigMap it mounts, and the harness accepts it.
        scenarios = one(objs, "ConfigMap", volumes[naming.SCENARIO_VOLUME]["configMap"]["name"])["data"]
        scenario_file = Path(args.scenario).name
        parse_scenario(yaml.safe_load(scenarios[scenario_file]), scenario_file)
        # So does the variants file, and every agent jar in it is one the agents build produces.
        variants_dir = str(Path(naming.VARIANTS_FILE).parent)
        variants_cm = one(objs, "ConfigMap", volumes[mounts[variants_dir]]["configMap"]["name"])
        variants = parse_variants(yaml.safe_load(variants_cm["data"]["variants.yaml"]), profile)
        assert set(args.variants_wanted) <= set(variants)
        for v in variants.values():
            for a in v.agents:
                assert a.jar in (WAKEUP_FIX_JAR, PROBE_JAR), a.jar
        env = {e["name"]: e for e in harness["env"]}
        for name in (naming.ENV_FULLNAME, naming.ENV_NAMESPACE, naming.ENV_POD_IP, naming.ENV_PROMETHEUS,
                     naming.ENV_POD_NAME, naming.ENV_POD_UID):
            assert name in env, name
        assert env[naming.ENV_POD_IP]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        # Its worker pods' owner (deleting this pod deletes them).
        assert env[naming.ENV_POD_NAME]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env[naming.ENV_POD_UID]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
        assert {"name": "http-sd", "containerPort": naming.SD_PORT} in harness["ports"]
        assert pod["serviceAccountName"] == one(objs, "ServiceAccount", f"-{naming.LOADTEST}")["metadata"]["name"]


def test_every_builtin_scenario_is_in_the_scenarios_configmap(rendered):
    data = one(rendered["01-default-values.yaml"], "ConfigMap", "-scenarios")["data"]
    builtin = sorted(p.name for p in (REPO_ROOT / "workloads" / "scenarios").glob("*.yaml"))
    assert sorted(data) == builtin
    for name in builtin:
        # (YAML's block scalar keeps one final newline)
        assert data[name] == (REPO_ROOT / "workloads" / "scenarios" / name).read_text().rstrip("\n") + "\n"
    assert "short-mine.yaml" in one(rendered["02-multi-variant-values.yaml"], "ConfigMap", "-scenarios")["data"]


def test_role_grants_what_the_backend_calls_and_nothing_cluster_wide(rendered):
    objs = rendered["01-default-values.yaml"]
    assert not find(objs, "ClusterRole") and not find(objs, "ClusterRoleBinding")
    rules = {(r["apiGroups"][0], res): set(r["verbs"])
             for r in one(objs, "Role", f"-{naming.LOADTEST}")["rules"] for res in r["resources"]}
    needed = {
        ("apps", "statefulsets"): {"get", "list"},  # read_namespaced_stateful_set, list (endpoints)
        ("apps", "statefulsets/scale"): {"patch"},  # up from zero, down
        ("", "pods"): {"list", "delete"},  # fresh pod per run
        ("", "pods/log"): {"get"},  # container output into the archive
        ("", "pods/exec"): {"create"},  # RocketMQ's log files into the archive
        ("", "configmaps"): {"get", "patch"},  # the run's broker.conf
        ("", "podtemplates"): {"get"},  # the worker pods' template
        ("batch", "jobs"): {"create", "get", "delete"},  # the workers' Jobs: made, followed, removed
    }
    for key, verbs in needed.items():
        assert verbs <= rules.get(key, set()), key
    assert all("*" not in verbs for verbs in rules.values())
    # The workers' Jobs and their template: exactly what the run calls, no list/watch/update, no other
    # batch resource (CronJobs, Jobs' status) and no write to the template.
    assert rules[("batch", "jobs")] == needed[("batch", "jobs")]
    assert rules[("", "podtemplates")] == {"get"}
    assert {res for group, res in rules if group == "batch"} == {"jobs"}
    assert "secrets" not in {res for _, res in rules}
    binding = one(objs, "RoleBinding", f"-{naming.LOADTEST}")
    assert binding["subjects"][0]["name"] == one(objs, "ServiceAccount", f"-{naming.LOADTEST}")["metadata"]["name"]


def prometheus_config(objs: list[dict]) -> dict:
    return yaml.safe_load(one(objs, "ConfigMap", "-prometheus")["data"]["prometheus.yml"])


def test_prometheus_discovers_the_running_load_test(rendered):
    for profile, objs in rendered.items():
        cfg = prometheus_config(objs)
        jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
        sd = jobs["rmq-harness-run"]
        assert sd["honor_labels"] is True
        url = sd["http_sd_configs"][0]["url"]
        svc = one(objs, "Service", f"-{naming.LOADTEST}")
        assert url == f"http://{svc['metadata']['name']}.{NAMESPACE}.svc:{naming.SD_PORT}/targets", profile
        assert svc["spec"]["ports"][0]["port"] == naming.SD_PORT and svc["spec"]["publishNotReadyAddresses"]
        # Locust's UI of each variant of a `k8s run --ui`, at the ports the run's masters bind.
        ui = [p["port"] for p in svc["spec"]["ports"] if p["name"].startswith("locust-ui-")]
        assert ui == [naming.ui_port(n) for n in range(naming.UI_PORTS)], profile
        pod = one(objs, "CronJob", f"-{naming.LOADTEST}")["spec"]["jobTemplate"]["spec"]["template"]
        pod_labels = pod["metadata"]["labels"]
        assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items())
        # Brokers are scaled to zero between runs; a run publishes them with its other targets.
        assert list(jobs) == ["rmq-harness-run"], profile
        prom_svc = one(objs, "Service", "-prometheus")
        prom_url = env_of(container(pod["spec"], "harness"))[naming.ENV_PROMETHEUS]
        assert prom_url == f"http://{prom_svc['metadata']['name']}.{NAMESPACE}.svc:9090"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_promtool_accepts_the_prometheus_config(profile: Path, tmp_path: Path, rendered):
    path = tmp_path / "prometheus.yml"
    path.write_text(one(rendered[profile.name], "ConfigMap", "-prometheus")["data"]["prometheus.yml"])
    out = subprocess.run(["promtool", "check", "config", "--syntax-only", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_is_off_unless_asked_for_and_then_provisions_every_dashboard_from_the_release_prometheus(rendered):
    # Grafana is AGPL-3.0: the defaults do not run it (permissive licences only); a profile that asks does.
    assert not [o for o in rendered["01-default-values.yaml"] if "grafana" in o["metadata"]["name"]]
    objs = rendered["02-multi-variant-values.yaml"]
    dashboards = one(objs, "ConfigMap", "-dashboards")["data"]
    files = sorted((REPO_ROOT / "dashboards").glob("*.json"))
    assert files and sorted(dashboards) == [f.name for f in files]
    for f in files:
        assert json.loads(dashboards[f.name]) == json.loads(f.read_text())
    prov = one(objs, "ConfigMap", "-grafana-provisioning")["data"]
    provider = yaml.safe_load(prov["dashboards.yaml"])["providers"][0]
    deploy = one(objs, "Deployment", "-grafana")["spec"]["template"]["spec"]
    grafana = container(deploy, "grafana")
    mounts = {m["name"]: m for m in grafana["volumeMounts"] if m["name"] == "dashboards"}
    assert mounts["dashboards"]["mountPath"] == provider["options"]["path"]
    volume = next(v for v in deploy["volumes"] if v["name"] == "dashboards")
    assert volume["configMap"]["name"] == one(objs, "ConfigMap", "-dashboards")["metadata"]["name"]
    ds = yaml.safe_load(prov["datasources.yaml"])["datasources"][0]
    prom_svc = one(objs, "Service", "-prometheus")
    assert ds["type"] == "prometheus" and ds["url"] == f"http://{prom_svc['metadata']['name']}.{NAMESPACE}.svc:9090"
    paths = {m["mountPath"] for m in grafana["volumeMounts"]}
    assert "/etc/grafana/provisioning/datasources/datasources.yaml" in paths
    assert "/etc/grafana/provisioning/dashboards/dashboards.yaml" in paths


def test_no_secret_in_plain_values_and_the_grafana_password_is_generated(rendered):
    words = re.compile(r"password|secret|token|credential", re.I)
    for path in [CHART / "values.yaml", *PROFILES]:
        keys = []

        def walk(node: object, keys: list[str] = keys) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    keys.append(str(k))
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(yaml.safe_load(path.read_text()))
        assert not [k for k in keys if words.search(k)], path
    objs = rendered["02-multi-variant-values.yaml"]
    secret = one(objs, "Secret", "-grafana")
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    assert len(password) >= 24
    text = yaml.safe_dump([o for o in objs if o["kind"] != "Secret"])
    assert password not in text
    grafana = container(one(objs, "Deployment", "-grafana")["spec"]["template"]["spec"], "grafana")
    env = env_of(grafana)
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"].startswith("/etc/grafana/secret/")
    again = one(render(sets=("grafana.enabled=true",)), "Secret", "-grafana")
    assert again["data"]["admin-password"] != secret["data"]["admin-password"], "a fixed password, not generated"


def test_every_profile_parses_under_the_values_model():
    for profile in PROFILES:
        values_of(profile.name)


def test_the_chart_variants_are_the_repository_variants():
    """A variant is defined once, in workloads/variants.yaml; the chart's default values may list a subset
    of them (image tag = version, agents by jar name) and must not say anything else about them."""
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["variants"]
    local = load_variants()
    assert chart, "the chart deploys no variant"
    for cv in chart:
        assert cv["name"] in local, f"chart variant {cv['name']} is not in workloads/variants.yaml"
        v = local[cv["name"]]
        assert cv["version"] == v.version, cv["name"]
        assert [(a["jar"], a.get("options", "")) for a in cv.get("agents", [])] == [
            (Path(a.jar).name, a.options) for a in v.agents], cv["name"]
        assert (cv.get("broker", {}), cv.get("proxy", {})) == (v.broker, v.proxy), cv["name"]
        assert not v.jars and not v.jvm_options, f"{cv['name']}: a local build or JVM options cannot go to the chart"


def test_the_docker_less_profile_pulls_nothing_and_runs_without_grafana(rendered):
    objs = rendered["04-docker-less-values.yaml"]
    assert not [o for o in objs if "grafana" in o["metadata"]["name"]]
    images = []
    for name, spec in pod_specs(objs):
        for c in spec["containers"] + spec.get("initContainers", []):
            assert c["imagePullPolicy"] == "Never", (name, c["name"])
            images.append(c["image"])
    # What `make cluster-images` loads: the harness image, Prometheus from Debian, the broker image.
    from tools.cluster import images as cluster_images

    assert {"rmq-pop-harness:dev", cluster_images.PROMETHEUS_IMAGE,
            f"{cluster_images.ROCKETMQ_REPOSITORY}:5.3.3"} == set(images)


def test_worker_pods_follow_the_load_test_pods_conventions(rendered):
    """The run makes its worker pods from this template (harness/deploy/k8s/workers.py): the harness image,
    restricted like the load-test pod, resources from values, no API access, nothing of the host."""
    for profile, objs in rendered.items():
        values = values_of(profile)
        cron_pod = one(objs, "CronJob", f"-{naming.LOADTEST}")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        harness = container(cron_pod, "harness")
        tpl = one(objs, "PodTemplate")
        assert tpl["metadata"]["name"] == naming.worker_template(env_of(harness)[naming.ENV_FULLNAME])
        labels = tpl["template"]["metadata"]["labels"]
        assert labels[naming.COMPONENT] == naming.LOADTEST_WORKER == tpl["metadata"]["labels"][naming.COMPONENT]
        assert labels[naming.INSTANCE] == RELEASE
        spec = tpl["template"]["spec"]
        assert spec["securityContext"] == cron_pod["securityContext"]
        assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
        assert spec["restartPolicy"] == "Never"
        for host in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(host), (profile, host)
        [worker] = spec["containers"]
        assert worker["name"] == "worker"
        assert (worker["image"], worker["imagePullPolicy"]) == (harness["image"], harness["imagePullPolicy"])
        assert worker["securityContext"] == harness["securityContext"]
        assert worker["resources"] == values.loadtest.workers.resources.model_dump()
        # The command, the master's address and the spec are the run's to fill in (one definition, in
        # harness/workload/fleet.py); the template gives a writable /tmp for the events on a read-only root.
        assert "command" not in worker and "args" not in worker
        assert env_of(worker) == {"HOME": "/tmp"}
        assert {"name": "metrics", "containerPort": naming.WORKER_PORT_BASE} in worker["ports"]
        assert {"name": "tmp", "mountPath": "/tmp"} in worker["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in spec["volumes"]
        assert not any("hostPath" in v or "persistentVolumeClaim" in v for v in spec["volumes"])
        # No Service picks the workers up as the load test (Prometheus finds them through the run).
        svc = one(objs, "Service", f"-{naming.LOADTEST}")
        assert not all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())


def test_worker_resources_come_from_values():
    objs = render(sets=("loadtest.workers.resources.requests.cpu=250m", "loadtest.workers.resources.limits.memory=2Gi"))
    [worker] = one(objs, "PodTemplate")["template"]["spec"]["containers"]
    assert worker["resources"]["requests"]["cpu"] == "250m" and worker["resources"]["limits"]["memory"] == "2Gi"


def spark_defaults(objs: list[dict]) -> dict[str, str]:
    text = one(objs, "ConfigMap", "-spark")["data"]["spark-defaults.conf"]
    return dict(line.split(None, 1) for line in text.splitlines() if line.strip())


def test_the_comparison_runs_a_spark_driver_whose_executors_are_pods_of_the_harness_image(rendered):
    """`rmq-harness k8s compare` (harness/deploy/k8s/remote.py) starts Jobs from this CronJob: a client-mode
    Spark driver that reaches the API server with its own account and makes executors from the template."""
    for profile, objs in rendered.items():
        values = values_of(profile)
        cron = one(objs, "CronJob", "-compare")
        assert cron["spec"]["suspend"] is True
        assert cron["metadata"]["labels"][naming.COMPONENT] == naming.ANALYSIS
        job = cron["spec"]["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] == values.analysis.activeDeadlineSeconds
        pod = job["template"]["spec"]
        driver = container(pod, "driver")
        loadtest = container(one(objs, "CronJob", f"-{naming.LOADTEST}")["spec"]["jobTemplate"]["spec"]["template"][
            "spec"], "harness")
        assert (driver["image"], driver["imagePullPolicy"]) == (loadtest["image"], loadtest["imagePullPolicy"])
        assert driver["command"] == ["rmq-harness"]  # its args: the command's (remote.compare_args)
        env = {e["name"]: e for e in driver["env"]}
        assert env["RMQ_HARNESS_SPARK_DRIVER_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env[naming.ENV_POD_NAME]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env[naming.ENV_NAMESPACE]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
        conf_dir = env["SPARK_CONF_DIR"]["value"]
        mounts = {m["mountPath"]: m["name"] for m in driver["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts[conf_dir]]["configMap"]["name"] == one(objs, "ConfigMap", "-spark")["metadata"]["name"]
        claim = one(objs, "PersistentVolumeClaim")["metadata"]["name"]
        assert volumes[mounts[naming.RUNS_MOUNT]]["persistentVolumeClaim"]["claimName"] == claim
        # Spark's fixed ports (the executors connect back to them), as the conf says.
        conf = spark_defaults(objs)
        assert {p["containerPort"] for p in driver["ports"]} == {int(conf["spark.driver.port"]),
                                                                 int(conf["spark.driver.blockManager.port"])}
        assert pod["serviceAccountName"] == one(objs, "ServiceAccount", f"-{naming.ANALYSIS}")["metadata"]["name"]
        # Executors: the harness image, never pulled where the profile says so, the runs volume read-only.
        assert conf["spark.kubernetes.container.image"] == driver["image"]
        assert conf["spark.kubernetes.container.image.pullPolicy"] == driver["imagePullPolicy"]
        assert conf["spark.kubernetes.namespace"] == NAMESPACE
        pvc = "spark.kubernetes.executor.volumes.persistentVolumeClaim.runs"
        assert conf[f"{pvc}.options.claimName"] == claim and conf[f"{pvc}.mount.readOnly"] == "true"
        assert conf[f"{pvc}.mount.path"] == naming.RUNS_MOUNT
        assert conf["spark.executor.instances"] == str(values.analysis.executors.instances)
        assert conf["spark.kubernetes.executor.request.cores"] == values.analysis.executors.requestCores
        assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"  # hence no configmaps in the Role
        assert conf["spark.kubernetes.executor.podTemplateFile"] == f"{conf_dir}/executor-pod.yaml"
        tpl = yaml.safe_load(one(objs, "ConfigMap", "-spark")["data"]["executor-pod.yaml"])
        spec = tpl["spec"]
        [executor] = spec["containers"]
        assert executor["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]
        assert executor["command"] == ["python", "-m", "spark.k8s_executor"]
        # Spark's executors fetch the driver's files into the working directory; the root is read-only.
        assert executor["workingDir"] == "/tmp" and {"name": "tmp", "mountPath": "/tmp"} in executor["volumeMounts"]
        assert spec["securityContext"] == pod["securityContext"] and executor["securityContext"] == driver[
            "securityContext"]
        assert spec["automountServiceAccountToken"] is False  # executors never call the API


def test_the_drivers_role_is_what_sparks_scheduler_calls_and_nothing_more(rendered):
    objs = rendered["01-default-values.yaml"]
    role = one(objs, "Role", f"-{naming.ANALYSIS}")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                              "verbs": ["create", "get", "list", "watch", "patch", "delete", "deletecollection"]}]
    binding = one(objs, "RoleBinding", f"-{naming.ANALYSIS}")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == one(objs, "ServiceAccount", f"-{naming.ANALYSIS}")["metadata"]["name"]


def test_the_comparison_in_the_cluster_can_be_left_out():
    objs = render(sets=("analysis.enabled=false",))
    assert not [o for o in objs if naming.ANALYSIS in o["metadata"]["labels"].get(naming.COMPONENT, "")]


def test_a_cluster_of_yours_gets_nothing_deployed_and_reaches_the_load_test_as_an_external_variant(rendered, tmp_path):
    objs = rendered["05-your-cluster-values.yaml"]
    deployed = {o["metadata"]["labels"]["rmq-harness/variant"] for o in objs
                if o["kind"] in ("StatefulSet", "Service", "ConfigMap")
                and "rmq-harness/variant" in o["metadata"]["labels"]}
    assert deployed == {"unpatched"}  # nothing named staging: no pod, Service or broker.conf for it
    text = one(objs, "ConfigMap", "-variants")["data"]["variants.yaml"]
    (tmp_path / "variants.yaml").write_text(text)
    variants = load_variants(tmp_path / "variants.yaml")  # the load-test pod's reading of it
    staging = variants["staging"]
    assert staging.is_external and staging.endpoints.namesrv == "rocketmq-namesrv.rocketmq.svc:9876"
    assert variants["staging"].endpoints.cluster == "DefaultCluster" and not variants["unpatched"].is_external
    assert one(objs, "CronJob", f"-{naming.LOADTEST}")  # its default run names staging beside unpatched


def _cpu(q: str | int) -> float:
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def test_the_fullest_topology_is_scheduled_beside_a_run_on_a_two_cpu_node(rendered):
    """A run's CPU requests (its load-test pod, a worker, Prometheus, the other variant's pod still up, the
    variant's pod in two masters with a slave) fit the 2-CPU node of the cluster test: a pod whose requests
    do not fit stays Pending, and the run waits for it until its deadline."""
    objs = rendered["04-docker-less-values.yaml"]

    def requests(spec: dict) -> float:
        return sum(_cpu(c["resources"]["requests"]["cpu"]) for c in spec["containers"])

    fullest = variant_sets(objs, "2m-slave")["patched"]["spec"]["template"]["spec"]
    single = variant_sets(objs)["unpatched"]["spec"]["template"]["spec"]
    cron = one(objs, "CronJob", f"-{naming.LOADTEST}")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    worker = one(objs, "PodTemplate", naming.LOADTEST_WORKER)["template"]["spec"]
    prometheus = one(objs, "Deployment", "-prometheus")["spec"]["template"]["spec"]
    total = sum(requests(s) for s in (fullest, single, cron, worker, prometheus))
    assert total <= 2.0 * 0.9, total  # the node's system pods (CoreDNS) request some too
