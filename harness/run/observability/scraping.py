"""The run's Prometheus as a part of the run: started with the run's targets (every worker, every broker's exporter
and wakeup probe) once the workers are planned, and after the load its window exported into the archive
(prometheus/: the raw series and every dashboard panel's query) before it stops."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Sequence

from harness.contracts.endpoints import Endpoints
from harness.run.hooks import Hook, RunState
from harness.run.observability.dashboards import panel_queries
from harness.run.observability.prometheus import ScrapeTarget

SCRAPE_INTERVAL_S = 1.0


def scrape_targets(run_id: str, endpoints: Sequence[Endpoints],
                   worker_metrics: dict[str, dict[str, str]]) -> list[ScrapeTarget]:
    """``worker_metrics``: variant -> worker -> host:port of its metrics."""
    targets = []
    for ep in endpoints:
        targets += [ScrapeTarget("workers", address, ep.variant, run_id)
                    for address in worker_metrics[ep.variant].values()]
        for node in ep.brokers:
            if node.metrics:  # an external broker may serve none (said when the run started)
                targets.append(ScrapeTarget("broker", urllib.parse.urlsplit(node.metrics).netloc, ep.variant,
                                            run_id, suffix=ep.suffix))
            if node.probe:
                targets.append(ScrapeTarget("probe", urllib.parse.urlsplit(node.probe).netloc, ep.variant, run_id))
    return targets


class Scraping(Hook):
    """Prometheus scrapes the run from when its workers are planned to one scrape after the load ended."""

    def __init__(self) -> None:
        self.window_start = 0.0

    def ready(self, run: RunState) -> None:
        prom = run.site.prometheus
        prom.start(scrape_targets(run.run_id, run.endpoints, run.fleet.metrics), SCRAPE_INTERVAL_S)
        run.log(f"Prometheus for this run: {prom.url} (scraping every second)")
        self.window_start = time.time()

    def load_ended(self, run: RunState) -> None:
        prom = run.site.prometheus
        time.sleep(1.5 * SCRAPE_INTERVAL_S)  # one more scrape, so the last counter values are in
        window = (self.window_start, time.time())
        exported = prom.export(run.staging.dir("prometheus"), *window, run=run.run_id)
        exported["dashboard_panels"] = prom.export_panels(run.staging.dir("prometheus") / "panels.json",
                                                          panel_queries(run.run_id), *window)
        prom.stop()
        run.record.prometheus = {"scrape_interval_s": SCRAPE_INTERVAL_S, "series": exported,
                                 "observer_effect": run.scenario.observer_effect}

    def failed(self, run: RunState, error: BaseException) -> None:
        run.site.prometheus.stop()
