import re
from pathlib import Path

import pytest
import yaml

from harness.core.errors import ConfigError
from harness.inputs import needs, timing
from harness.inputs.catalogue import SCENARIO_DIR, load_scenario
from harness.inputs.scenario import parse_scenario

BASE = {
    "name": "s",
    "topics": [{"name": "T"}],
    "groups": [{"name": "G", "topic": "T"}],
    "produce": {"pattern": "burst", "count": 4},
}


def _with(**changes):
    doc = {**BASE}
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = doc
        for p in path:
            node[p] = dict(node.get(p, {}))
            node = node[p]
        node[last] = value
    return doc


@pytest.mark.parametrize("name", ["burst", "steady"])
def test_shipped_scenarios_load(name):
    s = load_scenario(name)
    assert s.name == name and s.protocol == "grpc" and s.retry_topic == "v1"
    assert s.consume.invisible_s >= 10 and 5 <= s.consume.long_poll_s <= 20
    assert needs.broker_overrides(s) == {"enableRetryTopicV2": False, "enableNotifyBeforePopCalculateLag": False}


def test_burst_is_the_seed_case():
    s = load_scenario("burst")
    assert s.produce.pattern == "burst" and s.produce.count == 32
    assert s.nack.attempts == [1] and s.nack.how == "change_invisible"


@pytest.mark.parametrize(
    "doc, needle",
    [
        (_with(colour="red"), "colour: unknown field"),
        (_with(consume__invisible_s=5), "consume.invisible_s: 5 under the gRPC proxy's minimum of 10 s"),
        (_with(consume__long_poll_s=30), "consume.long_poll_s: 30 outside the gRPC proxy's range 5..20 s"),
        (_with(consume__long_poll_s=2), "range 5..20 s"),
        (_with(produce__count=-1), "produce.count: Input should be greater than or equal to 0"),
        (_with(produce__pattern="sine"), "produce.pattern"),
        (_with(groups=[{"name": "G", "topic": "Other"}]), "groups.0.topic: 'Other' is not one of topics (T)"),
        (_with(groups=[{"name": "G", "topic": "T", "consumers": 0}]), "groups.0.consumers"),
        (_with(nack__attempts=[0]), "nack.attempts.0"),
        (_with(nack__how="drop"), "nack.how"),
        (_with(topics=[{"name": "A+B"}]), "topics.0.name"),
        (_with(protocol="amqp"), "protocol"),
        (_with(workers=0), "workers"),
    ],
)
def test_bad_scenarios_name_the_field(doc, needle):
    with pytest.raises(ConfigError) as e:
        parse_scenario(doc, "x.yaml")
    assert str(e.value).startswith("x.yaml: ")
    assert needle in str(e.value)
    assert "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_v2_retry_topics_set_the_broker():
    assert needs.broker_overrides(parse_scenario(_with(retry_topic="v2")))["enableRetryTopicV2"] is True
    observed = needs.broker_overrides(parse_scenario(_with(observer_effect=True)))
    assert observed["enableNotifyBeforePopCalculateLag"] is True


def test_missing_file_lists_builtins(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"no such scenario file \(built-in scenarios: .*burst, .*steady"):
        load_scenario(str(tmp_path / "none.yaml"))


