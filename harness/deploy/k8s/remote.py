"""Driving runs in a cluster from outside it: start a run as a Job made from the release's load-test
CronJob (what `kubectl create job --from=cronjob/...` does), follow it, and copy its archive out of the
runs PersistentVolumeClaim into a local runs directory, atomically and never over an existing archive.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.contracts.options import RunOptions
from harness.core import publish
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Deadline, Pending, wait_until
from harness.deploy.k8s import naming, transfer
from harness.deploy.k8s.cluster import load_api_client
from harness.inputs.scenario import Scenario

COLLECTOR_START_S = 180  # a pod that mounts the runs volume to copy archives out


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    cronjob: dict  # the load-test CronJob as the API returns it (camelCase keys)

    @property
    def full(self) -> str:
        return self.cronjob["metadata"]["name"].removesuffix(f"-{naming.LOADTEST}")


def job_name(release_full: str, run_id: str) -> str:
    digest = hashlib.sha1(run_id.encode()).hexdigest()[:8]
    return f"{release_full[:42].rstrip('-')}-run-{digest}"


def compare_job_name(release_full: str, run_ids: Sequence[str], now_ns: int) -> str:
    digest = hashlib.sha1(f"{now_ns} {' '.join(run_ids)}".encode()).hexdigest()[:8]
    return f"{release_full[:38].rstrip('-')}-compare-{digest}"


def compare_args(run_ids: Sequence[str], baseline: str, candidate: str, out: str, rule: Sequence[str]) -> list[str]:
    """`rmq-harness compare` in the driver's pod: the archives on the runs volume, executors as pods."""
    return ["compare", *(f"{naming.RUNS_MOUNT}/{r}" for r in run_ids), "--baseline", baseline,
            "--candidate", candidate, "--master", naming.IN_CLUSTER_MASTER, "--out", out, *rule]


def compare_manifest(cronjob: dict, namespace: str, name: str, args: list[str]) -> dict:
    """A Job from the analysis CronJob's template with the comparison's arguments."""
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    spec = template["spec"]
    spec["template"]["spec"]["containers"][0]["args"] = args
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": (template.get("metadata") or {}).get(
                "labels", {}), "annotations": {"cronjob.kubernetes.io/instantiate": "manual"}},
            "spec": spec}


def run_args(run_id: str, scenario_file: str, variants: Sequence[str], options: RunOptions) -> list[str]:
    """`rmq-harness run` in the load-test pod: the release's variants, the scenario's file, the run's options."""
    args = ["--variants", naming.VARIANTS_FILE, "run", "--backend", "k8s", "--run-id", run_id,
            "--scenario", scenario_file, "--runs-dir", naming.RUNS_MOUNT]
    for v in variants:
        args += ["--variant", v]
    return args + options.as_args()


def job_manifest(release: Release, run_id: str, scenario_configmap: str, args: list[str]) -> dict:
    """A Job from the CronJob's template: the run id as a label, the run's own scenario ConfigMap, ``args``."""
    template = copy.deepcopy(release.cronjob["spec"]["jobTemplate"])
    meta = template.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), naming.RUN_ID: run_id}
    spec = template["spec"]
    pod_meta = spec["template"].setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), naming.RUN_ID: run_id}
    pod = spec["template"]["spec"]
    pod["containers"][0]["args"] = args
    for vol in pod.get("volumes") or []:
        if vol["name"] == naming.SCENARIO_VOLUME:
            vol["configMap"]["name"] = scenario_configmap
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(release.full, run_id), "namespace": release.namespace, "labels": labels,
                     "annotations": {"cronjob.kubernetes.io/instantiate": "manual"}},
        "spec": spec,
    }


def collector_manifest(release: Release, name: str) -> dict:
    """A pod like the load test's (same image, runs volume) that only waits to be copied from."""
    pod = copy.deepcopy(release.cronjob["spec"]["jobTemplate"]["spec"]["template"])
    spec = pod["spec"]
    container = spec["containers"][0]
    container["command"], container["args"] = ["sleep", "3600"], []
    container.pop("ports", None)
    spec["restartPolicy"] = "Never"
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v["name"] != naming.SCENARIO_VOLUME]
    container["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] != naming.SCENARIO_VOLUME]
    labels = {k: v for k, v in (pod.get("metadata") or {}).get("labels", {}).items() if k != naming.COMPONENT}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": release.namespace,
                         "labels": {**labels, naming.COMPONENT: "collector"}},
            "spec": spec}


