"""Observations: numbers a scenario reads off its brokers (log lines, Prometheus series, runtime figures), checked by
its rules as observed.<name>."""

from pathlib import Path

import pytest

from harness.client import remoting
from harness.contracts.endpoints import BrokerNode, Endpoints
from harness.contracts.record import RunRecord, VariantRecord
from harness.core.errors import ConfigError
from harness.inputs.expectations import evaluate
from harness.inputs.observations import LogLines, MetricSeries, RuntimeFigure
from harness.inputs.scenario import parse_scenario
from harness.measure.enrich import enrich
from harness.run.observability import observed

BASE = {"name": "s", "topics": [{"name": "T"}], "groups": [{"name": "G", "topic": "T"}],
        "produce": {"pattern": "burst", "count": 4}}


def test_observations_are_read_by_kind_and_rules_name_only_declared_ones():
    s = parse_scenario({**BASE, "observe": {
        "npe": {"log": "pop*.log", "pattern": "NullPointerException"},
        "out": {"metric": "rocketmq_messages_out_total", "labels": {"consumer_group": "G"}, "per": "deliveries"},
        "gets": {"runtime": "msgGetTotalTodayNow", "how": "last"}},
        "expect": ["observed.npe == 0", "observed.out >= 0.95"]})
    assert [type(o) for o in s.observe.values()] == [LogLines, MetricSeries, RuntimeFigure]


@pytest.mark.parametrize(("doc", "says"), [
    ({"expect": ["observed.npe == 0"]}, "expect.0: observed.npe: observe: declares no 'npe' (it declares none)"),
    ({"observe": {"x": {"log": "a.log", "pattern": "("}}}, "observe.x.log.pattern: not a regular expression"),
    ({"observe": {"x": {"foo": 1}}}, "observe.x: an observation is {log: FILES, pattern: REGEX}"),
    ({"observe": {"x": {"metric": "m", "pattern": "p"}}}, "observe.x.metric.pattern: unknown field"),
    ({"observe": {"X": {"runtime": "k"}}}, "observe.X"),
    ({"observe": {"x": {"runtime": "k", "per": "messages"}}}, "observe.x.runtime.per"),
    ({"observe": {"x": {"log": "gc-*.log", "pattern": "->[0-9]+M", "how": "growth"}}},
     "observe.x.log: how: growth takes the number the pattern captures: give it exactly one group (it "
     "has 0)"),
    ({"observe": {"x": {"log": "gc-*.log", "pattern": "x", "how": "increase"}}}, "observe.x.log.how"),
])
def test_a_bad_observation_is_refused_in_one_line(doc, says):
    with pytest.raises(ConfigError) as e:
        parse_scenario({**BASE, **doc}, "s.yaml")
    assert "\n" not in str(e.value) and str(e.value).startswith(f"s.yaml: {says}")


def test_log_lines_count_matching_lines_in_the_files_named(tmp_path: Path):
    (tmp_path / "proxy").mkdir()
    (tmp_path / "proxy" / "pop.log").write_text("ok\nrevive error NPE\nrevive error NPE\n")
    (tmp_path / "proxy" / "pop.1.log").write_text("revive error NPE\n")
    (tmp_path / "proxy" / "broker.log").write_text("revive error NPE\n")
    assert observed.log_figure(tmp_path, LogLines(log="pop*.log", pattern="revive error")) == 3
    with pytest.raises(FileNotFoundError, match="no log named namesrv.log"):
        observed.log_figure(tmp_path, LogLines(log="namesrv.log", pattern="x"))


# What a JVM's -Xlog:gc writes (JDK 17, G1): the heap before and after each collection.
GC = "[{t}s][info][gc] GC({n}) Pause Young (Normal) (G1 Evacuation Pause) {before}M->{after}M(512M) 3.1ms\n"


def _gc(path: Path, afters: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[0.01s][info][gc] Using G1\n" + "".join(
        GC.format(t=i, n=i, before=a + 20, after=a) for i, a in enumerate(afters)))


