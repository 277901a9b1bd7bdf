"""Every object the chart renders (and the Job and collector pod the backend makes from it) against the
Kubernetes 1.32 schemas, strictly; then the security linter over all of it and the Dockerfile."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from harness.contracts.options import RunOptions
from harness.contracts.workers import ENV_SPEC_JSON, Placement, WorkerPlan
from harness.core.paths import REPO_ROOT
from harness.deploy.k8s import naming
from harness.deploy.k8s.remote import (
    Release,
    collector_manifest,
    compare_args,
    compare_manifest,
    job_manifest,
    run_args,
)
from harness.deploy.k8s.workers import job_manifest as workers_job
from harness.deploy.k8s.workers import owner_reference
from harness.workload.fleet import WORKER_ENV, worker_command
from tests.chart.helm import NAMESPACE, PROFILES, one

SCHEMA_VERSION = "1.32"  # charts/kind/cluster.yaml runs Kubernetes 1.32.0
# Deliberate findings, each explained where it is skipped (charts/.../_helpers.tpl rph.checkovSkips).
ALLOWED_SKIPS = {"CKV_K8S_43", "CKV_K8S_15", "CKV2_K8S_6", "CKV_K8S_40", "CKV_K8S_38", "CKV_K8S_8", "CKV_K8S_9"}


def _strict(schema: object) -> object:
    """A CRD's schema as strict as kubernetes_validate's: a field it does not name is an error (the API server
    would drop it silently), except where the CRD keeps unknown fields."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the schema of the Prometheus Operator's CRDs `make k8s-tools` fetched."""
    folder = Path(os.environ.get("RMQ_HARNESS_PROM_CRDS") or Path.home() / ".cache" / "rmq-harness" / "tools" /
                  "prometheus-operator-crds-v0.85.0")
    files = sorted(folder.glob("*.yaml"))
    if not files:
        pytest.fail(f"the Prometheus Operator's CRDs are not at {folder}: run `make k8s-tools` (or set "
                    "RMQ_HARNESS_PROM_CRDS)")
    out = {}
    for f in files:
        crd = yaml.safe_load(f.read_text())
        for v in crd["spec"]["versions"]:
            schema = _strict(v["schema"]["openAPIV3Schema"])
            schema["properties"]["metadata"] = {"type": "object"}  # the API server's ObjectMeta
            out[(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])] = schema
    return out


def _validate(obj: dict) -> None:
    if obj["apiVersion"].startswith("monitoring.coreos.com/"):
        schema = _crd_schemas().get((obj["apiVersion"], obj["kind"]))
        assert schema, f"no CRD for {obj['apiVersion']} {obj['kind']}"
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(obj))
        if errors:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {'.'.join(map(str, errors[0].path))}: "
                        f"{errors[0].message}")
        return
    try:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}")


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_rendered_object_is_valid_kubernetes(profile: Path, rendered):
    objs = rendered[profile.name]
    assert len(objs) >= 20  # the whole chart: 25 objects, 22 with Grafana off
    for obj in objs:
        _validate(obj)


def test_the_crd_validator_rejects_a_misspelt_monitoring_field(rendered):
    monitor = copy.deepcopy(one(rendered["06-kube-prometheus-stack-values.yaml"], "PodMonitor", "-workers"))
    _validate(monitor)
    monitor["spec"]["podMetricEndpoints"] = monitor["spec"].pop("podMetricsEndpoints")
    with pytest.raises(pytest.fail.Exception, match="podMetricEndpoints"):
        _validate(monitor)


