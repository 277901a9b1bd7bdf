"""Grafana dashboards as code (grafana-foundation-sdk). `python -m dashboards.generate` rewrites the
committed JSON beside this file; a test fails when the JSON is stale or a panel names a metric the
harness does not export.

Variables: datasource, run, variant, scenario. Every series carries run and variant (the run's
Prometheus adds them as target labels; under kube-prometheus-stack's PodMonitors the brokers' series carry
variant only); the harness's own series also carry scenario and group.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import heatmap, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

HERE = Path(__file__).parent
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
RUN = 'run=~"$run",variant=~"$variant"'
SEL = f'{RUN},scenario=~"$scenario"'
WINDOW = "1m"  # rate windows: a whole long poll fits, so retries at the end of a poll still count


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)


def _timeseries(title: str, unit: str, queries: list[tuple[str, str]], description: str = "") -> timeseries.Panel:
    p = timeseries.Panel().title(title).unit(unit).datasource(DS).height(8).span(12).description(description)
    for i, (expr, legend) in enumerate(queries):
        p = p.with_target(_query(expr, legend, chr(ord("A") + i)))
    return p


def _quantiles(metric: str) -> list[tuple[str, str]]:
    return [
        (f"histogram_quantile({q}, sum by (le, variant) (rate({metric}_bucket{{{SEL}}}[{WINDOW}])))",
         f"{{{{variant}}}} p{round(q * 100)}")
        for q in (0.5, 0.9, 0.99)
    ]


def _variable(name: str, query: str) -> db.QueryVariable:
    # "All" as .*, not the list of values: it also matches series without the label (a broker's exporter scraped
    # by a PodMonitor has no run label; under the run's own Prometheus it has one).
    return (db.QueryVariable(name).label(name).query(query).datasource(DS).multi(True).include_all(True)
            .all_value(".*").refresh(1))  # noqa: B010 - refresh on dashboard load


def pop_retry() -> db.Dashboard:
    d = (
        db.Dashboard("RocketMQ pop retry harness")
        .uid("rmq-pop-retry")
        .tags(["rocketmq", "pop", "rmq-harness"])
        .description("Retry wakeup latency and pop traffic per variant, from rmq-pop-harness runs.")
        .time("now-15m", "now")
        .refresh("5s")
        .with_variable(db.DatasourceVariable("datasource").label("datasource").type("prometheus"))
        .with_variable(_variable("run", "label_values(rmq_harness_deliveries_total, run)"))
        .with_variable(_variable("variant", 'label_values(rmq_harness_deliveries_total{run=~"$run"}, variant)'))
        .with_variable(_variable("scenario", 'label_values(rmq_harness_deliveries_total{run=~"$run"}, scenario)'))
    )
    d = d.with_row(db.Row("Retry latency"))
    d = d.with_panel(_timeseries(
        "Retry wakeup latency (receive - retry copy's store time)", "s",
        _quantiles("rmq_harness_retry_wakeup_seconds"),
        "How long a retry waited for a consumer that was already waiting for it."))
    d = d.with_panel(
        heatmap.Panel().title("Retry wakeup latency distribution").datasource(DS).height(8).span(12)
        .with_target(_query(f"sum by (le) (increase(rmq_harness_retry_wakeup_seconds_bucket{{{SEL}}}[{WINDOW}]))",
                            "{{le}}", "A").format("heatmap"))
    )
    d = d.with_panel(_timeseries(
        "Redelivery delay (receive - (nack + requested delay))", "s",
        _quantiles("rmq_harness_redelivery_delay_seconds")))
    d = d.with_panel(_timeseries("Long-poll wait per receive", "s", _quantiles("rmq_harness_poll_wait_seconds")))
    d = d.with_row(db.Row("Traffic"))
    d = d.with_panel(_timeseries("Deliveries, acks, nacks, empty polls per second", "ops", [
        (f"sum by (variant) (rate(rmq_harness_{m}_total{{{SEL}}}[{WINDOW}]))", f"{{{{variant}}}} {m}")
        for m in ("deliveries", "acks", "nacks", "empty_polls")
    ]))
    d = d.with_panel(_timeseries("Ledger counters", "short", [
        (f"sum by (variant) (rmq_harness_{m}_total{{{SEL}}})", f"{{{{variant}}}} {m}")
        for m in ("messages_sent", "deliveries", "duplicate_deliveries", "cross_topic_deliveries")
    ]))
    d = d.with_row(db.Row("Broker"))
    d = d.with_panel(_timeseries("Broker revive: messages in / out / to retry per second", "ops", [
        (f"sum by (variant) (rate(rocketmq_pop_revive_{m}_total{{{RUN}}}[{WINDOW}]))", f"{{{{variant}}}} {label}")
        for m, label in (("in_message", "in"), ("out_message", "out"), ("retry_messages", "retry"))
    ]))
    d = d.with_panel(_timeseries("Broker revive lag and latency", "ms", [
        (f"max by (variant) (rocketmq_pop_revive_lag_milliseconds{{{RUN}}})", "{{variant}} lag"),
        (f"max by (variant) (rocketmq_pop_revive_latency_milliseconds{{{RUN}}})", "{{variant}} latency"),
    ]))
    d = d.with_row(db.Row("Wakeup probe (broker side)"))
    d = d.with_panel(_timeseries("Long-poll wakeups per cause", "short", [
        (f"sum by (variant, cause) (increase(rmq_probe_pop_wakeups_total{{{RUN}}}[{WINDOW}]))",
         "{{variant}} {{cause}}"),
    ], "Wakeups of suspended pop requests inside the broker, by cause (pop-wakeup-probe agent)."))
    d = d.with_panel(_timeseries("Wakeups that found nothing (suspended again)", "short", [
        (f"sum by (variant, group, cause) (increase(rmq_probe_pop_empty_wakeups_total{{{RUN}}}[{WINDOW}]))",
         "{{variant}} {{group}} {{cause}}"),
    ]))
    return d


DASHBOARDS = {"pop-retry.json": pop_retry}


def render(build: callable) -> str:  # type: ignore[valid-type]
    return json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    for name, build in DASHBOARDS.items():
        (HERE / name).write_text(render(build))
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
