"""A worker's files back to its master over Locust's messages: split, rebuilt byte for byte, refused when
damaged or not the worker's own, and a worker that never delivers named."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from harness.contracts.endpoints import Endpoints
from harness.inputs.catalogue import load_scenario
from harness.workload import shipping
from harness.workload.fleet import missing_events
from harness.workload.spec import MASTER, WorkloadSpec

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"  # 2 workers
EP = Endpoints("v", "5.3.3", "h:8081", "h:8080", "h:10911", "h:9876", "http://h:5557/metrics")


def spec(worker: str, root: Path) -> WorkloadSpec:
    return WorkloadSpec(run_id="r1", variant="v", scenario=load_scenario(str(SCENARIO)), endpoints=EP, worker=worker,
                        events_dir=root / "events", client_log_dir=root / "client", ship_files=True)


def inbox(tmp_path: Path) -> shipping.Inbox:
    dirs = {shipping.EVENTS: tmp_path / "in" / "events", shipping.CLIENT_LOG: tmp_path / "in" / "client"}
    return shipping.Inbox(dirs, ["worker-1", "worker-2"])


def deliver(box: shipping.Inbox, worker: str, files: list[tuple[str, Path]], chunk: int) -> None:
    for kind, path in files:
        for msg in shipping.parts(worker, kind, path, chunk):
            box.part(msg)
    box.shipped(shipping.listing(worker, files))


def test_a_file_split_into_chunks_is_rebuilt_byte_for_byte_and_only_then_appears(tmp_path: Path):
    shard = tmp_path / "worker-1-0000.parquet"
    shard.write_bytes(os.urandom(2500))
    msgs = list(shipping.parts("worker-1", shipping.EVENTS, shard, chunk=1000))
    assert [m["seq"] for m in msgs] == [0, 1, 2] and [len(m["data"]) for m in msgs] == [1000, 1000, 500]
    box = inbox(tmp_path)
    for m in msgs:
        box.part(m)
    final = tmp_path / "in" / "events" / shard.name
    assert not final.exists()  # a reader never sees half a shard
    assert box.missing() == ["worker-1", "worker-2"]
    box.shipped(shipping.listing("worker-1", [(shipping.EVENTS, shard)]))
    assert final.read_bytes() == shard.read_bytes()
    assert box.missing() == ["worker-2"] and box.errors == []
    assert [p.name for p in final.parent.iterdir() if p.name.endswith(".partial")] == []


def test_an_empty_file_and_a_client_log_arrive_where_the_master_keeps_them(tmp_path: Path):
    (tmp_path / "worker-2-0000.parquet").write_bytes(b"")
    (tmp_path / "worker-2.log").write_text("client log\n")
    box = inbox(tmp_path)
    deliver(box, "worker-2", [(shipping.EVENTS, tmp_path / "worker-2-0000.parquet"),
                              (shipping.CLIENT_LOG, tmp_path / "worker-2.log")], chunk=4)
    assert (tmp_path / "in" / "events" / "worker-2-0000.parquet").read_bytes() == b""
    assert (tmp_path / "in" / "client" / "worker-2.log").read_text() == "client log\n"
    assert box.missing() == ["worker-1"]


def test_a_damaged_file_is_refused_and_its_worker_stays_missing(tmp_path: Path):
    shard = tmp_path / "worker-1-0000.parquet"
    shard.write_bytes(b"0123456789" * 5)
    box = inbox(tmp_path)
    for m in shipping.parts("worker-1", shipping.EVENTS, shard, chunk=10):
        box.part({**m, "data": m["data"].replace(b"5", b"X")} if m["seq"] == 2 else m)
    box.shipped(shipping.listing("worker-1", [(shipping.EVENTS, shard)]))
    assert not (tmp_path / "in" / "events" / shard.name).exists()
    assert "worker-1" in box.missing()
    assert "worker-1: worker-1-0000.parquet arrived damaged" in box.errors[0]


def test_a_chunk_out_of_order_is_refused(tmp_path: Path):
    shard = tmp_path / "worker-1-0000.parquet"
    shard.write_bytes(b"a" * 30)
    box = inbox(tmp_path)
    first, second, third = shipping.parts("worker-1", shipping.EVENTS, shard, chunk=10)
    box.part(first)
    box.part(third)
    box.part(second)
    box.shipped(shipping.listing("worker-1", [(shipping.EVENTS, shard)]))
    assert "out of order" in box.errors[0]
    assert box.missing() == ["worker-1", "worker-2"]


@pytest.mark.parametrize(("worker", "name"), [
    ("worker-1", "worker-2-0000.parquet"), ("worker-1", "../worker-1-0.parquet"),
    ("worker-9", "worker-9-0000.parquet"), ("worker-1", ".worker-1.shipped.json")])
def test_a_worker_writes_only_its_own_plain_files(tmp_path: Path, worker: str, name: str):
    box = inbox(tmp_path)
    box.part({"worker": worker, "kind": shipping.EVENTS, "name": name, "seq": 0, "data": b"x"})
    assert box.errors and f"refused file {name!r}" in box.errors[0]
    assert list((tmp_path / "in" / "events").iterdir()) == []


def test_missing_events_names_a_worker_whose_files_did_not_all_arrive(tmp_path: Path):
    shards = tmp_path / "events"
    shards.mkdir()
    (shards / "worker-1-0000.parquet").write_bytes(b"x")
    (shards / "worker-2-0000.parquet").write_bytes(b"x")
    # Written beside each other (processes): both there.
    assert missing_events(shards, ["worker-1", "worker-2"], shipped=False) == []
    # Sent over: a shard without its worker's receipt may be one of several, so it does not count.
    shipping.receipt(shards, "worker-1").write_text("[]")
    assert missing_events(shards, ["worker-1", "worker-2"], shipped=True) == ["worker-2"]
    assert missing_events(shards, ["worker-1", "worker-3"], shipped=False) == ["worker-3"]


class Runner:
    """Locust's runners as the shipping code uses them, master and workers wired to each other in-process."""

    def __init__(self) -> None:
        self.handlers: dict[str, object] = {}
        self.peers: list[Runner] = []
        self.stopped = False

    def register_message(self, kind: str, handler: object, concurrent: bool = False) -> None:
        self.handlers[kind] = handler

    def send_message(self, kind: str, data: object = None) -> None:
        for peer in self.peers:
            if kind in peer.handlers:
                peer.handlers[kind](environment=None, msg=NS(data=data))

    def stop(self) -> None:
        self.stopped = True


