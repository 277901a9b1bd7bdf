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


def test_a_prometheus_that_never_fetches_the_targets_is_told_apart_in_the_error(rendered, tmp_path: Path):
    """The cluster layer once waited out the pick-up with nothing to say why: the error now says how often
    Prometheus fetched the list (here never: its http_sd points at a port nobody serves) and its failures."""
    import pytest

    from harness.core.errors import HarnessError

    cm = one(rendered["01-default-values.yaml"], "ConfigMap", "-prometheus")
    config = yaml.safe_load(cm["data"]["prometheus.yml"])
    sd_port, prom_port = free_port(), free_port()
    wrong_port = next(p for p in iter(free_port, None) if p not in (sd_port, prom_port))
    sd = next(j for j in config["scrape_configs"] if "http_sd_configs" in j)["http_sd_configs"][0]
    sd["url"], sd["refresh_interval"] = f"http://127.0.0.1:{wrong_port}{SD_PATH}", "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    prom = subprocess.Popen(
        [binary(), f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    discovered = DiscoveredPrometheus(f"http://127.0.0.1:{prom_port}", "127.0.0.1", sd_port, tmp_path)
    try:
        with pytest.raises(HarnessError, match="to pick up this run's targets") as e:
            discovered.start([ScrapeTarget("workers", "127.0.0.1:1", "patched", "run-1")], timeout_s=8)
        assert "fetched the target list 0 times" in e.value.detail, e.value.detail
        failures = next(line for line in e.value.detail.splitlines()
                        if line.startswith("prometheus_sd_http_failures_total"))
        assert float(failures.rsplit(" ", 1)[1]) > 0, e.value.detail
    finally:
        discovered.stop(drain_s=1)
        prom.terminate()
        prom.wait(timeout=30)
