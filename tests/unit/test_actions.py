"""Actions during a run: the scenario's admin requests, how they are validated, timed (the load's clock or a
variant's cycles), recorded, refused on a cluster the harness does not own, and shown."""

import time
from types import SimpleNamespace

import pytest

from harness.client import remoting
from harness.contracts.endpoints import Endpoints
from harness.contracts.record import RunRecord, VariantRecord
from harness.core.errors import ConfigError, HarnessError
from harness.inputs.scenario import parse_scenario
from harness.measure.enrich import enrich
from harness.run import actions as run_actions
from harness.run.hooks import Hooks
from harness.run.plan import refuse_on_external
from harness.workload.fleet import Progress
from tests.unit.by_hand import variant

BASE = {
    "name": "s",
    "topics": [{"name": "T", "queues": 2}],
    "groups": [{"name": "G", "topic": "T", "retry_max_times": 4}],
    "produce": {"pattern": "burst", "count": 4},
    "cycles": {"count": 3},
    "duration_s": 30,
}


def _scenario(*actions: dict):
    return parse_scenario({**BASE, "actions": list(actions)}, "s.yaml")


def test_actions_are_read_with_their_moments_and_labels():
    s = _scenario({"at_s": 5, "do": "reset_offset", "group": "G", "to": "time", "ago_s": 10},
                  {"at_cycle": 1, "after_s": 2, "do": "broker_config", "set": {"popCkStayBufferTime": 10001}},
                  {"at_cycle": 2, "do": "group_config", "group": "G", "consume_enabled": False},
                  {"at_s": 1, "do": "topic_queues", "topic": "T", "queues": 8},
                  {"at_s": 2, "do": "delete_topic", "topic": "T"})
    assert [(a.label, a.when) for a in s.actions] == [
        ("reset_offset G to 10 s ago", "at 5 s"),
        ("broker_config popCkStayBufferTime=10001", "cycle 1 + 2 s"),
        ("group_config G consume_enabled=false", "cycle 2"),
        ("topic_queues T = 8", "at 1 s"),
        ("delete_topic T", "at 2 s")]


@pytest.mark.parametrize(("action", "says"), [
    ({"at_s": 5, "do": "reset_offset", "group": "X", "to": "earliest"}, "actions.0.group: 'X' is not one of groups"),
    ({"at_s": 5, "do": "delete_topic", "topic": "U"}, "actions.0.topic: 'U' is not one of topics"),
    ({"at_s": 30, "do": "reset_offset", "group": "G", "to": "latest"}, "after the load's duration_s"),
    ({"at_cycle": 3, "do": "reset_offset", "group": "G", "to": "latest"}, "runs 3 cycle(s), counted from 0"),
    ({"at_s": 1, "at_cycle": 1, "do": "reset_offset", "group": "G", "to": "latest"}, "one of them"),
    ({"do": "reset_offset", "group": "G", "to": "latest"}, "one of them"),
    ({"at_s": 1, "after_s": 2, "do": "reset_offset", "group": "G", "to": "latest"}, "after_s: counts from a cycle"),
    ({"at_s": 1, "do": "reset_offset", "group": "G", "to": "time"}, "ago_s: goes with to: time"),
    ({"at_s": 1, "do": "reset_offset", "group": "G", "to": "earliest", "ago_s": 3}, "ago_s: goes with to: time"),
    ({"at_s": 1, "do": "broker_config", "set": {"listenPort": 1}}, "listenPort set by the harness"),
    ({"at_s": 1, "do": "broker_config", "set": {}}, "set"),
    ({"at_s": 1, "do": "group_config", "group": "G"}, "changes nothing"),
    ({"at_s": 1, "do": "restart_everything"}, "actions.0"),
])
def test_a_bad_action_is_refused_in_one_line_naming_it(action, says):
    with pytest.raises(ConfigError) as e:
        _scenario(action)
    text = str(e.value)
    assert "\n" not in text and text.startswith("s.yaml: actions.0") and says in text


