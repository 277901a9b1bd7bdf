"""What a scenario needs from the builds it asks (issue 33): broker and proxy settings, the releases it applies to,
failures it plants; and the defect table a sweep makes of its rules."""

import pytest

from harness.core.errors import ConfigError
from harness.deploy.agents import PLANT_JAR, plant_options
from harness.inputs import needs
from harness.inputs.expectations import ABSENT, NO_DATA, NOT_APPLICABLE, PRESENT, RUN_FAILED, defect, evaluate
from harness.inputs.scenario import parse_scenario
from harness.inputs.variants import parse_variants

BASE = {
    "name": "s",
    "protocol": "remoting",
    "topics": [{"name": "T"}],
    "groups": [{"name": "G", "topic": "T"}],
    "produce": {"pattern": "burst", "count": 4},
}


def _sc(**extra):
    return parse_scenario({**BASE, **extra}, "x.yaml")


def test_a_scenarios_broker_settings_join_what_it_decides_and_are_required():
    sc = _sc(broker={"popConsumerKVServiceEnable": True, "popReviveMaxAttemptTimes": 3})
    assert needs.broker_overrides(sc) == {"popConsumerKVServiceEnable": True, "popReviveMaxAttemptTimes": 3,
                                          "enableRetryTopicV2": False, "enableNotifyBeforePopCalculateLag": False}
    # A build that does not know one of its own settings cannot run it; the decided ones only when turned on.
    assert needs.required_settings(sc) == {"popConsumerKVServiceEnable", "popReviveMaxAttemptTimes"}
    assert "enableRetryTopicV2" in needs.required_settings(_sc(retry_topic="v2"))


@pytest.mark.parametrize("doc, needle", [
    ({"broker": {"enableRetryTopicV2": True}}, "broker.enableRetryTopicV2: decided by retry_topic"),
    ({"broker": {"listenPort": 1}}, "listenPort set by the harness per variant"),
    ({"proxy": {"grpcServerPort": 1}}, "grpcServerPort set by the harness per variant"),
    ({"applies": {"since": "5.5"}}, "applies.since"),
    ({"applies": {"since": "5.5.0"}}, "applies.why"),
    ({"plant": [{"method": "PopReviveService.getBizMessage", "mode": "fail"}]}, "plant.0.method"),
    ({"plant": [{"method": "a.B#m", "mode": "explode"}]}, "plant.0.mode"),
    ({"nack": {"how": "same_deadline"}, "protocol": "grpc"}, "nack.how: same_deadline"),
])
def test_bad_needs_name_the_field(doc, needle):
    with pytest.raises(ConfigError) as e:
        parse_scenario({**BASE, **doc}, "x.yaml")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_release_before_applies_since_is_not_applicable_and_says_why():
    sc = _sc(applies={"since": "5.3.2", "why": "the KV pop service is new in 5.3.2"})
    assert needs.not_applicable(sc, "5.3.2") is None and needs.not_applicable(sc, "5.10.0") is None
    assert needs.not_applicable(sc, "5.3.3-mybuild") is None
    why = needs.not_applicable(sc, "5.3.1")
    assert why == ("scenario s needs RocketMQ 5.3.2 or later (the KV pop service is new in 5.3.2); this is 5.3.1")
    assert needs.not_applicable(sc, None) is None  # an external cluster, judged once asked
    assert needs.not_applicable(_sc(), "4.9.0") is None


def test_conflicts_name_broker_and_proxy_settings_a_variant_sets_otherwise():
    sc = _sc(broker={"popConsumerKVServiceEnable": True}, proxy={"grpcConsumerThreadPoolNums": 1})
    assert needs.conflicts(sc, {"popConsumerKVServiceEnable": "true"}, {"grpcConsumerThreadPoolNums": 1}) == []
    assert needs.conflicts(sc, {"popConsumerKVServiceEnable": False}, {"grpcConsumerThreadPoolNums": 4}) == [
        "popConsumerKVServiceEnable=false (the scenario needs true)",
        "proxy grpcConsumerThreadPoolNums=4 (the scenario needs 1)"]