def test_when_the_master_stops_every_worker_stops_flushes_and_its_files_land_in_the_masters_dirs(tmp_path: Path):
    master, events = Runner(), NS(test_stop=NS(add_listener=lambda f: listeners.append(f)))
    listeners: list = []
    box = shipping.attach_master(master, events, spec(MASTER, tmp_path / "run"), timeout_s=5)
    closed = []
    for w in ("worker-1", "worker-2"):
        ws = spec(w, tmp_path / w)
        runner = Runner()
        runner.peers, master.peers = [master], [*master.peers, runner]

        def close(ws: WorkloadSpec = ws) -> None:
            # The last events are written when the runtime closes: only then may the worker send them.
            ws.events_dir.mkdir(parents=True)
            (ws.events_dir / f"{ws.worker}-0000.parquet").write_bytes(ws.worker.encode() * 100)
            closed.append(ws.worker)

        shipping.attach_worker(runner, ws, close)
    [stop] = listeners
    stop(environment=None)
    assert closed == ["worker-1", "worker-2"] and all(r.stopped for r in master.peers)
    got = sorted(p.name for p in (tmp_path / "run" / "events").glob("*.parquet"))
    assert got == ["worker-1-0000.parquet", "worker-2-0000.parquet"]
    assert box.missing() == []
    assert missing_events(tmp_path / "run" / "events", ["worker-1", "worker-2"], shipped=True) == []


def test_a_worker_that_never_answers_is_waited_for_a_while_and_then_named(tmp_path: Path):
    master, listeners = Runner(), []
    box = shipping.attach_master(master, NS(test_stop=NS(add_listener=listeners.append)), spec(MASTER, tmp_path),
                                 timeout_s=0.3)
    listeners[0](environment=None)
    assert box.missing() == ["worker-1", "worker-2"]
