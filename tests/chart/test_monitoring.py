"""kube-prometheus-stack's conventions (values: monitoring): PodMonitors that find what a run scrapes, the alerts
(one set of groups for the chart's Prometheus and a PrometheusRule) fired and held back by `promtool test rules`
on recorded series, and the dashboards as ConfigMaps for Grafana's sidecar."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from harness.cli.main import parser
from harness.core.paths import REPO_ROOT
from harness.deploy.k8s import naming
from harness.inputs.variants import load_variants
from tests.chart.helm import CHART, NAMESPACE, find, one, render

PROFILE = "06-kube-prometheus-stack-values.yaml"
ALERTS = ("RmqHarnessRetryWakeupSlow", "RmqHarnessRetriesWaitForAPoll", "RmqHarnessRetriesNotRedelivered",
          "RmqHarnessDeliveriesStopped", "RmqHarnessMessagesOverdue", "RmqHarnessMessagesLost",
          "RmqHarnessCrossTopicDeliveries", "RmqHarnessClientErrors")


def _meta_label(pod_label: str) -> str:
    """The discovery label Prometheus gives a pod label (every character outside [a-zA-Z0-9_] becomes _)."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in pod_label)


def _own_groups(objs: list[dict]) -> list[dict]:
    return yaml.safe_load(one(objs, "ConfigMap", "-prometheus")["data"]["alerts.yml"])["groups"]


def test_nothing_of_the_operators_is_rendered_unless_asked_for(rendered):
    for profile, objs in rendered.items():
        if profile != PROFILE:
            assert not find(objs, "PodMonitor") and not find(objs, "PrometheusRule"), profile
            assert not [o for o in objs if "-dashboard-" in o["metadata"]["name"]], profile


