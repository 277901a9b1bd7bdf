"""A run's Locust workers as pods of their own: per variant an Indexed Job of N pods made from the chart's
worker PodTemplate, so load scales with the cluster rather than with the load-test pod.

The run's pod (where each variant's master runs) creates the Jobs through the API with its own service
account, owns them (ownerReferences: deleting the run's pod deletes them) and deletes them when the run
ends however it ends. Each pod is the worker its completion index names; it reaches its master at the
run pod's IP, serves its metrics on its own IP (read from the API: the run's progress and Prometheus
scrape it there) and sends its events to the master over Locust at the end (harness.workload.shipping).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.contracts.workers import ENV_SPEC_JSON, Placement, WorkerPlan, worker_name
from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until
from harness.deploy.k8s import naming

CONTAINER = "worker"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "job-name"
# On the pod's own emptyDir (/tmp): nothing a worker writes outlives its pod but what it sends the master.
EVENTS_DIR = Path("/tmp/rmq-harness/events")
CLIENT_LOG_DIR = Path("/tmp/rmq-harness/client")
START_TIMEOUT_S = 180.0
# A finished Job the run could not delete (its pod was killed) goes by itself after this.
TTL_AFTER_FINISHED_S = 600


def job_name(full: str, run_id: str, variant: str) -> str:
    """At most 47 characters: an Indexed Job's pods are named <job>-<index>-<5 chars>, and their hostname
    <job>-<index> must fit 63."""
    digest = hashlib.sha1(f"{run_id}/{variant}".encode()).hexdigest()[:8]
    return f"{full[:30].rstrip('-')}-workers-{digest}"


def _shared_spec(plan: WorkerPlan) -> str:
    """The one spec every pod of the Job gets: the workers' specs may differ in their name only (each pod
    takes its name from its index)."""
    first = json.loads(plan.specs[plan.names[0]])
    for name in plan.names:
        spec = json.loads(plan.specs[name])
        if {**spec, "worker": first["worker"]} != first:
            raise HarnessError(f"{plan.variant}: worker pods share one spec, but {name}'s differs beyond its name")
    return plan.specs[plan.names[0]]


def job_manifest(template: dict, plan: WorkerPlan, name: str, namespace: str, owner: dict | None) -> dict:
    """The Job of one variant's workers from the chart's PodTemplate (as the API returns it, camelCase):
    N pods at once, indexed, each told the plan's command and the variant's spec; never restarted (a
    restarted worker would rejoin a run half done), and gone once the run's pod is."""
    pod_template = copy.deepcopy(template["template"])
    labels = {**(template.get("metadata") or {}).get("labels", {}), naming.RUN_ID: plan.run_id,
              naming.VARIANT: plan.variant}
    meta = pod_template.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), naming.RUN_ID: plan.run_id, naming.VARIANT: plan.variant}
    spec = pod_template["spec"]
    spec["restartPolicy"] = "Never"
    container = next(c for c in spec["containers"] if c["name"] == CONTAINER)
    container["command"] = list(plan.command)
    ours = {**plan.env, ENV_SPEC_JSON: _shared_spec(plan)}
    container["env"] = [e for e in container.get("env") or [] if e["name"] not in ours] + [
        {"name": k, "value": v} for k, v in ours.items()]
    n = len(plan.names)
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimit": 0,
                 "activeDeadlineSeconds": plan.deadline_s, "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
                 "template": pod_template},
    }


def owner_reference(pod_name: str, pod_uid: str) -> dict:
    """The run's pod as the owner: the garbage collector deletes the Jobs with it."""
    return {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}


def worker_of(pod: object) -> str | None:
    index = (pod.metadata.labels or {}).get(INDEX_LABEL) or (pod.metadata.annotations or {}).get(INDEX_LABEL)
    return worker_name(int(index) + 1) if index is not None else None


def _exit_code(pod: object) -> int | None:
    for s in pod.status.container_statuses or []:
        if s.name == CONTAINER and s.state and s.state.terminated:
            return s.state.terminated.exit_code
    return None


