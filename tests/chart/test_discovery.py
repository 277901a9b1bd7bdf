"""The chart's Prometheus config, run by a real Prometheus, finds a run's targets through the harness's
http_sd server and labels their series as a local run does (job, variant, run)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, Counter, start_http_server

from harness.core.process import free_port
from harness.deploy.k8s import naming
from harness.run.observability.discovery import SD_PATH, DiscoveredPrometheus
from harness.run.observability.prometheus import ScrapeTarget, binary
from tests.chart.helm import one


def _query(url: str, expr: str) -> list[dict]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=5) as resp:
        return json.loads(resp.read())["data"]["result"]


def test_chart_prometheus_scrapes_what_the_run_publishes(rendered, tmp_path: Path):
    cm = one(rendered["01-default-values.yaml"], "ConfigMap", "-prometheus")
    config = yaml.safe_load(cm["data"]["prometheus.yml"])
    sd_port, prom_port, exporter_port = free_port(), free_port(), free_port()
    sd = next(j for j in config["scrape_configs"] if "http_sd_configs" in j)["http_sd_configs"][0]
    # Only the address changes: the in-cluster Service becomes this machine's loopback.
    assert sd["url"].endswith(f":{naming.SD_PORT}{SD_PATH}")
    sd["url"] = f"http://127.0.0.1:{sd_port}{SD_PATH}"
    sd["refresh_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))

    registry = CollectorRegistry()
    Counter("rmq_harness_messages_sent", "sent", ["variant"], registry=registry).labels(variant="patched").inc(3)
    server, thread = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    prom = subprocess.Popen(
        [binary(), f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"),  # noqa: SIM115
    )
    said: list[str] = []
    discovered = DiscoveredPrometheus(f"http://127.0.0.1:{prom_port}", "127.0.0.1", sd_port, tmp_path, log=said.append)
    try:
        # An external cluster's exporter (a suffix): serving every tenant, it is left out here, and said so.
        discovered.start([ScrapeTarget("workers", f"127.0.0.1:{exporter_port}", "patched", "run-1"),
                          ScrapeTarget("broker", "10.0.0.9:5557", "staging", "run-1", suffix="-rh0a1b2c3d")],
                         timeout_s=60)
        assert [g["targets"] for g in discovered._server.groups] == [[f"127.0.0.1:{exporter_port}"]]
        assert len(said) == 1 and said[0].startswith("staging: its brokers' exporter (10.0.0.9:5557)")
        expr = 'rmq_harness_messages_sent_total{job="workers",run="run-1",variant="patched"}'
        deadline = time.monotonic() + 30
        result: list[dict] = []
        while time.monotonic() < deadline and not result:
            result = _query(discovered.url, expr)
            time.sleep(0.5)
        assert result, f"no series for {expr}; see {tmp_path / 'prometheus.log'}"
        assert float(result[0]["value"][1]) == 3.0
        # Stopping withdraws the targets: Prometheus no longer scrapes anything of this run.
        discovered.stop()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{discovered.url}/api/v1/targets?state=active", timeout=5) as resp:
            active = json.loads(resp.read())["data"]["activeTargets"]
        assert not [t for t in active if t["labels"].get("run") == "run-1"]
    finally:
        discovered.stop()
        prom.terminate()
        prom.wait(timeout=30)
        server.shutdown()
