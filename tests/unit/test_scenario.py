from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.scenario import load_scenario, parse_scenario

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
    assert s.broker_overrides() == {"enableRetryTopicV2": False, "enableNotifyBeforePopCalculateLag": False}


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
        (_with(protocol="remoting"), "protocol"),
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
    assert parse_scenario(_with(retry_topic="v2")).broker_overrides()["enableRetryTopicV2"] is True
    assert parse_scenario(_with(observer_effect=True)).broker_overrides()["enableNotifyBeforePopCalculateLag"] is True


def test_missing_file_lists_builtins(tmp_path: Path):
    with pytest.raises(ConfigError, match="built-in scenarios: burst, burst-observed, fourgroups-v2, steady"):
        load_scenario(str(tmp_path / "none.yaml"))


def test_cli_rejects_bad_scenario_before_starting_anything(tmp_path: Path, capsys):
    from harness.cli import main

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
    # Locust may run until the last cycle started before duration_s has drained or timed out.
    assert burst.run_time_s == burst.produce.delay_s + burst.duration_s + burst.cycles.drain_timeout_s + \
        burst.cycles.settle_s


def test_steady_traffic_cannot_drain():
    doc = _with(produce__pattern="steady", produce__rate=5, cycles={"spacing": "drained"})
    with pytest.raises(ConfigError, match="cycles.spacing: steady traffic never drains"):
        parse_scenario(doc, "s.yaml")
    assert parse_scenario(_with(produce__pattern="steady", cycles={"spacing": 10})).run_time_s == 60


def test_a_variant_setting_against_the_scenario_is_named():
    s = load_scenario("burst")
    assert s.conflicts({"enableRetryTopicV2": True}) == ["enableRetryTopicV2=true (the scenario needs false)"]
    assert s.conflicts({"enableRetryTopicV2": "false", "other": 1}) == []
    assert s.source.endswith("workloads/scenarios/burst.yaml")