class PodWorkers:
    """The WorkerStarter of a run inside the chart's load-test pod."""

    master_bind = "0.0.0.0"  # the worker pods connect from other addresses
    ship_files = True

    def __init__(self, full: str, namespace: str, pod_ip: str, pod_name: str, pod_uid: str,
                 api_client: object | None = None, log: Callable[[str], None] = print,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        from kubernetes import client

        from harness.deploy.k8s.cluster import load_api_client

        self.full = full
        self.namespace = namespace
        self.master_host = pod_ip
        self.owner = owner_reference(pod_name, pod_uid)
        self.api = api_client or load_api_client()
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.log = log
        self.start_timeout_s = start_timeout_s
        self.plans: dict[str, WorkerPlan] = {}
        self.jobs: dict[str, str] = {}  # variant -> its Job
        self._pods: dict[str, dict[str, object]] = {}  # variant -> worker -> its pod, as last seen
        self._stopped = False

    def placement(self, n: int) -> Placement:
        return Placement("0.0.0.0", naming.WORKER_PORT_BASE, EVENTS_DIR, CLIENT_LOG_DIR)

    def prepare(self, plans: Sequence[WorkerPlan]) -> dict[str, dict[str, str]]:
        from kubernetes.client.exceptions import ApiException

        try:
            template = self.api.sanitize_for_serialization(
                self.core.read_namespaced_pod_template(naming.worker_template(self.full), self.namespace))
        except ApiException as e:
            raise HarnessError(f"no worker PodTemplate {naming.worker_template(self.full)} in namespace "
                               f"{self.namespace} ({e.reason}): upgrade the chart (`make deploy`)") from None
        for plan in plans:
            name = job_name(self.full, plan.run_id, plan.variant)
            self.plans[plan.variant] = plan
            try:
                self.batch.create_namespaced_job(self.namespace, job_manifest(template, plan, name, self.namespace,
                                                                              self.owner))
            except ApiException as e:
                raise HarnessError(f"{plan.variant}: the cluster refused the workers' Job {name}: {e.reason}: "
                                   f"{(e.body or '')[:300]}") from None
            self.jobs[plan.variant] = name
        return {plan.variant: self._addresses(plan) for plan in plans}

    def _list(self, variant: str) -> dict[str, object]:
        pods = self.core.list_namespaced_pod(self.namespace,
                                             label_selector=f"{JOB_NAME_LABEL}={self.jobs[variant]}").items
        found = {w: p for p in pods if (w := worker_of(p))}
        self._pods[variant] = {**self._pods.get(variant, {}), **found}
        return found

    def _addresses(self, plan: WorkerPlan) -> dict[str, str]:
        """Until every pod of the variant has its IP (it is scheduled and its sandbox is up)."""
        def addressed() -> dict[str, str] | Pending:
            pods = self._list(plan.variant)
            ips = {w: p.status.pod_ip for w, p in pods.items() if p.status.pod_ip}
            if set(ips) >= set(plan.names):
                started = ", ".join(f"{pods[w].metadata.name} ({w}, {ips[w]})" for w in plan.names)
                self.log(f"{plan.variant}: worker pods {started} of Job {self.jobs[plan.variant]}")
                port = plan.placements[plan.names[0]].metrics_port
                return {w: f"{ips[w]}:{port}" for w in plan.names}
            return Pending("; ".join(self._why_waiting(w, pods.get(w)) for w in plan.names if w not in ips))

        return wait_until(f"{plan.variant}'s worker pods to start (kubectl -n {self.namespace} describe "
                          f"job/{self.jobs[plan.variant]})", addressed, self.start_timeout_s)

    @staticmethod
    def _why_waiting(worker: str, pod: object | None) -> str:
        if pod is None:
            return f"{worker}: no pod"
        why = [f"{c.reason}: {c.message}" for c in pod.status.conditions or [] if c.status == "False" and c.message]
        return f"{worker}: pod {pod.metadata.name} {pod.status.phase}" + (f" ({why[0]})" if why else "")

    def start(self, variant: str) -> None:
        """Nothing: the pods started in prepare() and keep trying to reach their master until it listens."""

    def running(self, variant: str) -> bool:
        status = self.batch.read_namespaced_job(self.jobs[variant], self.namespace).status
        return not any(c.type in ("Complete", "Failed") and c.status == "True" for c in status.conditions or [])

    def exit_codes(self, variant: str) -> dict[str, int | None]:
        if variant in self.jobs and not self._stopped:
            self._list(variant)
        return {w: _exit_code(p) for w, p in self._pods.get(variant, {}).items()}

    def where(self, variant: str, worker: str) -> str:
        pod = self._pods.get(variant, {}).get(worker)
        return f"pod {pod.metadata.name}" if pod is not None else f"Job {self.jobs.get(variant, '?')}"

    def stop(self) -> None:
        """Keep each pod's log (locust-<worker>.log, as a worker process writes) and what ran where
        (workers.json), then delete the Jobs with their pods."""
        from kubernetes.client.exceptions import ApiException

        if self._stopped:
            return
        self._stopped = True
        for variant, job in self.jobs.items():
            try:
                self._keep(variant, job)
            except Exception as e:  # noqa: BLE001 - a log not kept must not leave pods behind
                self.log(f"{variant}: worker pods' logs not kept: {e}")
            try:
                self.batch.delete_namespaced_job(job, self.namespace, propagation_policy="Background")
            except ApiException as e:
                if e.status != 404:
                    self.log(f"{variant}: worker Job {job} not deleted ({e.reason}); it goes with this run's pod")

    def _keep(self, variant: str, job: str) -> None:
        from kubernetes.client.exceptions import ApiException

        plan = self.plans[variant]
        pods = self._list(variant)
        plan.logs.mkdir(parents=True, exist_ok=True)
        record = {}
        for worker, pod in sorted(pods.items()):
            record[worker] = {"pod": pod.metadata.name, "node": pod.spec.node_name, "ip": pod.status.pod_ip,
                              "phase": pod.status.phase, "exit_code": _exit_code(pod)}
            try:
                text = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container=CONTAINER)
            except ApiException as e:
                text = f"(log not readable: {e.reason})\n"
            (plan.logs / f"locust-{worker}.log").write_text(text)
        (plan.logs / "workers.json").write_text(json.dumps({"job": job, "workers": record}, indent=2) + "\n")
