"""A real run the way the load-test pod does it, in one run: Prometheus is not the run's own but one running
the chart's config, which learns the workers and brokers from the run's http_sd server; and the workers keep
their files to themselves, as worker pods do: each writes its events and client log into a directory of its
own and, when the master stops, sends them over Locust's channel. Brokers are local and the workers are
processes (there is no cluster here); discovery, stopping, flushing, sending and checking are the code the
pods run."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.contracts.workers import Placement
from harness.core.process import free_port
from harness.deploy.local import LocalBackend
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import load_variants, select
from harness.run.observability.discovery import SD_PATH, DiscoveredPrometheus
from harness.run.observability.prometheus import binary
from harness.run.sequence import Run, RunResult
from harness.run.site import RUN_BROKER_STOP_S, Site
from harness.workload.fleet import ProcessWorkers
from tests.chart.helm import one, render

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"  # 2 workers, 16 messages
RUN_ID = "pod-mode-run-1"
WORKERS = ("worker-1", "worker-2")


class SendingProcesses(ProcessWorkers):
    ship_files = True

    def __init__(self, root: Path, ports: list[int]) -> None:
        super().__init__("127.0.0.1", "127.0.0.1", lambda n: ports[n])
        self.root = root

    def placement(self, n: int) -> Placement:
        own = self.root / f"worker-{n + 1}"
        return Placement("127.0.0.1", self.worker_port(n), own / "events", own / "client")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[RunResult, Path, list[int]]:
    tmp = tmp_path_factory.mktemp("pod-mode")
    config = yaml.safe_load(one(render(), "ConfigMap", "-prometheus")["data"]["prometheus.yml"])
    sd_port, prom_port = free_port(), free_port()
    sd = next(j for j in config["scrape_configs"] if "http_sd_configs" in j)["http_sd_configs"][0]
    sd["url"], sd["refresh_interval"] = f"http://127.0.0.1:{sd_port}{SD_PATH}", "1s"
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    prom = subprocess.Popen(
        [binary(), f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    ports = [free_port() for _ in range(4)]
    own = tmp / "workers"

    def site(work: Path, log: Callable[[str], None]) -> Site:
        return Site(
            backend=LocalBackend(work / "brokers", attached=True, log=log, stop_timeout_s=RUN_BROKER_STOP_S),
            prometheus=DiscoveredPrometheus(f"http://127.0.0.1:{prom_port}", "127.0.0.1", sd_port, work / "prom"),
            bind_host="127.0.0.1",
            advertise_host="127.0.0.1",
            worker_port=lambda n: ports[n],
            workers=SendingProcesses(own, ports),
        )

    try:
        result = Run(select(load_variants(), ["unpatched"]), load_scenario(str(SCENARIO)), tmp / "runs", site=site,
                     run_id=RUN_ID).execute()
    finally:
        prom.terminate()
        prom.wait(timeout=30)
    return result, own, ports


def test_the_chart_prometheus_discovered_the_run_and_labelled_it_as_a_local_run_would(run):
    result, _, ports = run
    assert result.archive.name == RUN_ID
    m = json.loads((result.archive / "manifest.json").read_text())
    [s] = m["summary"]
    assert s["ledger"]["never_received"] == 0 and s["wakeup_ms"]["n"] + s["pickup_ms"]["n"] == 16
    assert m["variants"][0]["broker_config"]["enableRetryTopicV2"] == "false"
    harness = json.loads((result.archive / "prometheus" / "harness.json").read_text())["data"]["result"]
    sent = [r for r in harness if r["metric"]["__name__"] == "rmq_harness_messages_sent_total"]
    assert {(r["metric"]["job"], r["metric"]["run"], r["metric"]["variant"]) for r in sent} == {
        ("workers", RUN_ID, "unpatched")}
    assert sum(float(r["values"][-1][1]) for r in sent) == 16
    assert {r["metric"]["instance"] for r in sent} <= {f"127.0.0.1:{p}" for p in ports[:2]}
    broker = json.loads((result.archive / "prometheus" / "broker_pop.json").read_text())["data"]["result"]
    assert any(r["metric"].get("run") == RUN_ID and r["metric"]["job"] == "broker" for r in broker)


def test_every_workers_events_came_back_over_locust(run):
    result, own, _ = run
    # What each worker wrote on its own side ...
    written = {w: pd.concat([pd.read_parquet(p) for p in sorted((own / w / "events").glob("*.parquet"))])
               for w in WORKERS}
    assert all(len(df) for df in written.values())
    # ... is in the archive, every row of it, and nothing else.
    ev = pd.read_parquet(result.archive / "events" / "unpatched.parquet")
    assert (ev.run_id == RUN_ID).all()
    assert ev.groupby("worker").size().to_dict() == {w: len(df) for w, df in written.items()}
    assert set(ev.loc[ev.kind == "sent", "ledger_id"]) <= set(ev.loc[ev.kind == "acked", "ledger_id"])
    assert len(set(ev.loc[ev.kind == "sent", "ledger_id"])) == 16
    for w in written:
        sent = (own / w / "client" / f"{w}.log").read_bytes()
        assert (result.archive / "logs" / "unpatched" / "client" / f"{w}.log").read_bytes() == sent
