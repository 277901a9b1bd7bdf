"""The k8s backend's and the remote driver's decisions, against a stand-in for the Kubernetes API.

No cluster runs here, so this is the only place their logic runs in CI: which objects they read and
change, in what order, what they refuse, and that archives land atomically. The stand-in records calls
and answers like the API's models; it is never used to measure anything.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from harness.contracts.options import RunOptions
from harness.core.errors import ConfigError, HarnessError
from harness.deploy.k8s import naming, remote
from harness.deploy.k8s.cluster import K8sBackend
from harness.inputs.brokers import Topology
from harness.inputs.variants import JavaAgent, Variant

FULL = "rmq-rocketmq-pop-harness"


class ApiException(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def statefulset(variant: str, image: str = "apache/rocketmq:5.3.3", java_opts: str = "", replicas: int = 1,
                topology: str = naming.SINGLE) -> NS:
    broker = NS(name="broker", image=image, command=None, env=[NS(name="JAVA_OPT_EXT", value=java_opts)])
    return NS(metadata=NS(name=naming.variant_name(FULL, variant, topology),
                          labels={naming.VARIANT: variant, naming.TOPOLOGY: topology}),
              spec=NS(replicas=replicas, template=NS(spec=NS(containers=[broker]))), status=NS(ready_replicas=1))


def pod(variant: str, uid: str, ready: bool = True, topology: str = naming.SINGLE) -> NS:
    return NS(metadata=NS(name=f"{naming.variant_name(FULL, variant, topology)}-0", uid=uid, deletion_timestamp=None,
                          labels={naming.VARIANT: variant, naming.TOPOLOGY: topology}),
              status=NS(conditions=[NS(type="Ready", status="True" if ready else "False")], phase="Running",
                        container_statuses=[]),
              spec=NS(containers=[NS(name="namesrv"), NS(name="broker")]))


class FakeCluster:
    """Just enough of AppsV1Api and CoreV1Api; deleting a pod makes the 'controller' create a new one."""

    def __init__(self, sets: dict[str, NS]) -> None:
        self.sets = sets
        self.pods = {v: [pod(v, f"{v}-uid-1")] for v in sets}
        self.configmaps = {naming.variant_name(FULL, v): {"broker-base.conf": "enableRetryTopicV2=false\n"}
                           for v in sets}
        self.calls: list[tuple] = []

    # apps
    def read_namespaced_stateful_set(self, name: str, ns: str) -> NS:
        for s in self.sets.values():
            if s.metadata.name == name:
                return s
        raise ApiException(404)

    def patch_namespaced_stateful_set_scale(self, name: str, ns: str, body: dict) -> None:
        self.calls.append(("scale", name, body["spec"]["replicas"]))

    def list_namespaced_stateful_set(self, ns: str, label_selector: str) -> NS:
        variant = label_selector.split(f"{naming.VARIANT}=")[1]
        return NS(items=[s for k, s in self.sets.items() if s.metadata.labels[naming.VARIANT] == variant])

    # core
    def read_namespaced_config_map(self, name: str, ns: str) -> NS:
        return NS(data=dict(self.configmaps[name]))

    def patch_namespaced_config_map(self, name: str, ns: str, body: dict) -> None:
        self.configmaps[name].update(body["data"])
        self.calls.append(("configmap", name))

    def list_namespaced_pod(self, ns: str, label_selector: str) -> NS:
        variant = label_selector.split(f"{naming.VARIANT}=")[1]
        return NS(items=list(self.pods.get(variant, [])))

    def delete_namespaced_pod(self, name: str, ns: str, grace_period_seconds: int) -> None:
        self.calls.append(("delete", name))
        variant = next(v for v, ps in self.pods.items() if any(p.metadata.name == name for p in ps))
        n = len([c for c in self.calls if c[0] == "delete" and c[1] == name]) + 1
        self.pods[variant] = [pod(variant, f"{variant}-uid-{n}")]

    def read_namespaced_pod_log(self, name: str, ns: str, container: str, **kw: object) -> str:
        return f"{container} output\n"


@pytest.fixture
def backend(monkeypatch) -> tuple[K8sBackend, FakeCluster]:
    fake = FakeCluster({"unpatched": statefulset("unpatched"),
                        "patched": statefulset("patched", java_opts="-javaagent:/agents/pop-retry-wakeup.jar")})
    monkeypatch.setattr("kubernetes.client.exceptions.ApiException", ApiException)
    b = K8sBackend.__new__(K8sBackend)
    b.full, b.namespace, b.apps, b.core, b.ready_timeout_s, b.round_trip = FULL, "ns", fake, fake, 5.0, False
    b.log, b._logs, b._server_logs, b._configs, b._started, b._agents = (lambda s: None), {}, {}, {}, [], {}
    b._variants, b._topology, b._node_configs = {}, {}, {}
    monkeypatch.setattr(b, "_read_server_logs", lambda variant: {})
    return b, fake


def variant(name: str, **kw) -> Variant:
    return Variant(name=name, version="5.3.3", **kw)


def test_up_writes_the_runs_broker_settings_then_gives_each_variant_a_fresh_pod(backend):
    b, fake = backend
    eps = b.up([variant("unpatched", broker={"enableRetryTopicV2": True}),
                variant("patched", agents=[JavaAgent(jar="broker-patches/target/pop-retry-wakeup.jar")])])
    assert [e.variant for e in eps] == ["unpatched", "patched"]
    assert eps[0].grpc == f"{FULL}-unpatched.ns.svc:8081"
    conf = fake.configmaps[f"{FULL}-unpatched"]["broker.conf"]
    assert "enableRetryTopicV2=true" in conf  # the run's setting over the chart's base
    # Config first, then the restart: the new pod reads the new broker.conf.
    kinds = [c[0] for c in fake.calls]
    assert kinds.index("configmap") < kinds.index("delete")
    assert {c[1] for c in fake.calls if c[0] == "delete"} == {f"{FULL}-unpatched-0", f"{FULL}-patched-0"}
    assert b.broker_config("unpatched")["enableRetryTopicV2"] == "true"


def test_up_refuses_what_the_release_does_not_deploy(backend):
    b, _ = backend
    with pytest.raises(ConfigError, match="not deployed"):
        b.up([variant("upstream-5.4.0")])
    with pytest.raises(ConfigError, match="is not version 5.4.0"):
        b.up([Variant(name="unpatched", version="5.4.0")])
    with pytest.raises(ConfigError, match="pop-wakeup-probe.jar is not mounted.*probe.enabled=true"):
        b.up([variant("unpatched", agents=[JavaAgent(jar="broker-patches/target/pop-wakeup-probe.jar")])])


def test_up_scales_a_stopped_variant_back_and_waits_for_its_new_pod(backend):
    b, fake = backend
    fake.sets["unpatched"].spec.replicas = 0
    fake.pods["unpatched"] = []

    def scale(name: str, ns: str, body: dict) -> None:
        fake.calls.append(("scale", name, body["spec"]["replicas"]))
        fake.pods["unpatched"] = [pod("unpatched", "fresh", ready=True)]

    fake.patch_namespaced_stateful_set_scale = scale
    b.up([variant("unpatched")])
    assert ("scale", f"{FULL}-unpatched", 1) in fake.calls


def test_up_gives_up_when_the_new_pod_never_gets_ready(backend):
    b, fake = backend
    b.ready_timeout_s = 0.5
    original = fake.delete_namespaced_pod

    def delete(name: str, ns: str, grace_period_seconds: int) -> None:
        original(name, ns, grace_period_seconds)
        fake.pods["unpatched"][0].status.conditions[0].status = "False"

    fake.delete_namespaced_pod = delete
    with pytest.raises(HarnessError, match="waited .* s for unpatched.s broker pod to be ready; last seen: pod"):
        b.up([variant("unpatched")])


def test_down_stops_only_this_runs_variants_and_keeps_their_logs(backend, tmp_path: Path):
    b, fake = backend
    b.up([variant("patched", agents=[JavaAgent(jar="broker-patches/target/pop-retry-wakeup.jar")])])
    assert b.down() == ["patched"]
    assert [c for c in fake.calls if c[0] == "scale"] == [("scale", f"{FULL}-patched", 0)]
    b.collect(tmp_path)
    assert (tmp_path / "patched" / "broker.out").read_text() == "broker output\n"
    assert "enableRetryTopicV2" in (tmp_path / "patched" / "conf" / "broker.conf").read_text()
    assert not (tmp_path / "unpatched").exists()


# --- the remote driver ------------------------------------------------------------------------


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def archive_tar(run_id: str, with_manifest: bool = True) -> bytes:
    files = {f"{run_id}/events/x.parquet": b"data"}
    if with_manifest:
        files[f"{run_id}/manifest.json"] = b"{}"
    return tar_of(files)


@pytest.fixture
def cluster(monkeypatch) -> remote.Cluster:
    c = remote.Cluster.__new__(remote.Cluster)
    cron = {"metadata": {"name": f"{FULL}-loadtest"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "harness"}]}}}}}}
    c.release = remote.Release("rmq", "ns", cron)
    c.log = lambda s: None
    c.core = NS(create_namespaced_pod=lambda ns, body: None, delete_namespaced_pod=lambda *a, **k: None,
                read_namespaced_pod=lambda name, ns: NS(status=NS(phase="Running")))
    return c


def test_fetch_lands_the_archive_atomically_and_never_over_another(cluster, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(remote.transfer, "read_tree", lambda core, ns, pod, container, path, **kw: archive_tar("r1"))
    [path] = cluster.fetch(["r1"], tmp_path)
    assert path == tmp_path / "r1" and (path / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1"]  # no staging left behind
    with pytest.raises(HarnessError, match="already exists"):
        cluster.fetch(["r1"], tmp_path)
    assert (path / "events" / "x.parquet").read_bytes() == b"data"


def test_fetch_refuses_an_incomplete_archive(cluster, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(remote.transfer, "read_tree",
                        lambda core, ns, pod, container, path, **kw: archive_tar("r2", with_manifest=False))
    with pytest.raises(HarnessError, match="not a complete archive"):
        cluster.fetch(["r2"], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_run_names_the_release_s_variants_builds_or_clusters_of_the_user_s(cluster):
    text = ("variants:\n  unpatched: {version: '5.3.3'}\n"
            "  staging: {endpoints: {namesrv: 'ns.rocketmq.svc:9876'}}\n")
    asked = []

    def read(name, ns):
        asked.append((name, ns))
        return NS(data={"variants.yaml": text})

    cluster.core = NS(read_namespaced_config_map=read)
    cluster.check_variants(["unpatched", "staging"])  # a cluster of the user's is a variant like any
    assert asked == [(f"{FULL}-variants", "ns")]
    with pytest.raises(ConfigError, match=r"variant outside is not one of release rmq's \(staging, unpatched\); "
                                          r"add it to the chart's values"):
        cluster.check_variants(["unpatched", "outside"])


def test_a_second_run_is_refused_while_one_is_active(cluster):
    cluster.batch = NS(list_namespaced_job=lambda ns, label_selector: NS(items=[
        NS(metadata=NS(name="rmq-run-1"), status=NS(active=1))]))
    with pytest.raises(HarnessError, match="already going.*rmq-run-1"):
        cluster.start("r3", None, ["unpatched"], RunOptions())


def test_a_patched_variant_whose_agent_did_not_install_is_refused(backend, monkeypatch):
    b, fake = backend
    b.round_trip = True
    monkeypatch.setattr(b, "_wait_serving", lambda ep: None)
    fake.read_namespaced_pod_log = lambda name, ns, container, **kw: "RocketMQ started\n"
    with pytest.raises(HarnessError, match="patched: agents not active in broker: pop-retry-wakeup.jar printed"):
        b.up([variant("patched", agents=[JavaAgent(jar="broker-patches/target/pop-retry-wakeup.jar")])])
    fake.read_namespaced_pod_log = lambda name, ns, container, **kw: "[pop-retry-wakeup] installed on X\n"
    assert [e.variant for e in b.up([variant("patched", agents=[
        JavaAgent(jar="broker-patches/target/pop-retry-wakeup.jar")])])] == ["patched"]


def test_a_fault_target_is_the_jvm_of_a_variant_the_run_brought_up(backend):
    b, fake = backend
    with pytest.raises(HarnessError, match="variant unpatched is not up"):
        b.process("unpatched", "broker")
    b.up([variant("unpatched")])
    proc = b.process("unpatched", "broker")
    assert (proc.container, proc.signaller, proc.holds_down) == ("broker", "namesrv", False)
    with pytest.raises(ConfigError, match="unpatched in topology cluster is not deployed.*to its `topologies`"):
        b.up([variant("unpatched")], Topology(proxy="cluster"))


def test_a_topology_runs_in_its_own_statefulset_with_every_brokers_settings_and_the_variants_others_stop(backend):
    b, fake = backend
    two = Topology(proxy="cluster", masters=2)
    name = naming.variant_name(FULL, "patched", "2m")
    fake.sets["patched-2m"] = statefulset("patched", java_opts="-javaagent:/agents/pop-retry-wakeup.jar",
                                          replicas=0, topology="2m")
    fake.configmaps[name] = {"broker-base.conf": "listenPort=10911\n", "broker-b-base.conf": "listenPort=10931\n",
                             "namesrv.conf": "listenPort=9876\n"}
    fake.pods["patched"] = [pod("patched", "old"), pod("patched", "2m-old", topology="2m")]

    def delete(pod_name: str, ns: str, grace_period_seconds: int) -> None:
        fake.calls.append(("delete", pod_name))
        fake.pods["patched"] = [p for p in fake.pods["patched"] if p.metadata.name != pod_name] + [
            pod("patched", "2m-new", topology="2m")]

    fake.delete_namespaced_pod = delete
    [ep] = b.up([variant("patched", broker={"popPollingMapSize": 1})], two)
    # Every broker's file gets the run's settings; the variant's single pod is scaled away; only the topology's
    # own pod was recreated (single's name is a prefix of every other's).
    cm = fake.configmaps[name]
    assert "popPollingMapSize=1" in cm["broker.conf"] and "popPollingMapSize=1" in cm["broker-b.conf"]
    assert ("scale", naming.variant_name(FULL, "patched"), 0) in fake.calls and ("scale", name, 1) in fake.calls
    assert [c[1] for c in fake.calls if c[0] == "delete"] == [f"{name}-0"]
    host = f"{name}.ns.svc"
    assert ep.grpc == f"{host}:8081" and ep.masters == [f"{host}:10911", f"{host}:10931"]
    assert [n.name for n in ep.brokers] == ["broker", "broker-b"]
    proc = b.process("patched", "broker-b")
    assert proc.container == "broker-b" and proc.main_class == "/etc/rocketmq/broker-b.conf"
    assert b.process("patched", "proxy").container == "proxy"
    b.down()
    # Scaled to zero, and its pod deleted at once: its logs are read, its store thrown away.
    assert fake.calls[-2:] == [("scale", name, 0), ("delete", f"{name}-0")]


# --- the comparison in the cluster ------------------------------------------------------------------


def report_tar(job: str) -> bytes:
    return tar_of({f"{job}/summary.json": b'{"verdict": "improvement"}', f"{job}/report.html": b"<html>"})


@pytest.fixture
def analysis(cluster, monkeypatch):
    """The cluster with the release's analysis CronJob, two archives on its runs volume, no run going."""
    cron = {"metadata": {"name": f"{FULL}-compare"}, "spec": {"jobTemplate": {
        "metadata": {"labels": {naming.COMPONENT: naming.ANALYSIS}},
        "spec": {"template": {"spec": {"containers": [{"name": "driver", "args": ["compare", "--help"]}]}}}}}}
    calls = []
    cluster.api = NS(sanitize_for_serialization=lambda o: o)
    cluster.batch = NS(
        list_namespaced_cron_job=lambda ns, label_selector: NS(items=[cron] if naming.ANALYSIS in label_selector
                                                               else []),
        list_namespaced_job=lambda ns, label_selector: NS(items=[]),
        create_namespaced_job=lambda ns, body: calls.append(("create", body)),
        delete_namespaced_job=lambda name, ns, body: calls.append(("delete", name)))
    monkeypatch.setattr(cluster, "_exec", lambda pod, argv: calls.append(("exec", argv)) or "r1\nr2\n.reports\n")
    monkeypatch.setattr(cluster, "follow", lambda job, timeout_s, what: calls.append(("follow", job)))
    monkeypatch.setattr(remote.transfer, "read_tree", lambda core, ns, pod, container, path, **kw:
                        report_tar(path.rsplit("/", 1)[1]))
    return cluster, calls