def test_the_validator_rejects_a_broken_object(rendered):
    sts = copy.deepcopy(one(rendered["01-default-values.yaml"], "StatefulSet", "-patched"))
    sts["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, SCHEMA_VERSION, strict=True)
    sts["spec"]["replicas"] = 1
    sts["spec"]["template"]["spec"]["containers"][0]["javaAgent"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, SCHEMA_VERSION, strict=True)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_run_job_and_collector_made_from_the_cronjob_are_valid(profile: Path, rendered):
    release = Release("rmq", NAMESPACE, one(rendered[profile.name], "CronJob", f"-{naming.LOADTEST}"))
    run_id = "20261122-101500-burst-ab12"
    job = job_manifest(release, run_id, "scenario-cm", run_args(run_id, "/etc/rmq-harness/scenario/burst.yaml",
                                                                   ["unpatched"], RunOptions()))
    _validate(job)
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"][naming.RUN_ID] == run_id
    assert any(v.get("configMap", {}).get("name") == "scenario-cm" for v in pod["spec"]["volumes"])
    collector = collector_manifest(release, "rmq-collect-1")
    _validate(collector)
    mounts = {m["mountPath"] for m in collector["spec"]["containers"][0]["volumeMounts"]}
    assert naming.RUNS_MOUNT in mounts
    assert collector["metadata"]["labels"][naming.COMPONENT] == "collector"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_the_comparison_job_and_its_executor_pod_template_are_valid(profile: Path, rendered):
    objs = rendered[profile.name]
    cron = one(objs, "CronJob", "-compare")
    job = compare_manifest(cron, NAMESPACE, "rmq-compare-1a2b3c4d",
                           compare_args(["r1"], "unpatched", "patched", f"{naming.REPORTS_DIR}/x", []))
    _validate(job)
    executor = yaml.safe_load(one(objs, "ConfigMap", "-spark")["data"]["executor-pod.yaml"])
    # Spark names the pod and fills in the image; the template must be a valid Pod once it has.
    executor["metadata"]["name"] = "rmq-harness-compare-exec-1"
    executor["metadata"]["namespace"] = NAMESPACE
    executor["spec"]["containers"][0]["image"] = job["spec"]["template"]["spec"]["containers"][0]["image"]
    _validate(executor)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_worker_job_made_from_the_pod_template_is_valid(profile: Path, rendered):
    template = one(rendered[profile.name], "PodTemplate")
    command = worker_command("10.0.0.5", 41234)
    names = ("worker-1", "worker-2", "worker-3")
    spec = '{"worker": "worker-1"}'
    plan = WorkerPlan(run_id="20261122-101500-burst-ab12", variant="patched", names=names, master_host="10.0.0.5",
                      master_port=41234, command=tuple(command), env=WORKER_ENV,
                      specs={n: spec.replace("worker-1", n) for n in names},
                      placements={n: Placement("0.0.0.0", naming.WORKER_PORT_BASE) for n in names},
                      work=Path("/tmp/w"), logs=Path("/tmp/l"), deadline_s=600)
    job = workers_job(template, plan, "rmq-rocketmq-pop-harness-workers-1a2b3c4d", NAMESPACE,
                      owner_reference("rmq-run-x", "0b6e5f7a-0000-4000-8000-000000000001"))
    _validate(job)
    pod = job["spec"]["template"]
    assert job["spec"]["completions"] == 3 and job["spec"]["completionMode"] == "Indexed"
    assert pod["metadata"]["labels"][naming.RUN_ID] == plan.run_id
    [c] = pod["spec"]["containers"]
    assert c["command"] == command and c["image"] == template["template"]["spec"]["containers"][0]["image"]
    assert {"name": ENV_SPEC_JSON, "value": spec} in c["env"]


def _checkov() -> str:
    path = os.environ.get("RMQ_HARNESS_CHECKOV") or str(
        Path.home() / ".cache" / "rmq-harness" / "tools" / "checkov-3.3.30" / "bin" / "checkov"
    )
    if not Path(path).is_file():
        pytest.fail(f"checkov not found at {path}: run `make k8s-tools` (or set RMQ_HARNESS_CHECKOV)")
    return path


def test_checkov_leaves_no_unexplained_finding(rendered, tmp_path: Path):
    # An object two profiles render alike is checked once (the profiles share most of theirs).
    seen: set[str] = set()
    for name, objs in rendered.items():
        new = [o for o in objs if (key := json.dumps(o, sort_keys=True)) not in seen and not seen.add(key)]
        (tmp_path / name).write_text(yaml.safe_dump_all(new))
    (tmp_path / "Dockerfile").write_text((REPO_ROOT / "Dockerfile").read_text())
    (tmp_path / "rocketmq").mkdir()
    (tmp_path / "rocketmq" / "Dockerfile").write_text((REPO_ROOT / "rocketmq.Dockerfile").read_text())
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"}
    out = subprocess.run(
        [_checkov(), "-d", str(tmp_path), "--framework", "kubernetes",
         "dockerfile", "--skip-download", "-o", "json"],
        capture_output=True, text=True, timeout=600, env=env,
    )
    reports = json.loads(out.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    by_type = {r["check_type"]: r for r in reports}
    assert set(by_type) == {"kubernetes", "dockerfile"}, out.stderr[-2000:]
    for kind, r in by_type.items():
        failed = [f"{c['check_id']} {c['resource']}" for c in r["results"]["failed_checks"]]
        assert failed == [], f"{kind}: {failed}"
        assert r["summary"]["parsing_errors"] == 0 and r["summary"]["passed"] > 0
        for c in r["results"]["skipped_checks"]:
            assert c["check_id"] in ALLOWED_SKIPS, c["check_id"]
            reason = c["check_result"].get("suppress_comment") or ""
            assert len(reason) > 20, f"{c['check_id']} skipped without a reason"
    assert out.returncode == 0