def test_a_cluster_the_harness_does_not_own_takes_no_change_of_its_brokers_settings():
    external = variant("theirs", endpoints={"namesrv": "ns:9876", "proxy": "px:8081"})
    # Its own topics and groups (suffixed) it may change.
    refuse_on_external(external, _scenario({"at_s": 1, "do": "reset_offset", "group": "G", "to": "earliest"}), False)
    with pytest.raises(ConfigError, match="changes its brokers' settings during the load"):
        refuse_on_external(external, _scenario({"at_s": 1, "do": "broker_config", "set": {"a": 1}}), False)


def test_a_reset_answer_is_read_queue_by_queue(monkeypatch):
    # The broker's ResetOffsetBody: fastjson, MessageQueue objects as map keys.
    body = (b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:7,'
            b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:0}}')
    sent = []

    def invoke(address, cmd, timeout_s=5.0):
        sent.append((address, cmd.code, dict(cmd.ext_fields)))
        return remoting.Command(remoting.SUCCESS, {}, body=body)

    monkeypatch.setattr(remoting, "invoke", invoke)
    assert remoting.reset_offset("b:1", "G", "T", 0) == {0: 0, 1: 7}
    assert sent == [("b:1", remoting.INVOKE_BROKER_TO_RESET_OFFSET,
                     {"topic": "T", "group": "G", "queueId": "-1", "timestamp": "0", "isForce": "true"})]


def _endpoints(suffix: str = "") -> Endpoints:
    return Endpoints(variant="v1", version="5.3.3", grpc="g", remoting="r", broker="b:1", namesrv="n:1",
                     metrics="m", suffix=suffix)


def test_changes_keep_what_an_earlier_change_set_and_use_the_runs_own_names(monkeypatch):
    calls = []
    monkeypatch.setattr(remoting, "create_group", lambda broker, group, **kw: calls.append((broker, group, kw)))
    s = _scenario({"at_s": 1, "do": "group_config", "group": "G", "consume_enabled": False},
                  {"at_s": 2, "do": "group_config", "group": "G", "retry_max_times": 0})
    va = run_actions.VariantActions(_endpoints(suffix="-r1"), s)
    va.carry_out(s.actions[0])
    va.carry_out(s.actions[1])
    assert calls == [("b:1", "G-r1", {"retry_max_times": 4, "orderly": False, "consume_enable": False}),
                     ("b:1", "G-r1", {"retry_max_times": 0, "orderly": False, "consume_enable": False})]


def test_a_lite_parents_reset_is_each_lite_topics_on_its_lmq(monkeypatch):
    calls = []

    def reset(broker, group, topic, timestamp, queue_id=-1):
        calls.append((group, topic, timestamp, queue_id))
        if topic.endswith("$mg1"):
            raise remoting.RemotingError("TOPIC_NOT_EXIST")  # nothing stored for it yet
        return {0: 0}

    monkeypatch.setattr(remoting, "reset_offset", reset)
    lite = {**BASE, "protocol": "remoting", "broker": {"enableLmq": True, "enableMultiDispatch": True},
            "topics": [{"name": "T", "message_type": "LITE"}], "workers": 1,
            "produce": {"pattern": "burst", "count": 4, "message_groups": 2},
            "actions": [{"at_s": 1, "do": "reset_offset", "group": "G", "to": "earliest"}]}
    s = parse_scenario(lite, "s.yaml")
    with pytest.raises(HarnessError, match="no master reset lite topic mg1 of T for G"):
        run_actions.VariantActions(_endpoints(suffix="-r1"), s).carry_out(s.actions[0])
    assert calls == [("G-r1", "%LMQ%$T-r1$mg0", 0, 0), ("G-r1", "%LMQ%$T-r1$mg1", 0, 0)]
    monkeypatch.setattr(remoting, "reset_offset", lambda broker, group, topic, timestamp, queue_id=-1: {0: 3})
    assert run_actions.VariantActions(_endpoints(), s).carry_out(s.actions[0]) == "mg0->3, mg1->3"