class Cluster:
    """The release's load test, seen from a workstation through the current kubeconfig context."""

    def __init__(self, release: str, namespace: str, log: Callable[[str], None] = print) -> None:
        from kubernetes import client

        self.api = load_api_client()
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.log = log
        selector = f"{naming.INSTANCE}={release},{naming.COMPONENT}={naming.LOADTEST}"
        found = self.batch.list_namespaced_cron_job(namespace, label_selector=selector).items
        if not found:
            raise ConfigError(f"no load test of Helm release {release!r} in namespace {namespace!r}: "
                              "run `make deploy` first, or pass --release / --namespace")
        self.release = Release(release, namespace, self.api.sanitize_for_serialization(found[0]))

    # --- a run -----------------------------------------------------------------------------

    def variants(self) -> dict[str, dict]:
        """The release's variants as its load test reads them (the chart's `<fullname>-variants` ConfigMap): name ->
        {version, agents, ...} for a build the chart deploys, {endpoints} for a cluster of the user's."""
        from kubernetes.client.exceptions import ApiException

        name = f"{self.release.full}-variants"
        try:
            cm = self.core.read_namespaced_config_map(name, self.release.namespace)
        except ApiException as e:
            raise HarnessError(f"the release's variants (ConfigMap {name}) cannot be read: {e.reason}") from None
        return (yaml.safe_load((cm.data or {}).get("variants.yaml") or "") or {}).get("variants") or {}

    def check_variants(self, names: Sequence[str]) -> None:
        """Every name a variant of the release (a build it deploys or a cluster of the user's), before a Job."""
        known = self.variants()
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"variant {unknown[0]} is not one of release {self.release.name}'s ("
                              f"{', '.join(sorted(known)) or 'none'}); add it to the chart's values (`variants:`, "
                              "with `version:` for a build or `endpoints:` for a cluster of yours) and `make deploy`")

    def running(self) -> list[str]:
        """The release's load-test Jobs still running (one run at a time: they restart the same brokers)."""
        selector = f"{naming.INSTANCE}={self.release.name},{naming.COMPONENT}={naming.LOADTEST}"
        jobs = self.batch.list_namespaced_job(self.release.namespace, label_selector=selector).items
        return [j.metadata.name for j in jobs if j.status.active]

    def start(self, run_id: str, scenario: Scenario, variants: Sequence[str], options: RunOptions) -> str:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        ns = self.release.namespace
        busy = self.running()
        if busy:
            raise HarnessError(f"a run is already going in namespace {ns} (Job {busy[0]}): wait for it, or stop it "
                               f"with `kubectl -n {ns} delete job {busy[0]}`")
        name = job_name(self.release.full, run_id)
        scenario_cm = f"{name}-scenario"
        file = f"{scenario.name}.yaml"
        self.core.create_namespaced_config_map(ns, {
            "metadata": {"name": scenario_cm, "labels": {naming.INSTANCE: self.release.name, naming.RUN_ID: run_id}},
            "data": {file: yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)},
        })
        args = run_args(run_id, f"{naming.SCENARIO_DIR}/{file}", variants, options)
        try:
            job = self.batch.create_namespaced_job(ns, job_manifest(self.release, run_id, scenario_cm, args))
        except ApiException as e:
            self.core.delete_namespaced_config_map(scenario_cm, ns)
            raise HarnessError(f"the cluster refused the run's Job: {e.reason}: {(e.body or '')[:300]}") from None
        # The scenario's ConfigMap goes when the Job is deleted.
        owner = client.V1OwnerReference(api_version="batch/v1", kind="Job", name=job.metadata.name,
                                        uid=job.metadata.uid, block_owner_deletion=False)
        self.core.patch_namespaced_config_map(scenario_cm, ns, {"metadata": {"ownerReferences": [
            self.api.sanitize_for_serialization(owner)]}})
        self.log(f"started Job {name} in namespace {ns}")
        return name

    # --- a comparison --------------------------------------------------------------------------

    def compare(self, run_ids: Sequence[str], baseline: str, candidate: str, rule: Sequence[str], out: Path,
                timeout_s: float) -> Path:
        """`compare` as a Job of the release (a Spark driver whose executors are pods), over archives on the
        runs volume; its report copied into ``out`` (which must not exist). Returns ``out``."""
        from kubernetes.client.exceptions import ApiException

        ns = self.release.namespace
        selector = f"{naming.INSTANCE}={self.release.name},{naming.COMPONENT}={naming.ANALYSIS}"
        found = self.batch.list_namespaced_cron_job(ns, label_selector=selector).items
        if not found:
            raise ConfigError(f"Helm release {self.release.name!r} has no comparison in the cluster (analysis.enabled "
                              "is false, or the chart predates it): `make deploy`, or compare here after `k8s collect`")
        busy = self.running()
        if busy:
            # The executors need the CPU a run's workers hold, and would disturb the run's timings.
            raise HarnessError(f"a run is going in namespace {ns} (Job {busy[0]}): compare when it is over")
        cronjob = self.api.sanitize_for_serialization(found[0])
        name = compare_job_name(self.release.full, run_ids, time.time_ns())
        report = f"{naming.REPORTS_DIR}/{name}"
        with self._collector() as pod:
            have = set(self.archives_in(pod))
            missing = [r for r in run_ids if r not in have]
            if missing:
                raise ConfigError(f"run {missing[0]} is not on the runs volume of release {self.release.name} "
                                  f"(there: {', '.join(sorted(have)[-5:]) or 'nothing'}); `k8s collect` lists them")
            self._exec(pod, ["mkdir", "-p", naming.REPORTS_DIR])
            try:
                self.batch.create_namespaced_job(ns, compare_manifest(
                    cronjob, ns, name, compare_args(run_ids, baseline, candidate, report, rule)))
            except ApiException as e:
                raise HarnessError(f"the cluster refused the comparison's Job: {e.reason}: {(e.body or '')[:300]}") \
                    from None
            self.log(f"started Job {name} in namespace {ns}")
            try:
                self.follow(name, timeout_s, what="comparison")
                data = transfer.read_tree(self.core, ns, pod, self._container(), report)
            finally:
                from kubernetes import client

                self.batch.delete_namespaced_job(name, ns, body=client.V1DeleteOptions(
                    propagation_policy="Background"))
            with publish.staged(out, "report") as staging:
                transfer.unpack(data, staging)
                for f in (staging / name).iterdir():  # the report's files, not the Job's folder
                    f.rename(staging / f.name)
                (staging / name).rmdir()
            self._exec(pod, ["rm", "-rf", report])
        return out

    def follow(self, job: str, timeout_s: float, what: str = "run") -> None:
        """Print the Job's log as it goes; raise when the Job fails or runs past ``timeout_s``."""
        from kubernetes import watch

        ns = self.release.namespace
        deadline = Deadline(timeout_s)
        pod = self._job_pod(job, deadline)
        for line in watch.Watch().stream(self.core.read_namespaced_pod_log, pod, ns, follow=True,
                                         _request_timeout=timeout_s):
            self.log(line)

        def finished() -> bool | Pending:
            status = self.batch.read_namespaced_job_status(job, ns).status
            if status.failed:
                raise HarnessError(f"the {what}'s Job {job} failed; its log is above (kubectl -n {ns} logs job/{job})")
            return True if status.succeeded else Pending(f"{status.active or 0} pod(s) active")

        wait_until(f"the {what}'s Job {job} to finish", finished, deadline, interval_s=2.0)

    def _job_pod(self, job: str, deadline: Deadline) -> str:
        ns = self.release.namespace

        def started() -> str | Pending:
            pods = self.core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
            for p in pods:
                if p.status.phase in ("Running", "Succeeded", "Failed"):
                    return p.metadata.name
                waiting = [s.state.waiting for s in p.status.container_statuses or [] if s.state.waiting]
                if any(w.reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName") for w in waiting):
                    raise HarnessError(f"pod {p.metadata.name} cannot pull its image ({waiting[0].message}); "
                                       "build and load it with `make kind-up`")
            return Pending(", ".join(f"pod {p.metadata.name} {p.status.phase}" for p in pods) or "no pod")

        return wait_until(f"the Job {job} to start its pod (kubectl -n {ns} describe job/{job})", started, deadline,
                          interval_s=2.0)

    # --- archives --------------------------------------------------------------------------

    def archives(self) -> list[str]:
        """Run ids of the archives on the runs volume."""
        with self._collector() as pod:
            return self.archives_in(pod)

    def archives_in(self, pod: str) -> list[str]:
        out = self._exec(pod, ["sh", "-c", f"ls -1 {naming.RUNS_MOUNT}"])
        return sorted(n for n in out.split() if n and not n.startswith(".") and n != "lost+found")

    def fetch(self, run_ids: Sequence[str], runs_dir: Path) -> list[Path]:
        """Copy archives into ``runs_dir``; an archive already there is an error, never overwritten."""
        runs_dir = runs_dir.expanduser().resolve()
        clash = [r for r in run_ids if (runs_dir / r).exists()]
        if clash:
            raise HarnessError(f"{runs_dir / clash[0]} already exists; move it away or pass another --runs-dir")
        runs_dir.mkdir(parents=True, exist_ok=True)
        out = []
        with self._collector() as pod:
            for run_id in run_ids:
                data = transfer.read_tree(self.core, self.release.namespace, pod, self._container(),
                                          f"{naming.RUNS_MOUNT}/{run_id}")
                staging = runs_dir / f".{run_id}.partial"
                shutil.rmtree(staging, ignore_errors=True)
                if transfer.unpack(data, staging) != [run_id] or not (staging / run_id / "manifest.json").is_file():
                    shutil.rmtree(staging, ignore_errors=True)
                    raise HarnessError(f"{run_id} on the runs volume is not a complete archive (no manifest.json)")
                (staging / run_id).rename(runs_dir / run_id)
                staging.rmdir()
                out.append(runs_dir / run_id)
        return out

    def _container(self) -> str:
        return self.release.cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["name"]

    def _exec(self, pod: str, command: list[str]) -> str:
        from kubernetes.stream import stream

        own = transfer.private_core(self.core)  # why: transfer.private_core
        try:
            return stream(own.connect_get_namespaced_pod_exec, pod, self.release.namespace,
                          container=self._container(), command=command, stderr=True, stdin=False, stdout=True,
                          tty=False)
        finally:
            own.api_client.close()

    def _collector(self) -> _Collector:
        return _Collector(self)


class _Collector:
    """A short-lived pod mounting the runs volume, deleted on exit."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.name = f"{cluster.release.full[:40].rstrip('-')}-collect-{int(time.time()) % 100000}"

    def __enter__(self) -> str:
        c = self.cluster
        ns = c.release.namespace
        c.core.create_namespaced_pod(ns, collector_manifest(c.release, self.name))

        def running() -> bool | Pending:
            phase = c.core.read_namespaced_pod(self.name, ns).status.phase
            if phase in ("Failed", "Succeeded"):
                raise HarnessError(f"pod {self.name} mounting the runs volume ended ({phase}) before it ran "
                                   f"(kubectl -n {ns} describe pod)")
            return True if phase == "Running" else Pending(f"pod {phase}")

        try:
            wait_until(f"pod {self.name} mounting the runs volume to run (kubectl -n {ns} describe pod)", running,
                       COLLECTOR_START_S)
        except BaseException:
            self.__exit__()
            raise
        return self.name

    def __exit__(self, *exc: object) -> None:
        self.cluster.core.delete_namespaced_pod(self.name, self.cluster.release.namespace, grace_period_seconds=0)


def workload_status(api: object, namespace: str, release: str) -> list[tuple[str, int, int]]:
    """(kind/name, ready, wanted) of the release's StatefulSets and Deployments."""
    from kubernetes import client

    apps = client.AppsV1Api(api)
    selector = f"{naming.INSTANCE}={release}"
    out = []
    for kind, items in (("statefulset", apps.list_namespaced_stateful_set(namespace, label_selector=selector).items),
                        ("deployment", apps.list_namespaced_deployment(namespace, label_selector=selector).items)):
        for o in items:
            out.append((f"{kind}/{o.metadata.name}", o.status.ready_replicas or 0, o.spec.replicas or 0))
    return sorted(out)


def wait_ready(namespace: str, release: str, timeout_s: float, log: Callable[[str], None] = print) -> None:
    """Until every workload of the release is ready (what `helm --wait` cannot do here: the runs volume
    of a WaitForFirstConsumer storage class binds only when the first run mounts it)."""
    api = load_api_client()

    def ready() -> list[tuple[str, int, int]] | Pending:
        now = workload_status(api, namespace, release)
        if now and all(r >= w for _, r, w in now):
            return now
        return Pending(", ".join(f"{n} {r}/{w}" for n, r, w in now if r < w) or f"no workloads of release {release}")

    for name, r, w in wait_until(f"release {release}'s workloads to be ready (kubectl -n {namespace} get pods)", ready,
                                 timeout_s, interval_s=3.0):
        log(f"{name}: {r}/{w} ready")
