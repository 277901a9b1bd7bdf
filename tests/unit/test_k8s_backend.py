"""Pure parts of the k8s backend: names, broker.conf merging, run arguments, http_sd groups."""

from __future__ import annotations

from harness.cli.main import parser
from harness.contracts.options import RunOptions
from harness.deploy.base import parse_properties
from harness.deploy.k8s import naming
from harness.deploy.k8s.cluster import agent_option, merged_broker_conf
from harness.deploy.k8s.remote import job_name, run_args
from harness.deploy.readiness import agent_problems
from harness.run.observability.discovery import sd_groups
from harness.run.observability.prometheus import ScrapeTarget


def test_fullname_follows_the_chart_helper():
    assert naming.fullname("rmq") == "rmq-rocketmq-pop-harness"
    assert naming.fullname("my-rocketmq-pop-harness") == "my-rocketmq-pop-harness"
    assert naming.fullname("rmq", override="pop") == "pop"
    long = naming.fullname("x" * 70)
    assert len(long) == 63 and not long.endswith("-")


def test_endpoints_are_the_variant_service_with_rocketmq_ports():
    ep = naming.endpoints("rmq-rocketmq-pop-harness", "ns", "patched", "5.3.3", probe=True)
    assert ep.grpc == "rmq-rocketmq-pop-harness-patched.ns.svc:8081"
    assert ep.broker.endswith(":10911") and ep.namesrv.endswith(":9876")
    assert ep.metrics == "http://rmq-rocketmq-pop-harness-patched.ns.svc:5557/metrics"
    assert ep.probe.endswith(":5558/metrics")
    assert naming.endpoints("f", "ns", "v", "5.3.3", probe=False).probe == ""
    assert naming.endpoints("f", "ns", "upstream-5.4.0", "5.4.0", probe=False).grpc == "f-upstream-5-4-0.ns.svc:8081"


def test_run_overrides_win_over_the_chart_config_and_booleans_are_java_style():
    base = "enableRetryTopicV2=false\nlistenPort=10911\n# comment\n"
    text = merged_broker_conf(base, {"enableRetryTopicV2": True, "enableNotifyBeforePopCalculateLag": False})
    conf = parse_properties(text)
    assert conf == {"enableRetryTopicV2": "true", "listenPort": "10911", "enableNotifyBeforePopCalculateLag": "false"}


def test_agent_option_finds_the_jar_among_jvm_options():
    opts = "-Duser.home=/data -javaagent:/agents/pop-retry-wakeup.jar -javaagent:/agents/pop-wakeup-probe.jar=port=5558"
    assert agent_option(opts, "pop-wakeup-probe.jar")
    assert not agent_option("-Duser.home=/data", "pop-retry-wakeup.jar")


def test_run_args_are_what_the_cli_accepts():
    options = RunOptions(probe=True, order="given", keep_resources=True)
    args = parser().parse_args(run_args("20261122-090000-burst-ab12", "/etc/rmq-harness/scenario/burst.yaml",
                                         ["unpatched", "patched"], options))
    assert args.command == "run" and args.backend == "k8s"
    assert args.run_id == "20261122-090000-burst-ab12"
    assert args.variants_wanted == ["unpatched", "patched"] and args.probe
    assert str(args.variants) == naming.VARIANTS_FILE and str(args.runs_dir) == naming.RUNS_MOUNT
    assert args.grpc_client == "official"
    assert RunOptions.from_args(args) == options  # the Job's run runs as asked
    native = parser().parse_args(run_args("r", "/s.yaml", ["unpatched"], RunOptions(grpc_client="native")))
    assert native.grpc_client == "native"  # `k8s run --grpc-client native`: the run Job's workers drive it too


def test_job_names_are_unique_per_run_and_fit_a_label():
    a, b = job_name("x" * 63, "run-a"), job_name("x" * 63, "run-b")
    assert a != b and len(a) <= 63


def test_sd_groups_carry_the_local_run_labels():
    groups = sd_groups([ScrapeTarget("workers", "10.0.0.5:9100", "patched", "r1"),
                        ScrapeTarget("broker", "svc:5557", "patched", "r1")])
    assert groups[0] == {"targets": ["10.0.0.5:9100"], "labels": {"job": "workers", "variant": "patched", "run": "r1"}}
    assert groups[1]["labels"]["job"] == "broker"


def test_agent_problems_read_from_the_broker_output():
    jars = ["broker-patches/target/pop-retry-wakeup.jar", "broker-patches/target/pop-wakeup-probe.jar"]
    good = ("[pop-retry-wakeup] installed on org.apache.rocketmq.broker.longpolling.PopLongPollingService: ...\n"
            "[pop-wakeup-probe] observing ...; metrics on http://0.0.0.0:5558/metrics\n")
    assert agent_problems(good, jars) == []
    assert agent_problems("", jars[:1]) == ["pop-retry-wakeup.jar printed nothing (not loaded?)"]
    refused = "[pop-retry-wakeup] not installed: PopLongPollingService lacks topicCidMap; the broker runs unpatched\n"
    assert "not installed" in agent_problems(refused, jars[:1])[0]
    crash = good + "java.lang.NoClassDefFoundError: dev/rmqharness/patches/wakeup/RetryWakeup\n"
    assert agent_problems(crash, jars) == ["java.lang.NoClassDefFoundError: dev/rmqharness/patches/wakeup/RetryWakeup"]
