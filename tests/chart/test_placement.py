"""Where each part's pods go (values placement.*): every pod of a part, including those the harness makes from
the chart's objects (a run's worker Jobs, the collector, the Spark executors), carries its part's nodeSelector,
affinity and tolerations, and nothing when none is set; the runs volume is shared only where it can be."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.contracts.workers import Placement, WorkerPlan
from harness.deploy.k8s import naming
from harness.deploy.k8s.remote import Release, collector_manifest
from harness.deploy.k8s.workers import job_manifest
from tests.chart.helm import CHART, NAMESPACE, find, one, render

TWO_NODES = "07-two-nodes-values.yaml"
PLACEMENT_KEYS = ("nodeSelector", "affinity", "tolerations")


def _pod_specs(objs: list[dict]) -> dict[str, list[dict]]:
    """Every pod spec the chart renders, by the part that places it (the executors' from their template)."""
    by_part: dict[str, list[dict]] = {p: [] for p in ("brokers", "loadtest", "analysis", "monitoring", "canary")}
    for o in objs:
        component = o["metadata"].get("labels", {}).get(naming.COMPONENT, "")
        if o["kind"] == "StatefulSet":
            by_part["brokers"].append(o["spec"]["template"]["spec"])
        elif o["kind"] == "PodTemplate":
            by_part["loadtest"].append(o["template"]["spec"])
        elif o["kind"] == "CronJob":
            part = "loadtest" if component == naming.LOADTEST else "analysis"
            by_part[part].append(o["spec"]["jobTemplate"]["spec"]["template"]["spec"])
        elif o["kind"] == "Deployment":
            part = "canary" if component == "canary" else "monitoring"
            by_part[part].append(o["spec"]["template"]["spec"])
        elif o["kind"] == "ConfigMap" and "executor-pod.yaml" in o.get("data", {}):
            by_part["analysis"].append(yaml.safe_load(o["data"]["executor-pod.yaml"])["spec"])
    return by_part


def test_nothing_is_placed_unless_values_say_where(rendered):
    for profile, objs in rendered.items():
        if profile == TWO_NODES:
            continue
        for part, specs in _pod_specs(objs).items():
            for spec in specs:
                assert not any(k in spec for k in PLACEMENT_KEYS), (profile, part)


def test_on_two_nodes_the_brokers_go_to_theirs_and_everything_that_drives_or_reads_a_run_to_the_other(rendered):
    values = yaml.safe_load((CHART / "ci" / TWO_NODES).read_text())["placement"]
    specs = _pod_specs(rendered[TWO_NODES])
    assert len(specs["brokers"]) >= 1 and len(specs["loadtest"]) == 2 and len(specs["analysis"]) == 2
    for part in ("brokers", "loadtest", "analysis", "monitoring"):
        for spec in specs[part]:
            assert spec["nodeSelector"] == values[part]["nodeSelector"], part
    assert specs["brokers"][0]["nodeSelector"] != specs["loadtest"][0]["nodeSelector"]


def test_the_pods_the_harness_makes_keep_their_parts_placement():
    """A run's worker Jobs come from the PodTemplate and the collector from the load test's CronJob
    (harness.deploy.k8s.workers, .remote): both carry the load test's placement, affinity and tolerations too."""
    toleration = "placement.loadtest.tolerations[0].key=dedicated,placement.loadtest.tolerations[0].operator=Exists"
    affinity = ("placement.loadtest.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].key=pool")
    objs = render(sets=("placement.loadtest.nodeSelector.role=load", "analysis.enabled=false", toleration, affinity,
                        "placement.loadtest.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                        ".nodeSelectorTerms[0].matchExpressions[0].operator=Exists"))
    cron = one(objs, "CronJob", f"-{naming.LOADTEST}")
    wanted = {k: cron["spec"]["jobTemplate"]["spec"]["template"]["spec"][k] for k in PLACEMENT_KEYS}
    assert wanted["nodeSelector"] == {"role": "load"} and wanted["tolerations"][0]["key"] == "dedicated"
    collector = collector_manifest(Release("rmq", NAMESPACE, cron), "rmq-collect-1")
    assert {k: collector["spec"][k] for k in PLACEMENT_KEYS} == wanted

    plan = WorkerPlan(run_id="r1", variant="patched", names=("worker-1",), master_host="10.0.0.5", master_port=1,
                      command=("true",), env={}, specs={"worker-1": "{\"worker\": \"worker-1\"}"},
                      placements={"worker-1": Placement("0.0.0.0", naming.WORKER_PORT_BASE)},
                      work=Path("/tmp/w"), logs=Path("/tmp/l"), deadline_s=600)
    job = job_manifest(one(objs, "PodTemplate"), plan, "rmq-r1-patched", NAMESPACE, None)
    assert {k: job["spec"]["template"]["spec"][k] for k in PLACEMENT_KEYS} == wanted


def test_a_volume_every_node_mounts_lets_the_load_test_and_the_comparison_go_apart():
    objs = render(sets=("loadtest.runsVolume.accessMode=ReadWriteMany", "placement.loadtest.nodeSelector.role=load",
                        "placement.analysis.nodeSelector.role=spark"))
    assert one(objs, "PersistentVolumeClaim", "-runs")["spec"]["accessModes"] == ["ReadWriteMany"]
    assert [o for o in find(objs, "CronJob") if o["spec"]["jobTemplate"]["spec"]["template"]["spec"].get(
        "nodeSelector") == {"role": "spark"}]
    # Without the comparison in the cluster nothing else mounts the volume: any placement goes.
    render(sets=("analysis.enabled=false", "placement.loadtest.nodeSelector.role=load"))