def test_a_plant_becomes_the_agent_mounted_first_on_every_variant(tmp_path):
    from harness.run.sequence import Run

    sc = _sc(plant=[{"method": "org.x.A#read", "mode": "fail", "calls": 3, "after_s": 20},
                    {"method": "org.x.B#write", "mode": "throw"}])
    variants = parse_variants({"variants": {
        "a": {"version": "5.3.3", "agents": [{"jar": "broker-patches/target/pop-retry-wakeup.jar"}]},
        "b": {"version": "5.4.0"}}})
    run = Run(list(variants.values()), sc, tmp_path / "runs")
    for v in run.variants:
        first = v.agents[0]
        assert first.jar == PLANT_JAR
        assert first.options == ("method=org.x.A#read,mode=fail,calls=3,skip=0,after_ms=20000,arm_file={arm_file};"
                                 "method=org.x.B#write,mode=throw,calls=1,skip=0,after_ms=0,arm_file={arm_file}")
    by_name = {v.name: [a.jar for a in v.agents] for v in run.variants}
    assert by_name["a"] == [PLANT_JAR, "broker-patches/target/pop-retry-wakeup.jar"] and by_name["b"] == [PLANT_JAR]


def test_a_plant_waits_for_its_variants_own_arm_file_which_the_backend_makes_when_the_load_starts(tmp_path):
    from harness.deploy.local import config
    from harness.deploy.local.launcher import LocalBackend
    from harness.deploy.local.ports import allocate

    sc = _sc(plant=[{"method": "org.x.B#write", "mode": "return_null", "after_s": 2}])
    [options] = [plant_options(p) for p in sc.plant]
    dirs = config.VariantDirs(tmp_path / "v1")
    [ports] = allocate(1)
    resolved = config.agent_options(options, ports, dirs)
    assert resolved == ("method=org.x.B#write,mode=return_null,calls=1,skip=0,after_ms=2000,"
                        f"arm_file={dirs.plants_armed}")
    dirs.root.mkdir()
    LocalBackend(tmp_path).arm_plants("v1")
    assert dirs.plants_armed.is_file()


def test_a_delay_plant_says_its_delay_and_thread_in_the_agents_options():
    sc = _sc(plant=[{"method": "org.apache.rocketmq.broker.pop.PopConsumerCache#cleanupRecords", "mode": "delay",
                     "delay_ms": 3000, "calls": 5, "thread": "PopConsumerCache"},
                    {"method": "org.x.B#write", "mode": "throw", "thread": "Revive Service"}])
    assert [plant_options(p) for p in sc.plant] == [
        "method=org.apache.rocketmq.broker.pop.PopConsumerCache#cleanupRecords,mode=delay,calls=5,skip=0,after_ms=0,"
        "delay_ms=3000,thread=PopConsumerCache,arm_file={arm_file}",
        "method=org.x.B#write,mode=throw,calls=1,skip=0,after_ms=0,thread=Revive Service,arm_file={arm_file}"]