def test_the_pod_monitors_find_the_workers_and_every_broker_exporter_with_the_runs_labels(rendered):
    objs = rendered[PROFILE]
    workers = one(objs, "PodMonitor", "-workers")["spec"]
    template = one(objs, "PodTemplate", "-loadtest-worker")["template"]
    assert workers["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    [ep] = workers["podMetricsEndpoints"]
    assert ep["port"] in {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    # The workers' own variant/scenario/group stand; run comes from the label the run puts on its worker pods.
    assert ep["honorLabels"] and {"sourceLabels": [_meta_label(naming.RUN_ID)], "targetLabel": "run"} in \
        ep["relabelings"] and {"targetLabel": "job", "replacement": "workers"} in ep["relabelings"]
    brokers = one(objs, "PodMonitor", "-brokers")["spec"]
    pods = [s["spec"]["template"] for s in find(objs, "StatefulSet")]
    assert pods and all(brokers["selector"]["matchLabels"].items() <= p["metadata"]["labels"].items() for p in pods)
    ports = {p["name"] for pod in pods for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    monitored = {e["port"] for e in brokers["podMetricsEndpoints"]}
    # Every exporter and probe port of every topology (the profile turns the probe on), and nothing else.
    assert monitored == {p for p in ports if p.endswith(("metrics", "probe"))}
    assert {"metrics", "b-metrics", "slave-metrics", "probe"} <= monitored
    for e in brokers["podMetricsEndpoints"]:
        assert {"sourceLabels": [_meta_label(naming.VARIANT)], "targetLabel": "variant"} in e["relabelings"]
        job = "probe" if e["port"].endswith("probe") else "broker"
        assert {"targetLabel": "job", "replacement": job} in e["relabelings"]
    for o in (*find(objs, "PodMonitor"), *find(objs, "PrometheusRule")):
        assert o["metadata"]["labels"]["release"] == "kps"


def test_the_prometheus_rule_holds_the_groups_the_charts_own_prometheus_evaluates(rendered):
    for profile, objs in rendered.items():
        cfg = yaml.safe_load(one(objs, "ConfigMap", "-prometheus")["data"]["prometheus.yml"])
        assert cfg["rule_files"] == ["/etc/prometheus/alerts.yml"], profile
        assert [r["alert"] for g in _own_groups(objs) for r in g["rules"]] == list(ALERTS), profile
    objs = rendered[PROFILE]
    assert one(objs, "PrometheusRule", "-alerts")["spec"]["groups"] == _own_groups(objs)


def _rules_file(tmp_path: Path, groups: list[dict], annotations: bool = True) -> Path:
    path = tmp_path / "alerts.yml"
    if not annotations:
        groups = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
                  for g in groups]
    path.write_text(yaml.safe_dump({"groups": groups}))
    return path


def test_promtool_accepts_the_rules_and_their_templates(rendered, tmp_path: Path):
    path = _rules_file(tmp_path, _own_groups(rendered[PROFILE]))
    out = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and f"{len(ALERTS)} rules found" in out.stdout, out.stdout + out.stderr


def _series(name: str, values: str, **labels: str) -> dict:
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def _wakeups(group: str, counts: dict[str, str], **labels: str) -> list[dict]:
    """A group's retry wakeup histogram: per bucket bound, its series' values (promtool's notation, a sample a
    minute)."""
    lab = {"run": "r1", "variant": "v", "scenario": "s", "group": group, **labels}
    out = [_series("rmq_harness_retry_wakeup_seconds_bucket", v, le=le, **lab) for le, v in counts.items()]
    return [*out, _series("rmq_harness_retry_wakeup_seconds_count", counts["+Inf"], **lab)]


def _expected(alert: str, *label_sets: dict[str, str]) -> dict:
    return {"eval_time": "15m", "alertname": alert,
            "exp_alerts": [{"exp_labels": {"severity": sev, "run": "r1", "scenario": "s", **labels}}
                           for sev, labels in ((s.pop("severity"), s) for s in map(dict, label_sets))]}


def test_each_alert_fires_for_its_defect_and_not_for_a_healthy_group(rendered, tmp_path: Path):
    """Recorded series of a healthy group beside one group per defect: promtool evaluates the chart's rules over
    15 minutes and each alert names exactly its group."""
    at_once = {"0.01": "0+60x30", "1.0": "0+60x30", "5.0": "0+60x30", "20.0": "0+60x30", "+Inf": "0+60x30"}
    in_seconds = {"0.01": "0x30", "1.0": "0x30", "5.0": "0+60x30", "20.0": "0+60x30", "+Inf": "0+60x30"}
    stalled = {"0.01": "0x30", "1.0": "0x30", "5.0": "0+30x30", "20.0": "0+60x30", "+Inf": "0+60x30"}
    lab = {"run": "r1", "variant": "v", "scenario": "s"}
    series = [
        *_wakeups("ok", at_once), *_wakeups("slow", in_seconds), *_wakeups("stall", stalled),
        # Nacks everywhere; "lost" gets nothing back (neither woken nor picked up), "ok" is picked up as well.
        *(_series("rmq_harness_nacks_total", "0+10x30", group=g, **lab) for g in ("ok", "slow", "stall", "lost")),
        _series("rmq_harness_retry_pickup_seconds_count", "0+5x30", group="ok", **lab),
        _series("rmq_harness_retry_pickup_seconds_count", "0x30", group="lost", **lab),
        # Variant v sends and receives; variant "dead" sends and has received nothing for the last 25 minutes.
        _series("rmq_harness_messages_sent_total", "0+100x30", group="ok", **lab),
        _series("rmq_harness_deliveries_total", "0+160x30", group="ok", **lab),
        _series("rmq_harness_messages_sent_total", "0+100x30", **{**lab, "variant": "dead", "group": "d"}),
        _series("rmq_harness_deliveries_total", "0+5x4 20x25", **{**lab, "variant": "dead", "group": "d"}),
        # The canary's ledger: "owed" has retries overdue throughout, "ok" had one overdue for two minutes only;
        # "gone" lost one at minute 13, "ok" one at minute 3.
        _series("rmq_harness_overdue_messages", "2x30", group="owed", stage="retry", **lab),
        _series("rmq_harness_overdue_messages", "0x5 1 1 0x23", group="ok", stage="retry", **lab),
        _series("rmq_harness_lost_messages_total", "0x12 1x18", group="gone", stage="first", **lab),
        _series("rmq_harness_lost_messages_total", "0x2 1x28", group="ok", stage="first", **lab),
        # One group received another's message at minute 12; another's a long time ago.
        _series("rmq_harness_cross_topic_deliveries_total", "0x11 1x19", group="cross", **lab),
        _series("rmq_harness_cross_topic_deliveries_total", "0x1 1x29", group="ok", **lab),
        # Acks failing throughout for "err"; a burst of failures in minute 2 only for "ok".
        _series("rmq_harness_errors_total", "0+6x30", group="err", operation="ack", **lab),
        _series("rmq_harness_errors_total", "0 0 9x28", group="ok", operation="ack", **lab),
    ]
    tests = {"rule_files": [_rules_file(tmp_path, _own_groups(rendered[PROFILE]), annotations=False).name],
             "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
                 _expected("RmqHarnessRetryWakeupSlow", {"severity": "warning", "variant": "v", "group": "slow"},
                           {"severity": "warning", "variant": "v", "group": "stall"}),
                 _expected("RmqHarnessRetriesWaitForAPoll", {"severity": "warning", "variant": "v",
                                                             "group": "stall"}),
                 _expected("RmqHarnessRetriesNotRedelivered", {"severity": "critical", "variant": "v",
                                                               "group": "lost"}),
                 _expected("RmqHarnessDeliveriesStopped", {"severity": "critical", "variant": "dead"}),
                 _expected("RmqHarnessMessagesOverdue", {"severity": "warning", "variant": "v", "group": "owed",
                                                         "stage": "retry"}),
                 _expected("RmqHarnessMessagesLost", {"severity": "critical", "variant": "v", "group": "gone",
                                                      "stage": "first"}),
                 _expected("RmqHarnessCrossTopicDeliveries", {"severity": "critical", "variant": "v",
                                                              "group": "cross"}),
                 _expected("RmqHarnessClientErrors", {"severity": "warning", "variant": "v", "group": "err",
                                                      "operation": "ack"}),
             ]}]}
    path = tmp_path / "alerts-test.yml"
    path.write_text(yaml.safe_dump(tests))
    out = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_thresholds_are_the_values(tmp_path: Path):
    values = tmp_path / "values.yaml"  # a file: --set gives Helm 0.2 as a string
    values.write_text(yaml.safe_dump({"monitoring": {"prometheusRule": {
        "waitBucketSeconds": 1, "waitingShare": 0.2, "wakeupP99Seconds": 0.25, "for": "2m", "window": "10m"}}}))
    objs = render(values)
    rules = {r["alert"]: r for g in _own_groups(objs) for r in g["rules"]}
    # `le` as the workers print it: 1 -> "1.0".
    assert 'le="1.0"' in rules["RmqHarnessRetriesWaitForAPoll"]["expr"]
    assert rules["RmqHarnessRetriesWaitForAPoll"]["expr"].endswith("> 0.2")
    assert rules["RmqHarnessRetryWakeupSlow"]["expr"].endswith("> 0.25")
    # Every rate or increase over the window (the overdue gauge is read as it is).
    assert all("[10m]" in r["expr"] and "[5m]" not in r["expr"] for a, r in rules.items()
               if a != "RmqHarnessMessagesOverdue")
    # A loss and a cross-topic delivery fire at once; the others once they have held.
    assert {a for a, r in rules.items() if r.get("for") != "2m"} == {"RmqHarnessMessagesLost",
                                                                    "RmqHarnessCrossTopicDeliveries"}


