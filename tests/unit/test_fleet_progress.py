"""Live progress summed over a variant's workers: a worker too busy to answer keeps its last counts."""

import http.server
import threading
from types import SimpleNamespace as NS

import pytest

from harness.deploy.local.ports import port_free
from harness.workload.fleet import Progress, scrape

EXPOSITION = b"""# TYPE rmq_harness_messages_sent_total counter
rmq_harness_messages_sent_total{group="G"} 40.0
# TYPE rmq_harness_deliveries_total counter
rmq_harness_deliveries_total{group="G"} 7.0
"""


class _Metrics(http.server.BaseHTTPRequestHandler):
    exposition = EXPOSITION

    def do_GET(self):  # noqa: N802 - the handler's API
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.exposition)

    def log_message(self, *args):
        pass


def _silent_port() -> int:
    return next(p for p in range(47000, 48000) if port_free(p))


def _serve(exposition: bytes = EXPOSITION) -> http.server.HTTPServer:
    server = http.server.HTTPServer(("127.0.0.1", 0), type("Metrics", (_Metrics,), {"exposition": exposition}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _stop(*servers: http.server.HTTPServer) -> None:
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_worker_that_does_not_answer_counts_with_its_last_answer():
    server = _serve()
    try:
        up, busy = server.server_address[1], _silent_port()
        last = {busy: Progress(sent=32, deliveries=2048)}
        got = scrape([up, busy], last)
        assert (got.sent, got.deliveries) == (72, 2055)
        assert (got.cycle, got.sending) == (None, None)  # no worker with a producer
        assert last[up].sent == 40  # remembered for the next tick
        assert scrape([busy]) is None  # nothing known, nothing answered
    finally:
        _stop(server)


def _cycle_signal(cycle: int, sending: int) -> bytes:
    labels = '{protocol="grpc",scenario="s",variant="v"}'
    return EXPOSITION + (f"# TYPE rmq_harness_cycle gauge\nrmq_harness_cycle{labels} {cycle}.0\n"
                         f"# TYPE rmq_harness_producers_sending gauge\n"
                         f"rmq_harness_producers_sending{labels} {sending}.0\n").encode()


def test_the_cycle_is_the_newest_a_worker_started_and_the_producers_sending_are_summed():
    servers = [_serve(_cycle_signal(4, 1)), _serve(_cycle_signal(6, 0)), _serve()]
    try:
        got = scrape([s.server_address[1] for s in servers])
        assert (got.sent, got.cycle, got.sending) == (120, 6, 1)
        got = scrape([servers[1].server_address[1]])
        assert (got.cycle, got.sending) == (6, 0)  # drained: none sending, which is not "unknown"
    finally:
        _stop(*servers)


def _finished(monkeypatch, tmp_path, rows: int = 1, master_log: str = "") -> tuple[object, list[str]]:
    """A fleet of one variant and one worker that runs three ticks and whose metrics nobody can reach, its shard
    of ``rows`` events and its master's log as given: (the fleet, what it said)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.workload import fleet
    from harness.workload.fleet import LocustFleet, LocustGroup

    class Workers:
        ship_files, ticks = False, 3

        def running(self, variant: str) -> bool:
            self.ticks -= 1
            return self.ticks > 0

        def stop(self) -> None:
            pass

        def exit_codes(self, variant: str) -> dict:
            return {}

    said: list[str] = []
    monkeypatch.setattr(fleet.timing, "run_time_s", lambda _sc: 60)
    f = LocustFleet("r", NS(), [], tmp_path, lambda *_: tmp_path, Workers(), log=said.append)
    shards = tmp_path / "events"
    shards.mkdir(parents=True)
    pq.write_table(pa.table({"kind": ["sent"] * rows}), shards / "worker-1-0000.parquet")
    (tmp_path / "locust-master.log").write_text(master_log)
    f.groups = [LocustGroup("v", 0, ("worker-1",), {"worker-1": f"127.0.0.1:{_silent_port()}"}, shards, tmp_path)]
    monkeypatch.setattr(fleet, "METRICS_SILENT_S", 0.0)
    monkeypatch.setattr(fleet.process, "exit_code", lambda _pid: 0)
    monkeypatch.setattr(fleet.time, "sleep", lambda _s: None)
    return f, said


def test_a_variant_whose_worker_metrics_never_answer_is_said_once(monkeypatch, tmp_path):
    f, said = _finished(monkeypatch, tmp_path)
    f.wait(on_tick=lambda *_: None)
    assert len(said) == 2 and said[0].startswith("v: no worker's metrics answered at 127.0.0.1:")
    assert said[1].startswith("Locust finished: every master and worker exited")


def test_a_variant_whose_master_dropped_a_worker_or_that_recorded_nothing_fails_the_run(monkeypatch, tmp_path):
    from harness.core.errors import HarnessError

    dropped = "[18:54:48,513] m/INFO/locust.runners: Worker w-0 failed to send heartbeat, setting state to missing."
    f, _ = _finished(monkeypatch, tmp_path / "dropped", master_log=f"spawned\n{dropped}\n")
    with pytest.raises(HarnessError, match="v: Locust's master dropped 1 worker") as e:
        f.wait(on_tick=lambda *_: None)
    assert e.value.detail == dropped
    f, _ = _finished(monkeypatch, tmp_path / "empty", rows=0)
    with pytest.raises(HarnessError, match="v: its workers recorded no event"):
        f.wait(on_tick=lambda *_: None)


def test_a_worker_that_died_while_its_master_waits_fails_the_run_at_once(tmp_path, monkeypatch):
    from harness.core import process
    from harness.core.errors import HarnessError
    from harness.workload.fleet import LocustFleet, LocustGroup

    fleet = LocustFleet.__new__(LocustFleet)
    group = LocustGroup("unpatched", 4242, ("worker-1", "worker-2"), {}, tmp_path, tmp_path / "logs")
    fleet.groups = [group]
    codes = {"worker-1": None, "worker-2": 1}  # worker-2 could not bind its port
    fleet.workers = NS(exit_codes=lambda variant: codes, where=lambda variant, w: "")
    monkeypatch.setattr(process, "exit_code", lambda pid: None)  # the master still waits
    with pytest.raises(HarnessError, match=r"unpatched: Locust worker-2 exited with code 1 while the run went on; "
                                           r"see .*/logs/locust-worker-2.out"):
        fleet._check_workers_alive()
    codes["worker-2"] = 0  # done and gone (it shipped its events): nothing wrong
    fleet._check_workers_alive()
    monkeypatch.setattr(process, "exit_code", lambda pid: 0)  # the master ended too: the run's end decides
    codes["worker-2"] = 1
    fleet._check_workers_alive()
