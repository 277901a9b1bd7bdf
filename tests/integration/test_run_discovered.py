"""A real run the way the load-test pod does it: Prometheus is not the run's own but one running the
chart's config, which learns the workers and brokers from the run's http_sd server. Brokers are local
(there is no cluster here); everything else is the in-cluster code path."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import yaml

from harness.core.process import free_port
from harness.deploy.local import LocalBackend
from harness.inputs.scenario import load_scenario
from harness.inputs.variants import load_variants, select
from harness.run.observability.discovery import SD_PATH, DiscoveredPrometheus
from harness.run.observability.prometheus import binary
from harness.run.sequence import Run
from harness.run.site import Site
from tests.chart.helm import one, render

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"


def test_run_with_the_chart_prometheus_discovering_its_targets(tmp_path: Path):
    config = yaml.safe_load(one(render(), "ConfigMap", "-prometheus")["data"]["prometheus.yml"])
    sd_port, prom_port = free_port(), free_port()
    sd = next(j for j in config["scrape_configs"] if "http_sd_configs" in j)["http_sd_configs"][0]
    sd["url"], sd["refresh_interval"] = f"http://127.0.0.1:{sd_port}{SD_PATH}", "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    prom = subprocess.Popen(
        [binary(), f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    ports = [free_port() for _ in range(4)]

    def site(work: Path, log: Callable[[str], None]) -> Site:
        return Site(
            backend=LocalBackend(work / "brokers", attached=True, log=log),
            prometheus=DiscoveredPrometheus(f"http://127.0.0.1:{prom_port}", "127.0.0.1", sd_port, work / "prom"),
            bind_host="127.0.0.1",
            advertise_host="127.0.0.1",
            worker_port=lambda n: ports[n],
        )

    try:
        variants = select(load_variants(), ["unpatched"])
        result = Run(variants, load_scenario(str(SCENARIO)), tmp_path / "runs", site=site,
                     run_id="discovered-run-1").execute()
    finally:
        prom.terminate()
        prom.wait(timeout=30)
    assert result.archive.name == "discovered-run-1"
    m = json.loads((result.archive / "manifest.json").read_text())
    [s] = m["summary"]
    assert s["ledger"]["never_received"] == 0 and s["wakeup_ms"]["n"] + s["pickup_ms"]["n"] == 16
    assert m["variants"][0]["broker_config"]["enableRetryTopicV2"] == "false"
    # The series came through discovery with the labels a local run gives them.
    harness = json.loads((result.archive / "prometheus" / "harness.json").read_text())["data"]["result"]
    sent = [r for r in harness if r["metric"]["__name__"] == "rmq_harness_messages_sent_total"]
    assert {(r["metric"]["job"], r["metric"]["run"], r["metric"]["variant"]) for r in sent} == {
        ("workers", "discovered-run-1", "unpatched")}
    assert sum(float(r["values"][-1][1]) for r in sent) == 16
    instances = {r["metric"]["instance"] for r in sent}
    assert instances <= {f"127.0.0.1:{p}" for p in ports[:2]}
    broker = json.loads((result.archive / "prometheus" / "broker_pop.json").read_text())["data"]["result"]
    assert any(r["metric"].get("run") == "discovered-run-1" and r["metric"]["job"] == "broker" for r in broker)
    ev = pd.read_parquet(result.archive / "events" / "unpatched.parquet")
    assert (ev.run_id == "discovered-run-1").all()