@pytest.mark.parametrize("plant, needle", [
    ({"mode": "delay"}, "delay_ms: required with mode delay"),
    ({"mode": "fail", "delay_ms": 100}, "delay_ms: only for mode delay or delay_after (not mode fail)"),
    ({"mode": "delay_after"}, "delay_ms: required with mode delay_after"),
    ({"mode": "delay", "delay_ms": 0}, "plant.0.delay_ms"),
    ({"mode": "delay", "delay_ms": 600_001}, "plant.0.delay_ms"),
    ({"mode": "fail", "thread": ""}, "plant.0.thread"),
    ({"mode": "fail", "thread": "a=b"}, "plant.0.thread"),
    ({"mode": "fail", "thread": "x" * 101}, "plant.0.thread"),
])
def test_bad_delay_and_thread_plants_name_the_field(plant, needle):
    with pytest.raises(ConfigError) as e:
        _sc(plant=[{"method": "a.B#m", **plant}])
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_an_exception_plant_says_its_class_and_code_in_the_agents_options():
    mq = "org.apache.rocketmq.client.exception.MQBrokerException"
    sc = _sc(plant=[{"method": "org.apache.rocketmq.proxy.processor.ConsumerProcessor#changeInvisibleTime",
                     "mode": "fail", "exception": mq, "code": 1, "thread": "GrpcConsumerThreadPool"},
                    {"method": "org.x.B#write", "mode": "throw", "exception": "org.x.B$Failed"},
                    {"method": "org.x.B#write", "mode": "throw", "exception": "a.E", "code": -2},
                    {"method": "org.x.B#write", "mode": "fail"}])
    assert [plant_options(p) for p in sc.plant] == [
        "method=org.apache.rocketmq.proxy.processor.ConsumerProcessor#changeInvisibleTime,mode=fail,calls=1,skip=0,"
        f"after_ms=0,thread=GrpcConsumerThreadPool,exception={mq},code=1,arm_file={{arm_file}}",
        "method=org.x.B#write,mode=throw,calls=1,skip=0,after_ms=0,exception=org.x.B$Failed,arm_file={arm_file}",
        "method=org.x.B#write,mode=throw,calls=1,skip=0,after_ms=0,exception=a.E,code=-2,arm_file={arm_file}",
        "method=org.x.B#write,mode=fail,calls=1,skip=0,after_ms=0,arm_file={arm_file}"]
    assert (sc.plant[3].exception, sc.plant[3].code) == (None, None)


@pytest.mark.parametrize("plant, needle", [
    ({"mode": "false", "exception": "a.E"}, "exception: only for mode throw or fail (not mode false)"),
    ({"mode": "delay", "delay_ms": 5, "exception": "a.E"}, "exception: only for mode throw or fail (not mode delay)"),
    ({"mode": "throw", "code": 3}, "code: only with exception"),
    ({"mode": "fail", "exception": ""}, "plant.0.exception"),
    ({"mode": "fail", "exception": "1a.E"}, "plant.0.exception"),
    ({"mode": "fail", "exception": "a.E,code=3"}, "plant.0.exception"),
    ({"mode": "fail", "exception": "a.E(int)"}, "plant.0.exception"),
    ({"mode": "fail", "exception": "a.E", "code": 2**31}, "plant.0.code"),
    ({"mode": "fail", "exception": "a.E", "code": "x"}, "plant.0.code"),
])
def test_bad_exception_plants_name_the_field(plant, needle):
    with pytest.raises(ConfigError) as e:
        _sc(plant=[{"method": "a.B#m", **plant}])
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_run_refuses_a_build_older_than_the_scenario_applies_to(tmp_path):
    from harness.core.errors import NotApplicable
    from harness.run.sequence import Run

    variants = parse_variants({"variants": {"old": {"version": "5.1.4"}, "new": {"version": "5.5.0"}}})
    sc = _sc(applies={"since": "5.3.2", "why": "KV"})
    with pytest.raises(NotApplicable) as e:
        Run(list(variants.values()), sc, tmp_path / "runs")
    assert e.value.variant == "old" and "needs RocketMQ 5.3.2 or later (KV); this is 5.1.4" in str(e.value)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("rules, row, state", [
    (["ledger.lost == 0"], {"ledger": {"lost": 3}}, PRESENT),
    (["ledger.lost == 0"], {"ledger": {"lost": 0}}, ABSENT),
    (["ledger.lost == 0", "wakeup_ms.p50 < 1000"], {"ledger": {"lost": 0}}, NO_DATA),
    (["ledger.lost == 0", "wakeup_ms.p50 < 1000"], {"ledger": {"lost": 2}}, PRESENT),
    ([], {"ledger": {"lost": 0}}, NO_DATA),
])
def test_a_defect_is_present_where_a_rule_failed_and_absent_only_where_every_rule_was_met(rules, row, state):
    assert defect(evaluate(rules, row)) == state


