import re

from dashboards.generate import DASHBOARDS, HERE, render
from harness.contracts import metrics
from harness.run.observability.dashboards import queries, substitute

# Broker-side names the dashboards may use: the pop-wakeup-probe's, and RocketMQ 5.3.3's exporter's
# (read off a running broker's /metrics).
PROBE = {"rmq_probe_pop_wakeups_total", "rmq_probe_pop_empty_wakeups_total", "rmq_probe_pop_suspends_total"}
BROKER = {"rocketmq_pop_revive_in_message_total", "rocketmq_pop_revive_out_message_total",
          "rocketmq_pop_revive_retry_messages_total", "rocketmq_pop_revive_lag_milliseconds",
          "rocketmq_pop_revive_latency_milliseconds"}


def _harness_names() -> set[str]:
    m = metrics.create()
    names = set()
    for fam in m.registry.collect():
        names.add(fam.name + ("_total" if fam.type == "counter" else ""))
        names.add(fam.name + "_bucket")
    return names


def test_committed_json_is_what_the_generator_writes():
    for name, build in DASHBOARDS.items():
        assert (HERE / name).read_text() == render(build), f"{name} is stale: run python -m dashboards.generate"


def test_every_panel_names_known_metrics_only():
    known = _harness_names() | PROBE | BROKER
    used = set()
    for _, expr in queries():
        used |= set(re.findall(r"\b(?:rmq_harness|rmq_probe|rocketmq)_[a-z_]+", expr))
    assert used, "no metric names found"
    assert used <= known, used - known


def test_variables_substitute():
    expr = 'x{run=~"$run",variant=~"$variant",scenario=~"$scenario"}'
    assert substitute(expr, run="r1") == 'x{run=~"r1",variant=~".*",scenario=~".*"}'
