"""An external variant (issue 32): brokers started by something other than the run (`rmq-harness brokers up`
under a state directory of its own) are measured as a cluster the harness does not own, beside the same build
under the run's own backend, and left as they were found."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.cli.main import main
from harness.client import remoting

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

