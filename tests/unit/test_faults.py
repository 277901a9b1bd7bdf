"""Topologies and fault schedules in scenarios, the fault runner's sequence, and what a fault did to the
messages (harness.measure.fault_impact)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from harness.cli.options import parse_fault
from harness.core.errors import ConfigError
from harness.inputs.catalogue import load_scenario, with_faults
from harness.inputs.scenario import parse_scenario
from harness.measure.fault_impact import impact, longest_gap, waits
from harness.run.faults import FaultRecord, Injector, carry_out

BASE = {
    "name": "s",
    "topics": [{"name": "T"}],
    "groups": [{"name": "G", "topic": "T"}],
    "produce": {"pattern": "steady", "rate": 5},
    "cycles": {"spacing": 10},
    "duration_s": 60,
}


def _scenario(**extra) -> object:
    return parse_scenario({**BASE, **extra}, "s.yaml")


def test_the_default_topology_is_one_broker_inside_its_proxy():
    sc = _scenario()
    assert (sc.topology.proxy, sc.topology.masters, sc.topology.slave) == ("local", 1, False)
    assert sc.topology.targets == ("namesrv", "broker") and sc.faults == []


@pytest.mark.parametrize("topology, fault, needle", [
    ({"masters": 2}, None, "topology: proxy: local runs one broker inside the proxy's JVM; two masters needs "
                           "proxy: cluster"),
    ({"slave": True}, None, "a slave needs proxy: cluster"),
    ({}, {"at_s": 10, "action": "kill9", "target": "proxy"}, "faults.0.target: proxy: the proxy runs inside"),
    ({"proxy": "cluster"}, {"at_s": 10, "action": "kill9", "target": "slave"}, "faults.0.target: slave: the "
                                                                               "topology has no slave"),
    ({"proxy": "cluster"}, {"at_s": 10, "action": "kill9", "target": "broker-b"}, "one master"),
    ({}, {"at_s": 10, "action": "sigstop", "target": "broker"}, "sigstop needs how long"),
    ({}, {"at_s": 10, "action": "restart", "target": "broker", "duration_s": 3}, "a restart starts the process"),
    ({}, {"at_s": 55, "action": "sigstop", "target": "broker", "duration_s": 10}, "ends after the load's "
                                                                                   "duration_s (60 s)"),
    ({}, {"at_s": 10, "action": "explode", "target": "broker"}, "faults.0.action"),
])
def test_bad_topologies_and_faults_are_named(topology, fault, needle):
    with pytest.raises(ConfigError, match="^s.yaml: ") as e:
        _scenario(topology=topology, faults=[fault] if fault else [])
    assert needle in str(e.value)


def test_faults_on_one_target_may_not_overlap_but_different_targets_may():
    stop = {"action": "sigstop", "target": "broker", "duration_s": 10}
    with pytest.raises(ConfigError, match=r"faults.1: sigstop broker 10 s at 15 s overlaps sigstop broker"):
        _scenario(faults=[{**stop, "at_s": 10}, {**stop, "at_s": 15}])
    sc = _scenario(faults=[{**stop, "at_s": 10}, {**stop, "at_s": 15, "target": "namesrv"}])
    assert [f.target for f in sc.faults] == ["broker", "namesrv"]


def test_remoting_runs_one_master_only():
    with pytest.raises(ConfigError, match="the remoting driver pops from the first master only"):
        _scenario(protocol="remoting", topology={"proxy": "cluster", "masters": 2})


def test_a_fault_on_the_command_line():
    f = parse_fault("kill9:broker@30+10")
    assert (f.action, f.target, f.at_s, f.duration_s) == ("kill9", "broker", 30, 10)
    assert parse_fault("restart:namesrv@5").duration_s is None
    for bad, needle in (("kill:broker@3", "--fault kill:broker@3: action"), ("kill9 broker", "expected ACTION"),
                        ("sigstop:broker@3", "sigstop needs how long"), ("kill9:disk@3", "target")):
        with pytest.raises(ConfigError, match=needle):
            parse_fault(bad)


def test_faults_from_the_command_line_replace_the_scenarios_and_rename_it():
    sc = load_scenario("faults")
    assert sc.topology.proxy == "cluster" and [f.label for f in sc.faults] == ["kill9 broker 10 s"]
    again = with_faults(sc, [parse_fault("sigstop:proxy@20+5"), parse_fault("restart:namesrv@40")])
    assert again.name == "faults-sigstop-proxy-restart-namesrv"
    assert [f.label for f in again.faults] == ["sigstop proxy 5 s", "restart namesrv"]


class FakeProcess:
    """Records the calls a fault makes (a stand-in for a backend's process, in a unit test of the sequence)."""

    holds_down = True

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.pid = 1

    def describe(self) -> str:
        return f"pid {self.pid}"

    def kill(self) -> None:
        self.calls.append("kill")

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")

    def terminate(self) -> None:
        self.calls.append("terminate")

    def start(self) -> None:
        self.calls.append("start")
        self.pid += 1


@pytest.mark.parametrize("spec, calls, slept", [
    ("kill9:broker@1+7", ["kill", "start"], [7.0]),
    ("kill9:broker@1", ["kill", "start"], [0.0]),
    ("sigstop:broker@1+4", ["pause", "resume"], [4.0]),
    ("restart:broker@1", ["terminate", "start"], []),
])
def test_each_action_is_its_sequence_of_signals(spec, calls, slept):
    proc, sleeps = FakeProcess(), []
    record = FaultRecord("v", "x", "broker", 1, None)
    carry_out(proc, parse_fault(spec), record, sleep=sleeps.append)
    assert proc.calls == calls and sleeps == slept
    assert record.process == "pid 1" and record.started_ns <= record.ended_ns
    assert record.back == ("" if calls[0] == "pause" else "pid 2")


class FakeBackend:
    def __init__(self) -> None:
        self.procs: dict[tuple[str, str], FakeProcess] = {}

    def process(self, name: str, target: str) -> FakeProcess:
        return self.procs.setdefault((name, target), FakeProcess())


def test_the_injector_hits_every_variant_and_says_what_it_did_not_do():
    backend = FakeBackend()
    faults = [parse_fault("sigstop:broker@0+0.2"), parse_fault("kill9:namesrv@0.1"), parse_fault("kill9:broker@30")]
    inj = Injector(backend, ["a", "b"], faults, log=lambda line: None)
    inj.start()
    deadline = time.monotonic() + 10
    while sum(r.ended_ns is not None for r in inj.records) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    inj.finish(timeout_s=5)  # the load ends before the third fault is due
    inj.release()
    assert backend.procs[("a", "broker")].calls == ["pause", "resume"] == backend.procs[("b", "broker")].calls
    assert backend.procs[("b", "namesrv")].calls == ["kill", "start"]
    late = [r for r in inj.records if r.at_s == 30]
    assert len(late) == 2 and all(r.error == "not injected: the load ended first" for r in late)
    assert inj.failed == late


def test_a_fault_that_fails_is_recorded_and_the_rest_go_on():
    class Stuck(FakeProcess):
        def start(self) -> None:
            raise TimeoutError("not ready after 180 s")

    backend = FakeBackend()
    backend.procs[("a", "broker")] = Stuck()
    inj = Injector(backend, ["a"], [parse_fault("kill9:broker@0"), parse_fault("kill9:namesrv@0")], log=lambda _: None)
    inj.start()
    inj.finish(timeout_s=10)
    inj.release()
    errors = {r.target: r.error for r in inj.records}
    assert errors == {"broker": "TimeoutError: not ready after 180 s", "namesrv": None}


def test_faults_count_from_each_variants_first_sends_and_a_variant_that_never_sent_gets_none():
    from types import SimpleNamespace

    from harness.run.faults import Faults
    from harness.run.hooks import Hooks
    from harness.workload.fleet import METRICS_SILENT_S, Progress

    backend, logged = FakeBackend(), []
    sc = _scenario(faults=[{"at_s": 0.2, "action": "sigstop", "target": "broker", "duration_s": 0.1}])
    names = ("a", "b", "c")
    run = SimpleNamespace(backend=backend, variants=[SimpleNamespace(name=v) for v in names], scenario=sc,
                          endpoints=[SimpleNamespace(variant=v) for v in names], log=logged.append)
    hook = Faults()
    hooks = Hooks([hook])
    hooks.brokers_up(run)
    hooks.load_started(run)
    hooks.tick(run, 1.0, {})  # nobody sends yet: nothing is timed
    assert hook.injector.started == set()
    hooks.tick(run, 2.0, {"a": Progress(sent=1, cycle=0)})
    hooks.tick(run, 3.0, {"a": Progress(sent=3, cycle=1)})  # a later cycle starts nothing again
    # b's workers never answered: past METRICS_SILENT_S its faults count from the planned start, said in the log.
    hooks.tick(run, METRICS_SILENT_S + 1, {"a": Progress(sent=3, cycle=1), "c": Progress()})
    assert hook.injector.started == {"a", "b"} and logged == [
        "b: no live progress from its workers; what the scenario times from its first sends counts from the load's "
        "start + produce.delay_s"]
    deadline = time.monotonic() + 10
    while sum(r.ended_ns is not None for r in hook.injector.records) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    hooks.load_ended(run)  # c answered but never started a cycle: its fault was not injected
    assert backend.procs[("a", "broker")].calls == ["pause", "resume"] == backend.procs[("b", "broker")].calls
    assert backend.procs[("c", "broker")].calls == []
    [never] = hook.injector.failed
    assert never.variant == "c" and never.error == "not injected: the variant's producers never started sending"


def test_a_kill_held_down_is_refused_where_a_supervisor_restarts_at_once():
    class Supervised(FakeProcess):
        holds_down = False

    backend = FakeBackend()
    backend.procs[("a", "broker")] = Supervised()
    with pytest.raises(ConfigError, match="kill9 broker 10 s: this backend's supervisor starts a killed broker"):
        Injector(backend, ["a"], [parse_fault("kill9:broker@5+10")], log=lambda _: None).prepare()
    Injector(backend, ["a"], [parse_fault("kill9:broker@5"), parse_fault("sigstop:broker@9+3")],
             log=lambda _: None).prepare()


S = 1_000_000_000  # ns


def _ledger(rows: list[tuple]) -> pd.DataFrame:
    cols = ["variant", "ledger_id", "class", "sent_ns", "first_received_ns", "acked_ns", "dead_lettered_ns"]
    df = pd.DataFrame(rows, columns=cols)
    for c in cols[3:]:
        df[c] = df[c].astype("Int64")
    return df


def test_what_a_fault_did_to_the_messages_in_flight():
    # The fault: from 10 s to 20 s. m1 was final before it; m2 was in flight and lost; m3 sent during it and
    # duplicated; m4 sent after it; m5 in flight and acked after a retry that waited 12 s (due 9 s, back 21 s).
    ledger = _ledger([
        ("v", "m1", "acked_first", 1 * S, 2 * S, 3 * S, None),
        ("v", "m2", "lost", 8 * S, None, None, None),
        ("v", "m3", "duplicated", 15 * S, 22 * S, 23 * S, None),
        ("v", "m4", "acked_first", 25 * S, 26 * S, 27 * S, None),
        ("v", "m5", "acked_after_retry", 5 * S, 6 * S, 22 * S, None),
        ("w", "m6", "lost", 12 * S, None, None, None),  # another variant's
    ])
    retries = pd.DataFrame({"variant": ["v"], "t_client_ns": [21 * S], "redelivery_ms": [12_000.0]})
    record = {"variant": "v", "label": "kill9 broker 5 s", "action": "kill9", "target": "broker", "at_s": 10,
              "duration_s": 5, "window_s": 10.0, "error": None, "started_ns": 10 * S, "ended_ns": 20 * S}
    [got] = impact(ledger, retries, [record])
    assert (got["exposed"], got["lost"], got["duplicated"], got["acked_after_retry"]) == (3, 1, 1, 1)
    # m2 never delivered: it waited from 8 s at least until the last thing the ledger saw (m4's ack, 27 s).
    assert got["longest_wait_ms"] == 19_000 and got["longest_wait_open"] is True
    # Sends at 1, 5, 8, 15, 25 s: the longest gap overlapping 10..20 s is 15 -> 25. Deliveries at 2, 6, 21 (m5's
    # retry), 22, 26 s: 6 -> 21.
    assert (got["send_gap_ms"], got["send_gap_open"]) == (10_000, False)
    assert (got["delivery_gap_ms"], got["delivery_gap_open"]) == (15_000, False)


def test_a_gap_with_nothing_after_it_is_open():
    assert longest_gap(np.array([1 * S, 2 * S]), 5 * S, 6 * S, 10 * S) == (8_000, True)
    assert longest_gap(np.array([1 * S, 2 * S]), 0, 1 * S, 10 * S) == (1_000, False)
    assert longest_gap(np.array([], dtype=np.int64), 0, 1, 0) == (None, None)


def test_a_fault_never_injected_has_no_figures():
    record = {"variant": "v", "label": "kill9 broker", "action": "kill9", "target": "broker", "at_s": 50,
              "duration_s": None, "window_s": None, "error": "not injected", "started_ns": None, "ended_ns": None}
    [got] = impact(_ledger([]), pd.DataFrame(columns=["variant", "t_client_ns", "redelivery_ms"]), [record])
    assert got["exposed"] is None and got["longest_wait_ms"] is None and got["error"] == "not injected"


def test_waits_run_from_send_or_due_time_to_the_delivery():
    ledger = _ledger([("v", "m1", "acked_first", 1 * S, 3 * S, 4 * S, None),
                      ("v", "m2", "lost", 2 * S, None, None, None),
                      ("v", "m3", "lost", 5 * S, 6 * S, None, None)])  # delivered, never acked
    retries = pd.DataFrame({"variant": ["v", "v"], "t_client_ns": [9 * S, 9 * S], "redelivery_ms": [500.0, None]})
    w = waits(ledger, retries, end_ns=10 * S)
    assert sorted(zip(w["from_ns"] // 10**6, w["to_ns"] // 10**6, w["open"], strict=True)) == [
        (1000, 3000, False), (2000, 10000, True), (5000, 6000, False), (6000, 10000, True), (8500, 9000, False)]