def test_the_defect_table_marks_each_release_and_the_first_and_last_that_shows_it():
    from types import SimpleNamespace

    from spark.sweep import defect_table

    c = SimpleNamespace(scenarios={"kv": _sc(name="kv", reference="apache/rocketmq#10276",
                                             applies={"since": "5.3.2", "why": "KV"})})
    per_scenario = {"kv": {"releases": [
        {"variant": "rocketmq-5.4.0", "defect": PRESENT, "failing": ["ledger.lost == 0 (failed: 8)"]},
        {"variant": "rocketmq-5.5.0", "defect": PRESENT, "failing": ["ledger.lost == 0 (failed: 8)"]},
        {"variant": "rocketmq-5.5.1", "defect": ABSENT, "failing": []}]}}
    variants = ["rocketmq-5.1.3", "rocketmq-5.1.4", "rocketmq-5.3.3", "rocketmq-5.4.0", "rocketmq-5.5.0",
                "rocketmq-5.5.1"]
    versions = {v: v.removeprefix("rocketmq-") for v in variants}
    rows = defect_table(per_scenario, c, variants, versions, {"kv@rocketmq-5.3.3": "broker did not start"},
                        {"kv@rocketmq-5.1.4": "needs 5.3.2"})
    assert len(rows) == 1
    r = rows[0]
    assert [r["releases"][v]["state"] for v in variants] == [NOT_APPLICABLE, NOT_APPLICABLE, RUN_FAILED, PRESENT,
                                                               PRESENT, ABSENT]
    # 5.1.3 has no run and no recorded reason (a sweep drawn again from archives): the scenario's applies says.
    assert "needs RocketMQ 5.3.2 or later (KV); this is 5.1.3" in r["releases"]["rocketmq-5.1.3"]["why"]
    assert (r["first_present"], r["last_present"]) == ("5.4.0", "5.5.0")
    assert r["releases"]["rocketmq-5.1.4"]["why"] == "needs 5.3.2"


def test_the_run_says_how_many_failures_were_planted_and_warns_when_none_was():
    from harness.run.brokers import planted_line

    installed = "installed: org.x.A#read (1 overload), mode fail, calls 3, skip 0, after_ms 5000"
    report = {"pop-fault.jar": [installed, "planted failure 1/3 in org.x.A#read",
                                "planted failure 2/3 in org.x.A#read"],
              "pop-retry-wakeup.jar": ["planted failure (not this agent's line)"]}
    assert planted_line("v", report) == "v: 2 failure(s) planted (pop-fault)"
    assert planted_line("v", {"broker/pop-fault.jar": ["planted failure 1/1 in org.x.A#read"]}) == \
        "v: 1 failure(s) planted (pop-fault)"
    none = planted_line("v", {"pop-fault.jar": [installed]})
    assert none.startswith("warning: v: no failure was planted") and installed in none
    assert "printed nothing" in planted_line("v", {})
    # The line of an exception=X that could not be made is no planted failure, but the run warns about it.
    fallback = ("planted failure: cannot make a.E(String): class not found by the loader of org.x.A (app); "
                "threw RuntimeException instead")
    said = planted_line("v", {"pop-fault.jar": [installed, fallback, "planted failure 1/3 in org.x.A#read"]})
    assert said == f"v: 1 failure(s) planted (pop-fault); warning: {fallback}"
    assert planted_line("v", {"pop-fault.jar": [fallback]}).startswith("warning: v: no failure was planted")


def test_the_defect_table_as_markdown_marks_present_and_hybrids():
    from harness.report.html import defects_markdown

    facts = [{"name": "a", "version": "5.4.0", "hybrid": None},
             {"name": "b", "version": "5.5.1", "hybrid": "proxy from 5.5.0"}]
    summary = {"variants": ["a", "b"], "variant_facts": facts,
               "defects": [{"scenario": "kv", "reference": "apache/rocketmq#10276", "first_present": "5.4.0",
                            "last_present": "5.4.0", "releases": {"a": {"state": PRESENT}, "b": {"state": ABSENT}}}],
               "runs": [{"run_id": "r1"}], "not_applicable": {"kv@c": "needs 5.3.2"}, "failed_runs": {}}
    md = defects_markdown(summary)
    assert "| scenario | 5.4.0 | 5.5.1 (h) | first shows | last shows | upstream |" in md
    assert "| kv | **present** | absent | 5.4.0 | 5.4.0 | apache/rocketmq#10276 |" in md
    assert "`kv@c`: needs 5.3.2" in md and "`r1`" in md


