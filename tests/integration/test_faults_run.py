"""A real run with faults: a broker, a name server and a proxy of their own, each hit once while the load
runs; the run goes on, and its archive says what was done, when, and what became of every message."""

import json
from pathlib import Path

import pandas as pd

from tests.integration import leftovers

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-faults.yaml"
# The module's run: conftest.py's `archive` runs `rmq-harness run` with these options once for the module.
RUN = ["--variant", "unpatched", "--scenario", str(SCENARIO)]


def test_each_fault_hit_its_process_and_it_came_back(archive: Path):
    m = json.loads((archive / "manifest.json").read_text())
    faults = {f["label"]: f for f in m["faults"]}
    assert set(faults) == {"sigstop broker 3 s", "kill9 namesrv", "restart proxy"}
    for f in faults.values():
        assert f["error"] is None and f["variant"] == "unpatched"
        assert f["started_ns"] < f["ended_ns"] and f["delay_s"] < 5
    stop = faults["sigstop broker 3 s"]
    assert 3.0 <= stop["window_s"] < 10 and stop["back"] == ""  # the same process, resumed
    for label in ("kill9 namesrv", "restart proxy"):
        # A new process serves afterwards.
        assert faults[label]["back"] and faults[label]["back"] != faults[label]["process"]
    # The run's own processes: namesrv, broker and proxy each a JVM of its own, their logs archived.
    logs = archive / "logs" / "unpatched"
    assert {"namesrv.out", "broker.out", "proxy.out"} <= {p.name for p in logs.iterdir()}
    assert (logs / "broker" / "broker.log").exists()


def test_the_faults_are_events_with_their_windows(archive: Path):
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    faults = ev[ev.kind == "fault"].sort_values("started_ns")
    assert faults.worker.tolist() == ["harness"] * 3
    assert [d.split(":")[0] for d in faults.detail] == ["sigstop broker 3 s", "kill9 namesrv", "restart proxy"]
    assert (faults.started_ns < faults.t_client_ns).all()


def test_every_message_is_accounted_for_across_the_faults(archive: Path):
    [s] = json.loads((archive / "manifest.json").read_text())["summary"]
    ledger = s["ledger"]
    assert s["sent"] > 0 and ledger["owed"] == s["sent"]
    classes = ("acked_first", "acked_after_retry", "late", "duplicated", "dead_lettered", "lost")
    assert sum(ledger[c] for c in classes) == ledger["owed"]
    rows = {f["label"]: f for f in s["faults"]}
    assert set(rows) == {"sigstop broker 3 s", "kill9 namesrv", "restart proxy"}
    if rows["restart proxy"]["exposed"] == 0:
        _the_sends_had_stopped_for_want_of_a_route(archive)
        del rows["restart proxy"]
    for f in rows.values():
        # Steady traffic means something was in flight across each fault, and waited at least its window; unless
        # an earlier fault had stopped the sends already, and the send gap says so: after the name server's kill
        # the topic has no route until the broker registers again (every 30 s), and once that outlasted the
        # proxy's restart, whose exposed pairs were all delivered and waiting for their acks (2026-11-30); when it
        # came before the restart, nothing was in flight (checked above).
        assert f["exposed"] > 0
        assert f["longest_wait_ms"] is not None or f["send_gap_ms"] >= f["window_s"] * 1000, f
        assert sum(f[c] for c in ("acked_first", "acked_after_retry", "late", "duplicated",
                                  "dead_lettered", "lost")) == f["exposed"]
    assert rows["sigstop broker 3 s"]["delivery_gap_ms"] >= 2_500  # nothing delivered while the broker stood still


def _the_sends_had_stopped_for_want_of_a_route(archive: Path) -> None:
    """Nothing in flight when the proxy restarted: only when the name server's kill had taken the topic's route
    (the proxy's next refresh found none until the broker registered again, every 30 s) and every send since
    failed so. A make test run on a loaded machine lost the route at 17.8 s (2026-12-07); most runs keep it."""
    ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    faults = ev[ev.kind == "fault"]
    kill = faults[faults.detail.str.startswith("kill9 namesrv")].started_ns.iloc[0]
    restart = faults[faults.detail.str.startswith("restart proxy")].started_ns.iloc[0]
    no_route = ev[(ev.kind == "error") & ev.detail.str.contains("No topic route info", regex=False)
                  & ev.detail.str.startswith("send") & (ev.t_client_ns < restart)]
    assert len(no_route), "the proxy's restart exposed no message, and no send had failed for want of a route"
    first = no_route.t_client_ns.min()
    sent = ev[ev.kind == "sent"]
    assert kill < first and not ((sent.t_client_ns > first) & (sent.t_client_ns < restart)).any()


# Last: the run left nothing behind.
test_nothing_is_left_running = leftovers.test_nothing_is_left_running