def test_cli_rejects_bad_scenario_before_starting_anything(tmp_path: Path, capsys):
    from harness.cli.main import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\ntopics: [{name: T}]\ngroups: [{name: G, topic: T}]\n"
                   "produce: {pattern: burst}\nconsume: {invisible_s: 3}\n")
    runs = tmp_path / "runs"
    assert main(["run", "--scenario", str(bad), "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "consume.invisible_s" in err and "minimum of 10 s" in err
    assert not runs.exists()  # nothing started, nothing written


def test_cycles_default_to_one_and_the_burst_runs_many():
    assert parse_scenario(BASE).cycles.count == 1
    burst = load_scenario("burst")
    assert burst.drains and burst.cycles.count == 0 and burst.cycles.spacing == "drained"
    # Locust may run until the last cycle started before its cap (it runs to 8 cycles) has drained or timed out.
    assert timing.run_time_s(burst) == burst.produce.delay_s + burst.cycles.cap_s + burst.cycles.drain_timeout_s + \
        burst.cycles.settle_s


def test_steady_traffic_cannot_drain():
    doc = _with(produce__pattern="steady", produce__rate=5, cycles={"spacing": "drained"})
    with pytest.raises(ConfigError, match="cycles.spacing: steady traffic never drains"):
        parse_scenario(doc, "s.yaml")
    # the sending window, then the drain phase (defaults: 3 s delay, 60 s of sends, 60 s drain timeout)
    assert timing.run_time_s(parse_scenario(_with(produce__pattern="steady", cycles={"spacing": 10}))) == 3 + 60 + 60


def test_a_variant_setting_against_the_scenario_is_named():
    s = load_scenario("burst")
    assert needs.conflicts(s, {"enableRetryTopicV2": True}) == ["enableRetryTopicV2=true (the scenario needs false)"]
    assert needs.conflicts(s, {"enableRetryTopicV2": "false", "other": 1}) == []
    assert s.source.endswith("workloads/scenarios/burst.yaml")


def test_expectations_are_parsed_and_bad_ones_named_by_file_and_field(tmp_path):
    s = parse_scenario({**BASE, "expect": ["wakeup_ms.p50 < 1000", "ledger.lost == 0"]}, "x.yaml")
    assert [str(e) for e in s.expectations] == ["wakeup_ms.p50 < 1000", "ledger.lost == 0"]
    with pytest.raises(ConfigError, match=r"^x.yaml: expect.1: unknown metric 'ledger.lostt'"):
        parse_scenario({**BASE, "expect": ["ledger.lost == 0", "ledger.lostt == 0"]}, "x.yaml")
    with pytest.raises(ConfigError, match=r"^x.yaml: expect.0: 'wakeup fast' is not '<metric> <op> <number>'"):
        parse_scenario({**BASE, "expect": ["wakeup fast"]}, "x.yaml")


def test_every_built_in_scenario_says_where_it_comes_from_and_what_a_correct_broker_shows():
    from harness.inputs.catalogue import load_scenarios

    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        for s in load_scenarios(str(path)):
            assert s.reference and s.expect, f"{path.name}: needs reference: and expect:"


def test_a_fraction_of_messages_is_nacked_the_same_everywhere():
    nack = parse_scenario(_with(nack={"attempts": [1], "fraction": 0.1})).nack
    picked = [nack.applies(1, f"worker-1-m{i}") for i in range(5000)]
    assert 0.08 < sum(picked) / len(picked) < 0.12
    assert picked == [nack.applies(1, f"worker-1-m{i}") for i in range(5000)]  # a hash, not a draw
    assert not any(nack.applies(2, f"worker-1-m{i}") for i in range(100))  # only the listed attempts


def test_expectations_are_checked_against_a_summary_row():
    from harness.inputs.expectations import evaluate

    row = {"ledger": {"lost": 0, "cross_topic": 3}, "wakeup_ms": {"n": 0, "p50": None}, "redelivery_ms": {"p90": "inf"}}
    out = evaluate(["ledger.lost == 0", "ledger.cross_topic == 0", "wakeup_ms.p50 < 1000",
                    "redelivery_ms.p90 < 5000"], row)
    assert [c["status"] for c in out["checks"]] == ["met", "failed", "no data", "failed"]
    assert (out["met"], out["failed"], out["no_data"]) == (1, 2, 1)
    assert out["checks"][1]["value"] == 3


def test_a_check_reads_as_one_short_line():
    from harness.inputs.expectations import describe

    assert describe({"rule": "wakeup_ms.p50 < 1000", "status": "failed", "value": 14454.82}) == \
        "wakeup_ms.p50 < 1000 (failed: 14455)"
    assert describe({"rule": "ledger.lost == 0", "status": "failed", "value": 3.0}) == "ledger.lost == 0 (failed: 3)"
    assert describe({"rule": "pickup_ms.p50 < 5", "status": "no data", "value": None}) == "pickup_ms.p50 < 5 (no data)"
    assert describe({"rule": "redelivery_ms.p90 < 5", "status": "failed", "value": float("inf")}).endswith("inf)")


def test_probe_counters_become_metrics_of_the_scenario_groups_only():
    from harness.inputs.expectations import parse, probe_counts

    samples = [
        {"name": "rmq_probe_pop_wakeups_total", "topic": "T", "group": "A", "cause": "retry_other", "value": 3.0},
        {"name": "rmq_probe_pop_empty_wakeups_total", "topic": "T", "group": "A", "cause": "retry_other", "value": 2.0},
        {"name": "rmq_probe_pop_wakeups_total", "topic": "T", "group": "B", "cause": "retry_owner", "value": 5.0},
        {"name": "rmq_probe_pop_wakeups_total", "topic": "x", "group": "readiness", "cause": "message", "value": 9.0},
        {"name": "rmq_probe_pop_retry_reads_total", "topic": "T", "group": "A", "read": "v1", "value": 6.0},
        {"name": "rmq_probe_pop_retry_reads_total", "topic": "T", "group": "A", "read": "v2", "value": 4.0},
        {"name": "rmq_probe_pop_suspends_unread_retry_total", "topic": "T", "group": "A", "read": "v1", "value": 3.0},
        {"name": "rmq_probe_pop_suspends_unread_retry_total", "topic": "x", "group": "readiness", "read": "v1",
         "value": 7.0},
    ]
    p = probe_counts(samples, ["A", "B"])
    assert (p["retry_other"], p["empty_retry_other"], p["retry_owner"], p["message"]) == (3, 2, 5, 0)
    assert (p["wakeups"], p["empty_wakeups"]) == (8, 2)
    assert (p["retry_reads_v1"], p["retry_reads_v2"], p["suspends_unread_retry"]) == (6, 4, 3)
    assert parse("probe.retry_other == 0").metric == "probe.retry_other"


def test_tag_filters_decide_whom_a_message_is_owed_to():
    doc = {**BASE, "groups": [{"name": "A", "topic": "T", "tags": "TagA"},
                              {"name": "B", "topic": "T", "tags": "TagB||TagC"},
                              {"name": "M", "topic": "T", "consumers": 2, "consumer_tags": ["TagA", "TagC"]}],
           "produce": {"pattern": "burst", "tags": ["TagA", "TagB", "TagC"]}}
    s = parse_scenario(doc)
    assert [s.produce.tag(i) for i in range(4)] == ["TagA", "TagB", "TagC", "TagA"]
    assert s.owed_groups("T", "TagA") == ["A", "M"] and s.owed_groups("T", "TagB") == ["B"]
    assert s.owed_groups("T", None) == []  # an untagged message matches no tag filter
    assert [s.groups[2].consumer_filter(i) for i in range(3)] == ["TagA", "TagC", "TagA"]
    with pytest.raises(ConfigError, match=r"groups.0.tags: String should match pattern"):
        parse_scenario({**doc, "groups": [{"name": "A", "topic": "T", "tags": "TagA|TagB"}]})


def test_a_group_that_reads_its_dlq_adds_a_reader():
    s = parse_scenario({**BASE, "groups": [{"name": "G", "topic": "T", "consumers": 2, "retry_max_times": 2,
                                            "read_dlq": True}]})
    g = s.groups[0]
    assert (g.dlq_topic, g.dlq_reader, s.consumer_count) == ("%DLQ%G", "G_dlq_reader", 3)
    assert g.dlq_reader_retry_max_times >= g.retry_max_times + 2 and s.allowed_deliveries() == {"G": 3}


def test_message_groups_go_with_fifo_topics_only():
    fifo = {**BASE, "topics": [{"name": "T", "message_type": "FIFO"}],
            "produce": {"pattern": "burst", "message_groups": 3}}
    s = parse_scenario(fifo)
    assert [s.produce.message_group(i) for i in range(4)] == ["mg0", "mg1", "mg2", "mg0"]
    with pytest.raises(ConfigError, match="produce.message_groups: 0 for the FIFO topic T"):
        parse_scenario({**fifo, "produce": {"pattern": "burst"}})
    with pytest.raises(ConfigError, match="produce.message_groups: 3 for the NORMAL topic T"):
        parse_scenario({**fifo, "topics": [{"name": "T"}]})


def test_a_series_expands_into_points_and_is_refused_as_one_scenario(tmp_path):
    from harness.inputs.catalogue import load_scenarios

    doc = {**BASE, "name": "gs", "series": {"groups": [1, 3]},
           "groups": [{"name": "Own", "topic": "T"}, {"name": "By", "topic": "T", "nacks": False}]}
    path = tmp_path / "gs.yaml"
    path.write_text(yaml.safe_dump(doc))
    one, three = load_scenarios(str(path))
    assert (one.name, [g.name for g in one.groups]) == ("gs-1", ["Own"])
    assert (three.name, [g.name for g in three.groups]) == ("gs-3", ["Own", "By", "By2"])
    assert [g.nacks for g in three.groups] == [True, False, False]
    assert three.series.of == "gs" and three.series.groups == [3]
    # A point survives the manifest's round trip (the analysis re-reads it from there).
    assert parse_scenario(three.model_dump()).groups == three.groups
    assert load_scenario(f"{path}@3") == three
    with pytest.raises(ConfigError, match=r"gs is a series of scenarios \(gs@1, gs@3\): run one point"):
        load_scenario(str(path))
    with pytest.raises(ConfigError, match=r"has no point '2' \(its numbers of groups: 1, 3\)"):
        load_scenario(f"{path}@2")
    path.write_text(yaml.safe_dump({**doc, "series": {"groups": [4, 2]}}))
    with pytest.raises(ConfigError, match=r"gs.yaml: series: groups: \[4, 2\] must be increasing"):
        load_scenarios(str(path))


def test_per_nack_probe_ratios_have_no_data_without_nacks():
    from harness.inputs.expectations import per_nack

    probe = {"retry_other": 30.0, "empty_wakeups": 33.0}
    assert per_nack(probe, 10) == {"retry_other_per_nack": 3.0, "empty_per_nack": 3.3}
    assert per_nack(probe, 0) == {"retry_other_per_nack": None, "empty_per_nack": None}


def test_remoting_has_the_brokers_limits_not_the_proxys():
    s = parse_scenario(_with(protocol="remoting", consume={"invisible_s": 5, "long_poll_s": 30}))
    assert s.protocol == "remoting" and s.consume.invisible_s == 5
    with pytest.raises(ConfigError, match="consume.invisible_s: 5 under the gRPC proxy's minimum"):
        parse_scenario(_with(consume={"invisible_s": 5}))
    doc = _with(protocol="remoting")
    doc["groups"] = [{**doc["groups"][0], "fifo": True}]
    with pytest.raises(ConfigError, match="groups.0.fifo: FIFO pop over remoting"):
        parse_scenario(doc)


def test_consumers_after_the_sends_need_a_burst():
    assert parse_scenario(_with(consume={"after_sends": True})).consume.after_sends
    steady = {"produce": {"pattern": "steady", "rate": 1}, "cycles": {"spacing": 10}}
    assert not parse_scenario(_with(**steady)).consume.after_sends
    with pytest.raises(ConfigError, match="consume.after_sends: consumers wait for the first burst's sends"):
        parse_scenario(_with(**steady, consume={"after_sends": True}))


def test_a_scenario_that_needs_one_grpc_client_runs_it_and_says_so():
    from harness.contracts.options import RunOptions
    from harness.run.plan import options_for

    with pytest.raises(ConfigError, match="consume.grpc_deadline: false is sent by the native gRPC client only"):
        parse_scenario(_with(consume={"grpc_deadline": False}))
    with pytest.raises(ConfigError, match="grpc_client: native drives gRPC scenarios only"):
        parse_scenario(_with(protocol="remoting", grpc_client="native"))
    sc = parse_scenario(_with(grpc_client="native", consume={"grpc_deadline": False}))
    said: list[str] = []
    assert options_for(sc, RunOptions(), said.append).grpc_client == "native"
    assert said == ["gRPC client: native, which scenario s needs (its grpc_client)"]
    assert options_for(sc, RunOptions(grpc_client="native"), said.append) == RunOptions(grpc_client="native")
    plain = parse_scenario(_with())
    assert options_for(plain, RunOptions(), said.append) == RunOptions() and len(said) == 1


def test_a_selection_is_declared_before_a_rule_checks_it():
    sc = parse_scenario(_with(select={"firsts": {"attempt": 1, "renamed": True}},
                              expect=["selected.firsts.deliveries == 0", "selected.firsts.messages <= 3"]))
    assert sc.select["firsts"].renamed is True
    for doc, says in (
            (_with(expect=["selected.firsts.deliveries == 0"]), "select: declares no 'firsts' (it declares none)"),
            (_with(select={"a": {"attempt": 1}}, expect=["selected.a.lost == 0"]), "selected.<name>.deliveries"),
            (_with(select={"a": {}}), "a selection names at least one attribute"),
            (_with(select={"a": {"attempt": 1, "min_attempt": 2}}), "give attempt or min_attempt, not both")):
        with pytest.raises(ConfigError, match=re.escape(says)):
            parse_scenario(doc)


def test_cycles_run_to_at_least_a_count_within_a_cap():
    sc = parse_scenario(_with(produce__count=4, cycles={"count": 0, "spacing": "drained", "at_least": 8,
                                                        "cap_s": 200}, duration_s=60))
    assert timing.starts_another(sc, 3, 59.0)  # within duration_s: always
    assert timing.starts_another(sc, 7, 61.0) and not timing.starts_another(sc, 8, 61.0)  # past it: up to 8 cycles
    assert not timing.starts_another(sc, 2, 200.0)  # the cap, however few have run
    assert timing.run_time_s(sc) == pytest.approx(sc.produce.delay_s + 200 + 60 + 1)
    plain = parse_scenario(_with(cycles={"count": 0, "spacing": "drained"}, duration_s=60))
    assert timing.starts_another(plain, 0, 59.0) and not timing.starts_another(plain, 0, 60.0)
    fixed = parse_scenario(_with(cycles={"count": 3}, duration_s=60))
    assert timing.starts_another(fixed, 2, 1e6) and not timing.starts_another(fixed, 3, 0.0)


@pytest.mark.parametrize(("cycles", "duration", "why"), [
    ({"count": 0, "spacing": "drained", "at_least": 8}, 60, "needs a cap of at least duration_s"),
    ({"count": 0, "spacing": "drained", "at_least": 8, "cap_s": 30}, 60, "needs a cap of at least duration_s"),
    ({"count": 3, "spacing": "drained", "at_least": 8, "cap_s": 100}, 60, "only for bursts"),
    ({"count": 0, "spacing": 5.0, "at_least": 8, "cap_s": 100}, 60, "only for bursts"),
    ({"count": 0, "spacing": "drained", "cap_s": 100}, 60, "a cap on at_least"),
])
def test_a_cycle_count_without_its_cap_or_on_cycles_that_do_not_drain_is_refused(cycles, duration, why):
    with pytest.raises(ConfigError, match=why):
        parse_scenario(_with(cycles=cycles, duration_s=duration))


def test_a_longer_duration_moves_the_cap_of_a_scenario_that_runs_to_a_cycle_count():
    import argparse

    from harness.cli.options import scenario_of

    sc = scenario_of(argparse.Namespace(scenario="burst", duration=300.0))
    assert sc.duration_s == 300 and sc.cycles.cap_s == 300 and sc.cycles.at_least == 8
    assert scenario_of(argparse.Namespace(scenario="burst", duration=30.0)).cycles.cap_s == 240


def test_archives_of_a_scenario_pool_across_its_run_length_and_gate_label_but_not_what_it_did():
    from spark.io import _comparable

    new = load_scenario("burst").model_dump(mode="json")
    old = {**new, "gate": False, "duration_s": 60,
           "cycles": {k: v for k, v in new["cycles"].items() if k not in ("at_least", "cap_s")}}
    assert _comparable(new) == _comparable(old)
    assert _comparable(new) != _comparable({**old, "cycles": {**old["cycles"], "settle_s": 5}})