@pytest.mark.parametrize("doc, needle", [
    ({"topics": [{"name": "T", "message_type": "PRIORITY"}]}, "produce.priorities: none for the PRIORITY topic T"),
    ({"produce": {"pattern": "burst", "priorities": [3]}}, "produce.priorities: [3] for the non-PRIORITY topic T"),
    ({"topics": [{"name": "T", "message_type": "PRIORITY"}], "produce": {"pattern": "burst", "priorities": [1]},
      "protocol": "grpc"}, "topics: a PRIORITY topic's messages carry their priority as a property"),
])
def test_priority_topics_take_priorities_over_remoting(doc, needle):
    with pytest.raises(ConfigError) as e:
        parse_scenario({**BASE, **doc}, "x.yaml")
    assert needle in str(e.value)


def test_a_priority_travels_as_the_message_property_the_broker_queues_by():
    from harness.client.remoting_driver import RemotingProducer
    from harness.client.remoting_messages import PRIORITY, decode_properties

    sc = _sc(topics=[{"name": "T", "message_type": "PRIORITY"}], produce={"pattern": "burst", "priorities": [3, 0]})
    assert [sc.produce.priority(i) for i in range(3)] == [3, 0, 3]
    producer = RemotingProducer(None, "T", 4)
    _, cmd = producer._request(b"x", None, None, 3)
    assert decode_properties(cmd.ext_fields["i"])[PRIORITY] == "3"
    _, plain = producer._request(b"x", None, None)
    assert PRIORITY not in decode_properties(plain.ext_fields["i"])


def test_a_sweep_plot_of_a_scenario_without_retries_is_drawn(tmp_path):
    # A scenario that never nacks (ack-after-extend) has no wakeup level on any release: no log axis to draw.
    from harness.report.html import _releases

    rows = [{"variant": v, "version": v, "level": None, "ci": None, "p90": None} for v in ("5.4.0", "5.5.1")]
    _releases(rows, [], "wakeup_ms", "median", tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_lag_each_run_read_reaches_the_analysis_summed_and_none_when_a_run_did_not_read_it():
    from harness.contracts.record import RunRecord
    from harness.measure.enrich import enrich

    def record(run_id, schema, **variants):
        return RunRecord.model_validate({"schema_version": schema, "run_id": run_id, "scenario": {"name": "s"},
                                         "variants": [{"name": n, "version": "5.3.3", "offsets": o}
                                                      for n, o in variants.items()]})

    older = RunRecord.model_validate({  # schema 8 kept the lag in its summary rows: read onto its variants
        "schema_version": 8, "run_id": "b", "scenario": {"name": "s"},
        "variants": [{"name": "v", "version": "5.3.3"}, {"name": "w", "version": "5.3.3"}],
        "summary": [{"variant": "v", "offsets": {"lag": 4, "groups": {"G": 4}}}, {"variant": "w"}]})
    runs = [record("a", 9, v={"lag": 16, "groups": {"G": 16}}, w={"lag": 0, "groups": {"G": 0}}), older]
    rows = enrich([{"scenario": "s", "variant": "v"}, {"scenario": "s", "variant": "w"}], runs)
    assert rows[0]["offsets"] == {"lag": 20, "groups": {"G": 20}}
    assert "offsets" not in rows[1]  # run b did not read w's lag


def test_the_run_arms_each_variants_plants_when_its_load_starts_and_a_failure_to_is_an_error():
    from types import SimpleNamespace

    from harness.core.errors import HarnessError
    from harness.run.plants import Plants

    armed, said = [], []

    class Backend:
        def arm_plants(self, name):
            if name == "broken":
                raise PermissionError("read-only file system")
            armed.append(name)

    run = SimpleNamespace(backend=Backend(), log=said.append)
    Plants().sending_started(run, "v1", 0.0)
    assert armed == ["v1"] and "v1: planted failures armed" in said[0]
    with pytest.raises(HarnessError, match="broken: the planted failures could not be armed: read-only"):
        Plants().sending_started(run, "broken", 0.0)
