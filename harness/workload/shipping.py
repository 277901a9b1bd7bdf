"""A worker's files back to its master at the end of a run, over Locust's own master/worker channel.

Worker pods share no volume with the run's pod. When the master stops (its run time is up, or every
producer is done) it asks its workers for their files; each stops its users, writes its last events, and
sends its event shards and client log in chunks, then a list of what it sent with sizes and digests. The
master writes each file under a hidden name, renames it into place once its digest matches, and then
writes the worker's receipt. A worker without a receipt has not delivered: the fleet names it.

Why Locust's channel: it already connects every worker to its master, ordered per worker, and needs
nothing of the cluster (no shared storage, no extra port, no exec into pods).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from harness.contracts.workers import worker_name
from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until
from harness.workload.spec import WorkloadSpec

SHIP = "rmq_files_ship"  # master -> workers: stop, flush, send your files
PART = "rmq_files_part"  # worker -> master: {"worker", "kind", "name", "seq", "data"} one chunk of a file
SHIPPED = "rmq_files_shipped"  # worker -> master: {"worker", "files": [{"kind", "name", "size", "sha256"}]}
EVENTS = "events"
CLIENT_LOG = "client_log"
# Chunks small enough that heartbeats and the other workers' messages pass between them.
CHUNK = 1 << 20
# How long the master waits for every worker's files before it quits without them (the fleet then fails
# the run naming the workers whose files are missing).
TIMEOUT_S = 60.0

log = logging.getLogger(__name__)


def receipt(events_dir: Path, worker: str) -> Path:
    """Written by the master once every file ``worker`` listed arrived intact."""
    return events_dir / f".{worker}.shipped.json"


def outbox(spec: WorkloadSpec) -> list[tuple[str, Path]]:
    """What a worker sends: its event shards and its client's log (the runtime's file names)."""
    files = [(EVENTS, p) for p in sorted(spec.events_dir.glob(f"{spec.worker}-*.parquet"))]
    client_log = spec.client_log_dir / f"{spec.worker}.log"
    if client_log.is_file():
        files.append((CLIENT_LOG, client_log))
    return files


def parts(worker: str, kind: str, path: Path, chunk: int = CHUNK) -> Iterator[dict]:
    """One file as PART messages (at least one, so an empty file arrives too)."""
    with path.open("rb") as f:
        seq = 0
        while True:
            data = f.read(chunk)
            if data or seq == 0:
                yield {"worker": worker, "kind": kind, "name": path.name, "seq": seq, "data": data}
            if len(data) < chunk:
                return
            seq += 1


def digest(path: Path) -> tuple[int, str]:
    """(size, sha256) of a file, read in chunks."""
    h, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while data := f.read(CHUNK):
            h.update(data)
            size += len(data)
    return size, h.hexdigest()


def listing(worker: str, files: Sequence[tuple[str, Path]]) -> dict:
    """The SHIPPED message: what the master must have received from ``worker``."""
    entries = []
    for kind, path in files:
        size, sha256 = digest(path)
        entries.append({"kind": kind, "name": path.name, "size": size, "sha256": sha256})
    return {"worker": worker, "files": entries}


def send(send_message: Callable[[str, dict], None], worker: str, files: Sequence[tuple[str, Path]],
         chunk: int = CHUNK) -> None:
    import gevent  # here: the run's own process imports this module for receipt() and runs no gevent

    for kind, path in files:
        for msg in parts(worker, kind, path, chunk):
            send_message(PART, msg)
            gevent.sleep(0)  # let the worker's heartbeat out between chunks
    send_message(SHIPPED, listing(worker, files))


class Inbox:
    """The master's side: files of its workers, written into ``dirs[kind]``; every worker of ``expected``
    delivered once its receipt exists."""

    def __init__(self, dirs: Mapping[str, Path], expected: Sequence[str]) -> None:
        self.dirs = dict(dirs)
        self.expected = list(expected)
        self.errors: list[str] = []
        self._next: dict[tuple[str, str, str], int] = {}  # (worker, kind, name) -> the next chunk expected
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)

    def _partial(self, kind: str, name: str) -> Path:
        return self.dirs[kind] / f".{name}.partial"

    def _refuse(self, what: str) -> None:
        self.errors.append(what)
        log.error(what)

    def _valid(self, worker: str, kind: str, name: str) -> bool:
        # A worker writes only its own files, by plain names in the directories the master chose.
        ok = (worker in self.expected and kind in self.dirs and Path(name).name == name
              and name.startswith((f"{worker}-", f"{worker}.")) and not name.startswith("."))
        if not ok:
            self._refuse(f"refused file {name!r} ({kind}) from {worker!r}")
        return ok

    def part(self, msg: Mapping) -> None:
        worker, kind, name, seq = msg["worker"], msg["kind"], msg["name"], msg["seq"]
        if not self._valid(worker, kind, name):
            return
        key = (worker, kind, name)
        if seq != self._next.get(key, 0):
            self._refuse(f"{worker}: chunk {seq} of {name} out of order (expected {self._next.get(key, 0)})")
            return
        with self._partial(kind, name).open("wb" if seq == 0 else "ab") as f:
            f.write(msg["data"])
        self._next[key] = seq + 1

    def shipped(self, msg: Mapping) -> None:
        worker = msg["worker"]
        arrived = []
        for entry in msg["files"]:
            kind, name = entry["kind"], entry["name"]
            if not self._valid(worker, kind, name):
                return
            partial = self._partial(kind, name)
            size, sha256 = digest(partial) if partial.is_file() else (None, None)
            if (size, sha256) != (entry["size"], entry["sha256"]):
                got = "nothing" if size is None else f"{size} bytes, sha256 {sha256[:12]}"
                self._refuse(f"{worker}: {name} arrived damaged ({got}; sent {entry['size']} bytes)")
                return
            arrived.append((partial, self.dirs[kind] / name))
        for partial, final in arrived:
            partial.replace(final)  # atomic: a reader never sees half a shard
        done = receipt(self.dirs[EVENTS], worker)
        tmp = done.with_name(f"{done.name}.tmp")
        tmp.write_text(json.dumps(msg["files"]))
        os.replace(tmp, done)

    def missing(self) -> list[str]:
        return [w for w in self.expected if not receipt(self.dirs[EVENTS], w).is_file()]


def attach_master(runner: object, events: object, spec: WorkloadSpec, timeout_s: float = TIMEOUT_S) -> Inbox:
    """On the master: take the workers' files, and when the test stops ask for them and wait (up to
    ``timeout_s``) before Locust goes on to quit, which ends the workers."""
    inbox = Inbox({EVENTS: spec.events_dir, CLIENT_LOG: spec.client_log_dir},
                  [worker_name(n) for n in range(1, spec.scenario.workers + 1)])
    runner.register_message(PART, lambda environment, msg, **_kw: inbox.part(msg.data))
    runner.register_message(SHIPPED, lambda environment, msg, **_kw: inbox.shipped(msg.data))

    import gevent

    def collect(environment: object, **_kw: object) -> None:
        runner.send_message(SHIP, {})

        def arrived() -> bool | Pending:
            missing = inbox.missing()
            return Pending(f"none yet from {', '.join(missing)}") if missing else True

        try:
            wait_until("the workers' files", arrived, timeout_s, interval_s=0.2, sleep=gevent.sleep)
        except HarnessError as e:
            log.error("%s", e)  # the run's event check names what is missing

    events.test_stop.add_listener(collect)
    return inbox


def attach_worker(runner: object, spec: WorkloadSpec, close: Callable[[], None]) -> None:
    """On a worker: when the master asks, stop the users, write the last events (``close``), send the files."""
    def ship(environment: object, msg: object, **_kw: object) -> None:
        runner.stop()
        close()
        send(runner.send_message, spec.worker, outbox(spec))

    # Concurrent: stopping the users must not hold up the worker's message loop.
    runner.register_message(SHIP, ship, concurrent=True)
