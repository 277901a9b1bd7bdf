"""The design card's first use, for real: the chart installed on the Docker-less cluster across its two nodes
(the brokers on one, everything that drives or reads a run on the other: the two-node values profile), a load
test run as a Job through the k8s backend (its Locust workers pods of their own), its archive compared in the
cluster (Spark's executors as pods), and what a run relies on checked in the cluster (the agents in the
broker pods, the worker pods and every worker's events, Prometheus scraping the run, the runs volume
outliving the release)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.cli.main import main
from harness.core.paths import REPO_ROOT
from harness.deploy.k8s import naming
from harness.deploy.local import jars
from tests.chart.helm import CHART, NAMESPACE, RELEASE, helm_binary
from tools.cluster import images
from tools.cluster.layout import FIRST, NODES, SECOND

PROFILE = CHART / "ci" / "04-docker-less-values.yaml"
TWO_NODES = CHART / "ci" / "07-two-nodes-values.yaml"
# The labels the two-node profile places by (its comment: label the nodes first).
ROLES = {FIRST.name: "brokers", SECOND.name: "load"}
FULL = naming.fullname(RELEASE)
# `burst` as the chart ships it, with two workers per variant (four worker pods, two of each Job's indexes),
# half its length and half its long poll: an unpatched retry still waits for its poll to run out (10 s), which
# gives the baseline 3-4 cycles, enough for the verdict against the patched build's dozen.
WORKERS = 2
DURATION_S, LONG_POLL_S = 45, 10


def _helm(*args: str) -> str:
    out = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"helm {' '.join(args)}: {out.stderr[-2000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def release(cluster):
    lay, v1 = cluster
    jars.ensure_version("5.3.3", print)  # the version of the chart's default variants
    # What each node runs by the two-node profile: the brokers (and their agents, from the harness image) on one,
    # the load, the comparison and Prometheus on the other.
    images.load_all(lay, REPO_ROOT, "dev", {"5.3.3": jars.version_dir("5.3.3")}, print, NODES, brokers_on=[FIRST],
                    monitoring_on=[SECOND])
    for name, role in ROLES.items():
        v1.patch_node(name, {"metadata": {"labels": {"rmq-harness/role": role}}})
    _helm("upgrade", "--install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
          "--values", str(PROFILE), "--values", str(TWO_NODES), "--set", "probe.enabled=true")
    assert main(["k8s", "status", "--release", RELEASE, "--namespace", NAMESPACE, "--wait", "600"]) == 0
    return lay, v1


@pytest.fixture(scope="module")
def archive(release, tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    scenario = yaml.safe_load((REPO_ROOT / "workloads" / "scenarios" / "burst.yaml").read_text())
    scenario["workers"], scenario["duration_s"] = WORKERS, DURATION_S
    scenario["consume"]["long_poll_s"] = LONG_POLL_S
    # Three cycles at least (the fewest the verdict below can be reached on), within 90 s: burst's gate minimum
    # (at_least 8, within cap_s 240) would keep the baseline's ~12 s cycles going some 50 s past the 45.
    scenario["cycles"]["at_least"], scenario["cycles"]["cap_s"] = 3, 90
    path = tmp_path_factory.mktemp("scenario") / "burst.yaml"
    path.write_text(yaml.safe_dump(scenario))
    # Over remoting: the workers (pods) follow the name server's route to each broker's pod address; the fault
    # run below goes over gRPC, through the proxy.
    assert main(["k8s", "run", "--release", RELEASE, "--namespace", NAMESPACE, "--variant", "unpatched",
                 "--variant", "patched", "--scenario", str(path), "--probe", "--protocol", "remoting",
                 "--runs-dir", str(runs)]) == 0
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return archive


def _pods_seen(v1, selector: str, seen: dict, stop: threading.Event) -> None:
    """Every pod of the namespace that ``selector`` picks, as it was last seen running (or first seen), until
    ``stop``: the Spark executors, a run's brokers (a run's brokers are scaled to none once it is over)."""
    while not stop.is_set():
        for p in v1.list_namespaced_pod(NAMESPACE, label_selector=selector).items:
            if p.status.phase == "Running" or p.metadata.name not in seen:
                seen[p.metadata.name] = p
        stop.wait(0.5)


def test_the_verdict_on_the_cluster_is_the_fix(archive, release, tmp_path):
    """Compared where the archive is: a Spark driver Job of the release whose executors are pods reading the
    runs volume (the archive never leaves the cluster for it); the report comes back here."""
    _, v1 = release
    out = tmp_path / "report"
    seen: dict = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_pods_seen, args=(v1, "spark-role=executor", seen, stop), daemon=True)
    watcher.start()
    try:
        assert main(["k8s", "compare", archive.name, "--release", RELEASE, "--namespace", NAMESPACE,
                     "--baseline", "unpatched", "--candidate", "patched", "--out", str(out)]) == 0
    finally:
        stop.set()
        watcher.join()
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "report.html").is_file()
    [wakeup] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert summary["verdict"] == "improvement" and wakeup["verdict"] == "improvement"
    # The unit is the baseline's cycles (3 or 4 in 45 s of ~10 s stalls), not its retries.
    [base] = [v for v in summary["per_variant"] if v["variant"] == "unpatched"]
    assert wakeup["unit"] == "cycle" and wakeup["n_baseline"] == base["cycles"] >= 3
    assert wakeup["retries_baseline"] > wakeup["n_baseline"]
    # Its executors: pods of their own, the runs volume mounted read-only, owned by the driver's pod.
    running = [p for p in seen.values() if p.status.phase == "Running"]
    print("executors: " + ", ".join(f"{p.metadata.name} on {p.status.pod_ip}" for p in running))
    assert len(running) == 2
    for p in running:
        [claim] = [v for v in p.spec.volumes if v.persistent_volume_claim]
        assert claim.persistent_volume_claim.claim_name == f"{FULL}-runs"
        [mount] = [m for c in p.spec.containers for m in c.volume_mounts if m.name == claim.name]
        assert mount.mount_path == naming.RUNS_MOUNT and mount.read_only
        [owner] = p.metadata.owner_references
        assert owner.kind == "Pod" and "-compare-" in owner.name
        assert p.spec.node_name == SECOND.name
    # Nothing of the comparison is left: executors, the driver's Job and its pod.
    deadline = time.monotonic() + 60
    selector = "spark-role=executor"
    while time.monotonic() < deadline and v1.list_namespaced_pod(NAMESPACE, label_selector=selector).items:
        time.sleep(2)
    assert v1.list_namespaced_pod(NAMESPACE, label_selector=selector).items == []
    from kubernetes import client

    jobs = client.BatchV1Api(v1.api_client).list_namespaced_job(NAMESPACE).items
    assert not [j.metadata.name for j in jobs if "-compare-" in j.metadata.name]


def test_the_archive_says_which_agents_ran_and_how_far_the_clocks_were(archive):
    manifest = json.loads((archive / "manifest.json").read_text())
    by_name = {v["name"]: v for v in manifest["variants"]}
    assert any("installed" in line for line in by_name["patched"]["agent_report"]["pop-retry-wakeup.jar"])
    for v in by_name.values():
        low, high = v["clock_offset_ms"]
        # One machine, one clock: the bounds hold 0 (give or take the broker's whole milliseconds), and they are
        # tight (a loaded node widens them, so no narrower bound than that is asserted).
        assert low <= 1 and high >= -1 and high - low < 50, (low, high)
        assert any("observing" in line for line in v["agent_report"]["pop-wakeup-probe.jar"])
    assert (archive / "probe" / "patched.prom").read_text().startswith("# HELP rmq_probe_pop_wakeups_total")


def test_the_workers_ran_as_pods_and_every_ones_events_came_back(archive, release):
    _, v1 = release
    names = [f"worker-{i}" for i in range(1, WORKERS + 1)]
    pods = set()
    for variant in ("unpatched", "patched"):
        record = json.loads((archive / "logs" / variant / "workers.json").read_text())
        print(f"{variant}: Job {record['job']}: " + ", ".join(f"{w} {r['pod']} on {r['ip']}"
                                                              for w, r in record["workers"].items()))
        assert sorted(record["workers"]) == names
        for worker, r in record["workers"].items():
            assert r["pod"].startswith(f"{record['job']}-") and r["exit_code"] == 0 and r["phase"] == "Succeeded"
            assert r["node"] == SECOND.name  # the load's node, away from the brokers it measures
            # Its own Locust log, read from the pod before it went.
            assert "Starting Locust" in (archive / "logs" / variant / f"locust-{worker}.log").read_text()
            pods.add(r["pod"])
        ev = pd.read_parquet(archive / "events" / f"{variant}.parquet")
        assert sorted(ev.worker.unique()) == names, variant
        # This run goes over remoting: the project's own codec writes no client log (the gRPC client's, shipped
        # back from the pods the same way, are checked in the fault run's archive).
        client = archive / "logs" / variant / "client"
        assert not (client.is_dir() and any(client.iterdir())), variant
    assert len(pods) == 2 * WORKERS
    # Nothing of them is left once the run is over.
    selector = f"{naming.RUN_ID}={archive.name},{naming.COMPONENT}={naming.LOADTEST_WORKER}"
    from kubernetes import client

    batch = client.BatchV1Api(v1.api_client)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (v1.list_namespaced_pod(NAMESPACE, label_selector=selector).items
                                           or batch.list_namespaced_job(NAMESPACE, label_selector=selector).items):
        time.sleep(2)
    assert v1.list_namespaced_pod(NAMESPACE, label_selector=selector).items == []
    assert batch.list_namespaced_job(NAMESPACE, label_selector=selector).items == []


def test_prometheus_in_the_cluster_scraped_the_run(archive, release):
    lay, _ = release
    from tools.cluster import kube_api

    run_id = archive.name
    api = kube_api.api(lay)
    try:
        path = (f"/api/v1/namespaces/{NAMESPACE}/services/http:{FULL}-prometheus:9090/proxy/api/v1/query"
                f"?query=count%20by%20(job)%20(count_over_time(up%7Brun%3D%22{run_id}%22%7D%5B1h%5D))")
        resp = api.call_api("GET", api.configuration.host + path)
        result = json.loads(resp.read())["data"]["result"]
    finally:
        api.close()
    jobs = {r["metric"]["job"] for r in result}
    assert {"workers", "broker", "probe"} <= jobs, result
    # Scraped across the nodes: Prometheus on the load's node, the brokers (and their probes) on theirs (where
    # the brokers ran: the fault run's test, as a run's brokers are scaled to none once it is over).
    _, v1 = release
    pods = v1.list_namespaced_pod(NAMESPACE).items
    prometheus = [p for p in pods if p.metadata.name.startswith(f"{FULL}-prometheus")]
    assert prometheus and {p.spec.node_name for p in prometheus} == {SECOND.name}
    # and the run kept what it read from it
    m = json.loads((archive / "manifest.json").read_text())["prometheus"]
    assert m["series"]["harness"] > 0 and m["series"]["broker_pop"] > 0


def test_faults_on_two_masters_reach_the_second_broker_the_proxy_and_the_name_server(release, tmp_path_factory):
    """The one fault run: the variant in the chart's two-master topology (a container per process: name server,
    broker, broker-b, a proxy in cluster mode), the load over gRPC, the second master SIGKILLed, the proxy and the
    name server stopped."""
    _, v1 = release
    runs = tmp_path_factory.mktemp("fault-runs")
    scenario = REPO_ROOT / "tests" / "resources" / "scenarios" / "short-faults-two-masters.yaml"
    brokers: dict = {}
    stop = threading.Event()
    # The variant's broker pods only: its worker pods carry the variant's label too (they run on the other node).
    selector = f"{naming.VARIANT}=patched,{naming.COMPONENT}=rocketmq"
    watcher = threading.Thread(target=_pods_seen, args=(v1, selector, brokers, stop), daemon=True)
    watcher.start()
    try:
        assert main(["k8s", "run", "--release", RELEASE, "--namespace", NAMESPACE, "--variant", "patched",
                     "--scenario", str(scenario), "--runs-dir", str(runs)]) == 0
    finally:
        stop.set()
        watcher.join()
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    m = json.loads((archive / "manifest.json").read_text())
    faults = {f["label"]: f for f in m["faults"]}
    print("faults: " + "; ".join(f"{k}: {f['process']} -> {f.get('back')}" for k, f in faults.items()))
    assert set(faults) == {"kill9 broker-b", "sigstop proxy 3 s", "sigstop namesrv 3 s"}
    for f in faults.values():
        assert f["error"] is None and f["started_ns"] < f["ended_ns"]
    # The kubelet started the second master's container again, in the same pod: its restart count went up by one.
    kill = faults["kill9 broker-b"]
    assert "container broker-b of pod" in kill["process"] and "-2m-0" in kill["process"]
    assert "restarts 0" in kill["process"] and "restarts 1" in kill["back"]
    assert kill["process"].split("pod ")[1].split(",")[0] == kill["back"].split("pod ")[1].split(",")[0]
    # The proxy started once (it waits for its broker's boot: it exits when none is registered at its start).
    assert "container proxy of pod" in faults["sigstop proxy 3 s"]["process"]
    assert "restarts 0" in faults["sigstop proxy 3 s"]["process"]
    assert faults["sigstop namesrv 3 s"]["window_s"] >= 3
    [s] = m["summary"]
    print(f"sent {s['sent']}, ledger {s['ledger']}")
    assert s["sent"] > 0 and s["ledger"]["owed"] == s["sent"]
    assert sum(s["ledger"][c] for c in ("acked_first", "acked_after_retry", "late", "duplicated",
                                        "dead_lettered", "lost")) == s["ledger"]["owed"]
    # None lost, and the drain did not stop waiting: a retry held by broker-b when it was killed comes back once the
    # client's route names broker-b again (up to a minute after its return), not never.
    assert s["ledger"]["lost"] == 0 and s["ledger"]["retries_never_redelivered"] == 0 and s["cycles_timed_out"] == 0
    assert {f["label"] for f in s["faults"]} == set(faults) and all(f["exposed"] is not None for f in s["faults"])
    # Over gRPC the client (rocketmq-python-client) wrote its log in the worker's pod; it came back with the events.
    assert sorted(p.name for p in (archive / "logs" / "patched" / "client").iterdir()) == ["worker-1.log"]
    # The variant's single pod made way for the topology's: one pod per variant at a time.
    pods = v1.list_namespaced_pod(NAMESPACE, label_selector=f"{naming.VARIANT}=patched").items
    assert {p.metadata.labels[naming.TOPOLOGY] for p in pods if not p.metadata.deletion_timestamp} <= {"2m"}
    # Every broker pod the run had ran on the brokers' node, apart from the load that drove them (its workers on the
    # other: the first run's test).
    ran = [p for p in brokers.values() if p.status.phase == "Running"]
    assert ran and {p.spec.node_name for p in ran} == {FIRST.name}, {p.metadata.name: p.spec.node_name for p in ran}


def test_uninstall_keeps_the_runs_volume(archive, release):
    _, v1 = release
    _helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    claims = [c.metadata.name for c in v1.list_namespaced_persistent_volume_claim(NAMESPACE).items]
    assert f"{FULL}-runs" in claims

    def brokers() -> list[str]:
        pods = v1.list_namespaced_pod(NAMESPACE).items
        return [p.metadata.name for p in pods if p.metadata.labels.get(naming.VARIANT)]

    # A broker pod just scaled down (the last run's) takes its grace period to go.
    deadline = time.monotonic() + 90
    while brokers() and time.monotonic() < deadline:
        time.sleep(2)
    assert brokers() == []