def test_every_dashboard_is_a_configmap_the_sidecar_loads(rendered):
    objs = [o for o in rendered[PROFILE] if "-dashboard-" in o["metadata"]["name"]]
    files = sorted((REPO_ROOT / "dashboards").glob("*.json"))
    assert files and len(objs) == len(files)
    for f, cm in zip(files, sorted(objs, key=lambda o: o["metadata"]["name"]), strict=True):
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["labels"]["release"] == "kps"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "RocketMQ POP harness"
        assert json.loads(cm["data"][f.name]) == json.loads(f.read_text())
    # The chart's own Grafana (AGPL, off) stays off: the sidecar is the user's.
    assert not find(rendered[PROFILE], "Deployment", "-grafana")
    assert (CHART / "ci" / PROFILE).is_file()


def _canary(objs: list[dict]) -> tuple[list[str], dict]:
    deploy = one(objs, "Deployment", "-canary")["spec"]["template"]
    [c] = deploy["spec"]["containers"]
    files = yaml.safe_load(one(objs, "ConfigMap", "-canary")["data"]["variants.yaml"])
    return c["args"], files


def test_the_canary_drives_the_chart_variant_through_its_service_and_is_scraped(rendered, tmp_path: Path):
    objs = rendered[PROFILE]
    args, files = _canary(objs)
    # The command line parses as the harness's own, naming the variant of the mounted file and the scenario.
    parsed = parser().parse_args(args)
    assert parsed.command == "canary" and parsed.variant == "patched" and parsed.metrics_address == "0.0.0.0"
    assert parsed.scenario == "/etc/rmq-harness/scenario/steady.yaml"
    svc = next(s for s in find(objs, "Service") if s["metadata"]["name"].endswith("-patched"))
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    host = f"{svc['metadata']['name']}.{NAMESPACE}.svc"
    assert files["variants"]["patched"]["endpoints"] == {"namesrv": f"{host}:{ports['namesrv']}",
                                                         "proxy": f"{host}:{ports['grpc']}"}
    # The file loads as a variants file of yours: the chart's build read as a cluster the canary does not own.
    path = tmp_path / "variants.yaml"
    path.write_text(yaml.safe_dump(files))
    assert load_variants(path)["patched"].is_external
    monitor = one(objs, "PodMonitor", "-canary")["spec"]
    pod = one(objs, "Deployment", "-canary")["spec"]["template"]
    assert monitor["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert monitor["podMetricsEndpoints"][0]["port"] == "metrics"
    assert {"containerPort": 9300, "name": "metrics"} in pod["spec"]["containers"][0]["ports"]
    # Not one of the brokers' pods (the run finds those by label), not scraped as one.
    assert "rmq-harness/variant" not in pod["metadata"]["labels"]
    assert not one(objs, "PodMonitor", "-brokers")["spec"]["selector"]["matchLabels"].items() <= \
        pod["metadata"]["labels"].items()


def test_the_canary_drives_a_cluster_of_yours_by_its_endpoints(rendered):
    _, files = _canary(rendered["05-your-cluster-values.yaml"])
    assert files["variants"]["staging"]["endpoints"] == {"namesrv": "rocketmq-namesrv.rocketmq.svc:9876",
                                                         "proxy": "rocketmq-proxy.rocketmq.svc:8081",
                                                         "cluster": "DefaultCluster"}
    assert not find(rendered["01-default-values.yaml"], "Deployment", "-canary")