def test_a_setting_the_broker_does_not_know_or_does_not_take_is_an_error(monkeypatch):
    settings = {"popCkStayBufferTime": "10000"}
    monkeypatch.setattr(remoting, "broker_settings", lambda broker: dict(settings))
    monkeypatch.setattr(remoting, "update_broker_config", lambda broker, new: None)  # taken, and ignored
    va = run_actions.VariantActions(_endpoints(), _scenario())
    unknown = _scenario({"at_s": 1, "do": "broker_config", "set": {"noSuchKey": True}}).actions[0]
    with pytest.raises(HarnessError, match="has no setting noSuchKey"):
        va.carry_out(unknown)
    ignored = _scenario({"at_s": 1, "do": "broker_config", "set": {"popCkStayBufferTime": 10001}}).actions[0]
    with pytest.raises(HarnessError, match="did not take"):
        va.carry_out(ignored)
    monkeypatch.setattr(remoting, "update_broker_config", lambda broker, new: settings.update(
        {k: str(v) for k, v in new.items()}))
    assert "popCkStayBufferTime=10001" in va.carry_out(ignored)


def _run(s):
    logged = []
    return SimpleNamespace(scenario=s, endpoints=[_endpoints()], log=logged.append, logged=logged,
                           record=RunRecord(run_id="r1", scenario={}, variants=[]), archive="A"), logged


def test_actions_happen_at_their_moments_and_one_whose_moment_never_came_fails_the_run(monkeypatch):
    done = []
    monkeypatch.setattr(run_actions.VariantActions, "carry_out", lambda self, a: done.append(a.label) or "ok")
    s = _scenario({"at_s": 0, "do": "reset_offset", "group": "G", "to": "earliest"},
                  {"at_cycle": 1, "do": "reset_offset", "group": "G", "to": "latest"},
                  {"at_cycle": 2, "do": "reset_offset", "group": "G", "to": "time", "ago_s": 1})
    hook = run_actions.Actions()
    run, logged = _run(s)
    hooks = Hooks([hook])
    hooks.brokers_up(run)
    hooks.load_started(run)
    hooks.tick(run, 1.0, {"v1": Progress(cycle=1)})  # its sends began: cycles 0 and 1 at once
    deadline = time.monotonic() + 5
    while len(done) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    hook.load_ended(run)  # cycle 2 never started on v1
    assert sorted(done) == ["reset_offset G to earliest", "reset_offset G to latest"]
    by_label = {r.label: r for r in hook.records}
    assert by_label["reset_offset G to latest"].result == "ok" and by_label["reset_offset G to latest"].at_s >= 0
    assert by_label["reset_offset G to 1 s ago"].error == "not carried out: its moment (cycle 2) did not come " \
                                                          "while the load ran"
    assert len(logged) == 2
    with pytest.raises(HarnessError, match=r"1 action\(s\) not carried out as planned, e.g. v1: reset_offset G to "
                                           r"1 s ago \(cycle 2\)"):
        hook.finished(run)


def test_a_runs_rows_are_shown_with_their_actions():
    record = RunRecord(run_id="r1", scenario={"name": "s"}, variants=[VariantRecord(name="v1", version="5.3.3")],
                       actions=[{"variant": "v1", "label": "delete_topic T", "when": "at 2 s", "at_s": 2.1,
                                 "result": "deleted", "error": None}])
    [row] = enrich([{"scenario": "s", "variant": "v1"}], [record])
    assert row["actions"] == [{"variant": "v1", "label": "delete_topic T", "when": "at 2 s", "at_s": 2.1,
                               "result": "deleted", "error": None, "run_id": "r1"}]
    [bare] = enrich([{"scenario": "s", "variant": "v1"}], [record.model_copy(update={"actions": []})])
    assert "actions" not in bare