def test_a_gc_log_gives_the_heap_after_collections_its_largest_and_one_jvms_largest_rise(tmp_path: Path):
    _gc(tmp_path / "broker" / "gc-broker-101.log", [30, 80, 55])  # killed and started again: a JVM of its own
    _gc(tmp_path / "broker" / "gc-broker-202.log", [20, 40, 140])
    _gc(tmp_path / "proxy" / "gc-proxy-303.log", [10, 900])  # not a broker's: the glob leaves it out
    heap = "Pause.* [0-9]+M->([0-9]+)M"
    assert observed.log_figure(tmp_path, LogLines(log="gc-broker-*.log", pattern=heap, how="max")) == 140
    assert observed.log_figure(tmp_path, LogLines(log="gc-broker-*.log", pattern=heap, how="growth")) == 120
    assert observed.log_figure(tmp_path, LogLines(log="gc-broker-*.log", pattern=heap)) == 6
    # Nothing to take a maximum of, or a capture that is no number: an error the run says (its rules: no data).
    with pytest.raises(ValueError, match="no number to take the max of"):
        observed.log_figure(tmp_path, LogLines(log="gc-broker-*.log", pattern="Full GC ([0-9]+)", how="max"))
    with pytest.raises(ValueError, match="captured 'Young', not a number"):
        observed.log_figure(tmp_path, LogLines(log="gc-broker-*.log", pattern="Pause (Young)", how="max"))


def _endpoints(suffix: str = "") -> Endpoints:
    nodes = (BrokerNode("broker", "b1:1", "http://m1/metrics", ""),
             BrokerNode("broker-b", "b2:1", "http://m2/metrics", ""))
    return Endpoints(variant="v1", version="5.3.3", grpc="g", remoting="r", broker="b1:1", namesrv="n:1",
                     metrics="http://m1/metrics", nodes=nodes, suffix=suffix)


def test_a_series_is_summed_over_brokers_and_matching_labels_under_the_runs_names(monkeypatch):
    samples = {"http://m1/metrics": [{"name": "rocketmq_messages_out_total", "consumer_group": "G-r1", "value": 5.0},
                                     {"name": "rocketmq_messages_out_total", "consumer_group": "H-r1", "value": 7.0},
                                     {"name": "rocketmq_messages_in_total", "consumer_group": "G-r1", "value": 9.0}],
               "http://m2/metrics": [{"name": "rocketmq_messages_out_total", "consumer_group": "G-r1", "value": 2.0}]}
    monkeypatch.setattr(observed, "read_probe", lambda url: ("", samples[url]))
    o = MetricSeries(metric="rocketmq_messages_out", labels={"consumer_group": "G"})
    assert observed.series_sum(_endpoints(suffix="-r1"), o) == 7.0
    assert observed.series_sum(_endpoints(suffix="-r1"), MetricSeries(metric="never_exported")) == 0.0


def test_a_runtime_figure_a_broker_does_not_report_is_an_error(monkeypatch):
    monkeypatch.setattr(remoting, "runtime_info", lambda broker: {"msgGetTotalTodayNow": "4"} if broker == "b1:1"
                        else {})
    with pytest.raises(KeyError, match="broker-b reports no runtime figure"):
        observed.runtime_sum(_endpoints(), RuntimeFigure(runtime="msgGetTotalTodayNow"))


def _record(run_id: str, values: dict | None) -> RunRecord:
    scenario = {"name": "s",
                "observe": {"out": {"metric": "m", "per": "deliveries"}, "npe": {"log": "a", "pattern": "b"}},
                "expect": ["observed.out >= 0.95", "observed.npe == 0"]}
    return RunRecord(run_id=run_id, scenario=scenario, variants=[VariantRecord(name="v1", version="5.3.3",
                                                                               observed=values)])


def test_rows_get_the_observations_summed_over_runs_and_per_their_count():
    rows = enrich([{"scenario": "s", "variant": "v1", "deliveries": 40}],
                  [_record("r1", {"out": 10.0, "npe": 0.0}), _record("r2", {"out": 10.0, "npe": 2.0})])
    assert rows[0]["observed"] == {"out": 0.5, "npe": 2.0}
    tally = evaluate(["observed.out >= 0.95", "observed.npe == 0"], rows[0])
    assert (tally["failed"], tally["met"]) == (2, 0)
    # One run could not read it: no data, never met; a run without observations leaves the row without them.
    [unread] = enrich([{"scenario": "s", "variant": "v1", "deliveries": 40}], [_record("r1", {"out": None, "npe": 0})])
    assert evaluate(["observed.out >= 0.95"], unread)["no_data"] == 1
    [bare] = enrich([{"scenario": "s", "variant": "v1", "deliveries": 40}], [_record("r1", None)])
    assert "observed" not in bare