def test_a_comparison_in_the_cluster_runs_compare_on_the_volume_and_brings_its_report_back(analysis, tmp_path):
    from spark.jobs.compare import parser

    cluster, calls = analysis
    out = cluster.compare(["r1", "r2"], "unpatched", "patched", ["--alpha", "0.01"], tmp_path / "rep", timeout_s=60)
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "summary.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no staging left behind
    [job] = [body for what, body in calls if what == "create"]
    name = job["metadata"]["name"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "compare"
    parsed = parser().parse_args(args[1:])
    assert parsed.archives == ["/runs/r1", "/runs/r2"] and parsed.master == naming.IN_CLUSTER_MASTER
    assert (parsed.baseline, parsed.candidate, parsed.alpha) == ("unpatched", "patched", 0.01)
    assert parsed.out == f"{naming.REPORTS_DIR}/{name}" and not parsed.fail_on_regression
    # followed, then deleted, and its report taken off the volume
    order = [c[0] if c[0] != "exec" else c[1][0] for c in calls]
    assert order.index("create") < order.index("follow") < order.index("delete") < len(order) - 1
    assert calls[-1] == ("exec", ["rm", "-rf", f"{naming.REPORTS_DIR}/{name}"])


def test_a_comparison_of_a_run_not_on_the_volume_starts_nothing(analysis, tmp_path):
    cluster, calls = analysis
    with pytest.raises(ConfigError, match="run r9 is not on the runs volume"):
        cluster.compare(["r1", "r9"], "unpatched", "patched", [], tmp_path / "rep", timeout_s=60)
    assert not [c for c in calls if c[0] in ("create", "follow")] and not (tmp_path / "rep").exists()


def test_a_comparison_waits_for_no_run_and_needs_the_analysis_in_the_release(analysis, tmp_path):
    cluster, calls = analysis
    cluster.batch.list_namespaced_job = lambda ns, label_selector: NS(items=[
        NS(metadata=NS(name="rmq-run-1"), status=NS(active=1))])
    with pytest.raises(HarnessError, match="a run is going.*rmq-run-1"):
        cluster.compare(["r1"], "unpatched", "patched", [], tmp_path / "rep", timeout_s=60)
    cluster.batch.list_namespaced_cron_job = lambda ns, label_selector: NS(items=[])
    with pytest.raises(ConfigError, match="no comparison in the cluster"):
        cluster.compare(["r1"], "unpatched", "patched", [], tmp_path / "rep", timeout_s=60)
    assert not [c for c in calls if c[0] == "create"]
