"""An external variant (issue 32): brokers started by something other than the run (`rmq-harness brokers up`
under a state directory of its own) are measured as a cluster the harness does not own, beside the same build
under the run's own backend, and left as they were found."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from harness.cli.main import main
from harness.client import remoting
from harness.core.paths import REPO_ROOT
from harness.core.process import free_port
from harness.run.observability.prometheus import Prometheus, ScrapeTarget
from tests.chart.helm import one, render

RESOURCES = Path(__file__).parent.parent / "resources" / "scenarios"


@pytest.fixture(scope="module")
def outside(detached_unpatched, tmp_path_factory):
    """The session's cluster started by `brokers up` (detached, as an operator's would be), and a variants file
    naming it beside the same build."""
    _, backend, ep = detached_unpatched
    variants = tmp_path_factory.mktemp("outside") / "variants.yaml"
    variants.write_text("variants:\n  unpatched: {version: '5.3.3'}\n"
                        f"  outside: {{endpoints: {{namesrv: '{ep.namesrv}', proxy: '{ep.grpc}'}}}}\n")
    pids = {h.endpoints.variant: h.detail for h in backend.status()}
    return variants, ep, backend, pids


def test_a_setting_the_cluster_does_not_run_is_refused_before_anything_starts(outside, tmp_path, capsys):
    variants, *_ = outside
    runs = tmp_path / "runs"
    assert main(["--variants", str(variants), "run", "--variant", "outside", "--variant", "unpatched",
                 "--scenario", str(RESOURCES / "short-fourgroups-v2.yaml"), "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "runs enableRetryTopicV2=false" in err and "does not change a cluster it does not own" in err
    assert not runs.exists()


def test_the_cluster_is_measured_beside_a_local_build_and_left_as_found(outside, tmp_path, capsys):
    variants, ep, backend, pids = outside
    runs = tmp_path / "runs"
    # With Locust's web UI (--ui): the masters start and quit by themselves, as headless ones do.
    assert main(["--variants", str(variants), "run", "--variant", "outside", "--variant", "unpatched", "--ui",
                 "--scenario", str(RESOURCES / "short-burst.yaml"), "--order", "given", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert all(f"{v}: Locust's web UI at http://127.0.0.1:" in out for v in ("outside", "unpatched"))
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    m = json.loads((archive / "manifest.json").read_text())
    info = {v["name"]: v for v in m["variants"]}
    ext = info["outside"]["external"]
    assert info["outside"]["version"] == "5.3.3" and info["unpatched"]["external"] is None
    assert ext["suffix"].startswith("-rh") and not ext["kept"] and ext["removed"]
    assert info["outside"]["broker_config"]["enableRetryTopicV2"] == "false"  # what it runs, not a file written
    assert info["outside"]["clock_offset_ms"] is not None
    # Names stay the scenario's above the driver: both variants' events and summaries compare name for name.
    events = pq.read_table(archive / "events", columns=["variant", "group", "kind"]).to_pandas()
    groups = events[events["kind"] == "received"].groupby("variant")["group"].unique()
    assert {g for gs in groups for g in gs} == {"ShortBurstGroup"} and set(groups.index) == {"outside", "unpatched"}
    rows = {r["variant"]: r for r in m["summary"]}
    assert rows["outside"]["ledger"]["lost"] == 0 and rows["outside"]["retry_deliveries"] > 0
    # Left as found: the same processes, healthy, and none of the run's topics or groups.
    assert {h.endpoints.variant: h.detail for h in backend.status()} == pids
    assert not any(t.endswith(ext["suffix"]) for t in remoting.topics(ep.broker))
    assert not any(g.endswith(ext["suffix"]) for g in remoting.groups(ep.broker))



def _wait_for(what: str, check, timeout_s: float) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < end, f"{what}: not within {timeout_s:g} s"
        time.sleep(1)


def test_the_canary_on_the_cluster_fires_its_alert_while_the_broker_is_stopped_and_clears_after(outside, tmp_path):
    """`rmq-harness canary` against the cluster as a variant of yours, scraped by a real Prometheus that evaluates
    the chart's alerts (held 5 s instead of 5 min): SIGSTOP of the broker leaves messages owed past their grace and
    RmqHarnessMessagesOverdue fires; after SIGCONT they arrive and it clears. The canary stops on SIGTERM and
    takes its topics and groups with it."""
    variants, ep, backend, pids = outside
    groups = yaml.safe_load(one(render(sets=("monitoring.prometheusRule.for=5s",)), "ConfigMap", "-prometheus")
                            ["data"]["alerts.yml"])
    rules = tmp_path / "alerts.yml"
    rules.write_text(yaml.safe_dump(groups))
    port = free_port()
    log = tmp_path / "canary.log"
    with log.open("w") as out:
        canary = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "--variants", str(variants), "canary", "--variant", "outside",
             "--scenario", str(RESOURCES / "short-steady.yaml"), "--metrics-port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    prom = Prometheus(tmp_path / "prometheus", free_port())
    [broker_jvm] = [int(p.split("=")[1]) for p in pids["unpatched"].split() if p.startswith("proxy=")]
    try:
        prom.start([ScrapeTarget("canary", f"127.0.0.1:{port}", "outside")], interval_s=1.0, rules=[rules])

        def value(expr: str) -> float:
            found = prom.query(expr)["data"]["result"]
            return float(found[0]["value"][1]) if found else 0.0

        _wait_for("the canary's retries", lambda: value("sum(rmq_harness_retry_wakeup_seconds_count)") > 3, 120)
        assert "firing" not in prom.alerts().get("RmqHarnessMessagesOverdue", set())
        os.kill(broker_jvm, signal.SIGSTOP)
        try:
            # Owed past the grace (the long poll + 10 s: an unpatched broker's retries wait for the poll to run
            # out, on time), then held 5 s.
            _wait_for("the alert to fire", lambda: "firing" in prom.alerts().get("RmqHarnessMessagesOverdue", ()), 90)
        finally:
            os.kill(broker_jvm, signal.SIGCONT)
        _wait_for("the alert to clear", lambda: "RmqHarnessMessagesOverdue" not in prom.alerts(), 120)
        assert value("sum(rmq_harness_lost_messages_total)") == 0
        canary.send_signal(signal.SIGTERM)
        assert canary.wait(90) == 0, log.read_text()[-3000:]
    finally:
        canary.kill()
        prom.stop()
    text = log.read_text()
    assert "canary stopped; sent" in text and "late" in text
    assert not any("-rh" in t and "ShortSteady" in t for t in remoting.topics(ep.broker))
    assert {h.endpoints.variant: h.detail for h in backend.status()} == pids
