"""Locust workers as pods: the Job made from the chart's PodTemplate, the fleet's plan it carries, and the
starter's decisions against a stand-in for the Kubernetes API (which objects it makes, what it waits for,
what it keeps and deletes)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import ENV_INDEX
from harness.core.errors import HarnessError
from harness.deploy.k8s import naming
from harness.deploy.k8s.workers import (
    CLIENT_LOG_DIR,
    ENV_SPEC_JSON,
    EVENTS_DIR,
    INDEX_LABEL,
    PodWorkers,
    job_manifest,
    job_name,
    owner_reference,
)
from harness.inputs import timing
from harness.inputs.catalogue import load_scenario
from harness.workload.fleet import LocustFleet, worker_command
from harness.workload.spec import MASTER, WorkloadSpec

SCENARIO = load_scenario(str(Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"))
FULL = "rmq-rocketmq-pop-harness"
RUN_ID = "20261123-230000-short-burst-ab12"
LABELS = {naming.INSTANCE: "rmq", naming.COMPONENT: naming.LOADTEST_WORKER}
TEMPLATE = {  # the shape of the chart's PodTemplate as the API returns it
    "metadata": {"name": naming.worker_template(FULL), "labels": LABELS},
    "template": {
        "metadata": {"labels": LABELS},
        "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                 "containers": [{"name": "worker", "image": "rmq-pop-harness:dev",
                                 "env": [{"name": "HOME", "value": "/tmp"}],
                                 "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}]},
    },
}


def endpoints(variant: str) -> Endpoints:
    host = f"{naming.variant_name(FULL, variant)}.ns.svc"
    return Endpoints(variant, "5.3.3", f"{host}:8081", f"{host}:8080", f"{host}:10911", f"{host}:9876",
                     f"http://{host}:5557/metrics")


class ApiException(Exception):
    def __init__(self, status: int, reason: str = "") -> None:
        super().__init__(status)
        self.status, self.reason, self.body = status, reason, ""


def pod(job: str, index: int, ip: str | None, exit_code: int | None = None) -> NS:
    terminated = NS(exit_code=exit_code) if exit_code is not None else None
    return NS(metadata=NS(name=f"{job}-{index}-x{index}z", labels={INDEX_LABEL: str(index)}, annotations={}),
              spec=NS(node_name="node-1"),
              status=NS(pod_ip=ip, phase="Running" if ip else "Pending",
                        conditions=[] if ip else [NS(type="PodScheduled", status="False", reason="Unschedulable",
                                                     message="0/1 nodes: Insufficient cpu")],
                        container_statuses=[NS(name="worker", state=NS(terminated=terminated))]))


class FakeApi:
    """Just enough of CoreV1Api and BatchV1Api: a created Job gets its pods at once, with IPs unless told."""

    def __init__(self, schedulable: bool = True) -> None:
        self.schedulable = schedulable
        self.jobs: dict[str, dict] = {}
        self.pods: dict[str, list[NS]] = {}
        self.calls: list[tuple] = []

    def sanitize_for_serialization(self, obj: object) -> object:
        return obj

    def read_namespaced_pod_template(self, name: str, ns: str) -> dict:
        if name != naming.worker_template(FULL):
            raise ApiException(404, "Not Found")
        return json.loads(json.dumps(TEMPLATE))

    def create_namespaced_job(self, ns: str, body: dict) -> None:
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        self.jobs[name] = body
        self.pods[name] = [pod(name, i, f"10.0.0.{len(self.pods) * 10 + i}" if self.schedulable else None)
                           for i in range(body["spec"]["completions"])]

    def list_namespaced_pod(self, ns: str, label_selector: str) -> NS:
        return NS(items=self.pods.get(label_selector.split("job-name=")[1], []))

    def read_namespaced_job(self, name: str, ns: str) -> NS:
        done = all(p.status.container_statuses[0].state.terminated for p in self.pods[name])
        return NS(status=NS(conditions=[NS(type="Complete", status="True")] if done else []))

    def read_namespaced_pod_log(self, name: str, ns: str, container: str) -> str:
        return f"log of {name}\n"

    def delete_namespaced_job(self, name: str, ns: str, propagation_policy: str) -> None:
        self.calls.append(("delete", name, propagation_policy))
        if self.jobs.pop(name, None) is None:
            raise ApiException(404, "Not Found")
        self.pods.pop(name)


@pytest.fixture
def api(monkeypatch) -> FakeApi:
    import kubernetes.client
    import kubernetes.client.exceptions

    fake = FakeApi()
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", lambda _api: fake)
    monkeypatch.setattr(kubernetes.client, "BatchV1Api", lambda _api: fake)
    monkeypatch.setattr(kubernetes.client.exceptions, "ApiException", ApiException)
    return fake


def starter(api: FakeApi, **kw) -> PodWorkers:
    return PodWorkers(FULL, "ns", "10.1.2.3", "rmq-run-abc12", "uid-123", api_client=api, log=lambda _m: None, **kw)


def fleet(tmp_path: Path, workers: PodWorkers, variants: tuple[str, ...] = ("unpatched", "patched")) -> LocustFleet:
    def out(kind: str, variant: str) -> Path:
        path = tmp_path / "archive" / kind / variant
        path.mkdir(parents=True, exist_ok=True)
        return path

    return LocustFleet(RUN_ID, SCENARIO, [endpoints(v) for v in variants], tmp_path / "work", out, workers,
                       log=lambda _m: None)


def test_one_indexed_job_per_variant_with_every_worker_owned_by_the_run_pod(tmp_path: Path, api: FakeApi):
    f = fleet(tmp_path, starter(api))
    metrics = f.prepare()
    assert [c[0] for c in api.calls] == ["create", "create"]
    jobs = {j["metadata"]["labels"][naming.VARIANT]: j for j in api.jobs.values()}
    assert set(jobs) == {"unpatched", "patched"}
    job = jobs["patched"]
    assert job["metadata"]["name"] == job_name(FULL, RUN_ID, "patched")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == SCENARIO.workers == 2
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] >= timing.run_time_s(SCENARIO)
    assert job["metadata"]["ownerReferences"] == [owner_reference("rmq-run-abc12", "uid-123")]
    for labels in (job["metadata"]["labels"], spec["template"]["metadata"]["labels"]):
        assert labels[naming.RUN_ID] == RUN_ID and labels[naming.VARIANT] == "patched"
        assert labels[naming.COMPONENT] == naming.LOADTEST_WORKER and labels[naming.INSTANCE] == "rmq"
    # The run's pod: each Job's pods reach their own variant's master there, on the port the fleet chose.
    [c] = spec["template"]["spec"]["containers"]
    assert c["command"] == worker_command("10.1.2.3", f.plans["patched"].master_port)
    assert f.plans["patched"].master_port != f.plans["unpatched"].master_port
    # Every pod's metrics at its own IP, on the port its spec serves them on.
    addresses = [a for v in ("patched", "unpatched") for a in metrics[v].values()]
    assert set(metrics["patched"]) == {"worker-1", "worker-2"} and len(set(addresses)) == 4
    assert all(a.endswith(f":{naming.WORKER_PORT_BASE}") and a.startswith("10.0.0.") for a in addresses)


def test_each_pod_is_the_worker_its_index_names_with_the_variants_spec(tmp_path: Path, api: FakeApi, monkeypatch):
    f = fleet(tmp_path, starter(api))
    f.prepare()
    job = next(j for j in api.jobs.values() if j["metadata"]["labels"][naming.VARIANT] == "unpatched")
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HOME"] == "/tmp"  # the template's own env is kept
    monkeypatch.setenv(ENV_SPEC_JSON, env[ENV_SPEC_JSON])
    monkeypatch.setenv(ENV_INDEX, "1")
    got = WorkloadSpec.from_env()
    assert got.worker == "worker-2" and got.variant == "unpatched" and got.run_id == RUN_ID
    assert got.scenario.model_dump() == SCENARIO.model_dump() and got.endpoints == endpoints("unpatched")
    # Its files on its own disk, sent to the master at the end; metrics on all of the pod's addresses.
    assert got.ship_files and got.events_dir == EVENTS_DIR and got.client_log_dir == CLIENT_LOG_DIR
    assert (got.metrics_host, got.metrics_port) == ("0.0.0.0", naming.WORKER_PORT_BASE)
    monkeypatch.setenv(ENV_INDEX, "0")
    assert WorkloadSpec.from_env().worker == "worker-1"
    # The master stays in the run's pod and takes the workers' files into the run's directories.
    master = f._spec(endpoints("unpatched"), MASTER)
    assert master.ship_files and master.events_dir == tmp_path / "work" / "locust" / "unpatched" / "events"


def test_workers_whose_specs_differ_beyond_their_name_cannot_share_a_job(tmp_path: Path, api: FakeApi):
    f = fleet(tmp_path, starter(api))
    f.prepare()
    plan = f.plans["patched"]
    specs = dict(plan.specs)
    specs["worker-2"] = specs["worker-2"].replace('"metrics_port":9100', '"metrics_port":9101')
    with pytest.raises(HarnessError, match="worker-2's differs beyond its name"):
        job_manifest(TEMPLATE, type(plan)(**{**plan.__dict__, "specs": specs}), "j", "ns", None)


def test_job_names_fit_the_pod_hostname_and_differ_per_run_and_variant():
    long_full = "x" * 63
    names = {job_name(long_full, r, v) for r in ("run-1", "run-2") for v in ("unpatched", "patched")}
    assert len(names) == 4 and all(len(n) <= 47 for n in names)


def test_pods_that_never_start_fail_the_run_naming_the_worker_and_why(tmp_path: Path, api: FakeApi):
    api.schedulable = False
    with pytest.raises(HarnessError, match=r"worker-1: pod .* Pending \(Unschedulable: 0/1 nodes: Insufficient cpu\)"):
        fleet(tmp_path, starter(api, start_timeout_s=0.5), variants=("patched",)).prepare()


def test_a_missing_pod_template_says_to_upgrade_the_chart(tmp_path: Path, api: FakeApi):
    workers = PodWorkers("other-release", "ns", "10.1.2.3", "p", "u", api_client=api, log=lambda _m: None)
    with pytest.raises(HarnessError, match="no worker PodTemplate other-release-loadtest-worker"):
        fleet(tmp_path, workers).prepare()
    assert api.calls == []


def test_stop_keeps_each_pods_log_and_where_it_ran_then_deletes_the_jobs_once(tmp_path: Path, api: FakeApi):
    workers = starter(api)
    f = fleet(tmp_path, workers)
    f.prepare()
    patched_job = workers.jobs["patched"]
    assert workers.running("patched")
    api.pods[patched_job][0].status.container_statuses[0].state.terminated = NS(exit_code=0)
    api.pods[patched_job][1].status.container_statuses[0].state.terminated = NS(exit_code=1)
    assert not workers.running("patched")
    assert workers.exit_codes("patched") == {"worker-1": 0, "worker-2": 1}
    ip = api.pods[patched_job][1].status.pod_ip
    workers.stop()
    workers.stop()
    deletes = [c for c in api.calls if c[0] == "delete"]
    assert sorted(c[1] for c in deletes) == sorted(workers.jobs.values()) and api.jobs == {}
    logs = tmp_path / "archive" / "logs" / "patched"
    assert (logs / "locust-worker-2.log").read_text() == f"log of {patched_job}-1-x1z\n"
    record = json.loads((logs / "workers.json").read_text())
    assert record["job"] == patched_job
    assert record["workers"]["worker-2"] == {"pod": f"{patched_job}-1-x1z", "node": "node-1", "ip": ip,
                                             "phase": "Running", "exit_code": 1}
    # What went wrong names the pod, also after the Job is gone.
    assert workers.where("patched", "worker-2") == f"pod {patched_job}-1-x1z"


def test_a_fleet_whose_worker_pod_sent_nothing_names_the_worker_and_its_pod(tmp_path: Path, api: FakeApi):
    workers = starter(api)
    f = fleet(tmp_path, workers, variants=("patched",))
    f.prepare()
    from harness.workload import shipping
    from harness.workload.fleet import LocustGroup

    shards = tmp_path / "work" / "locust" / "patched" / "events"
    (shards / "worker-1-0000.parquet").write_bytes(b"x")
    shipping.receipt(shards, "worker-1").write_text("[]")
    (shards / "worker-2-0000.parquet").write_bytes(b"x")  # a part of it, but no receipt
    f.groups = [LocustGroup("patched", 0, ("worker-1", "worker-2"), {}, shards, tmp_path / "logs")]
    job = workers.jobs["patched"]
    with pytest.raises(HarnessError, match=rf"patched: worker-2 \(pod {job}-1-x1z\) sent no events"):
        f._check()
