"""Events: one row per thing that happened in a run, the harness's raw record (Parquet).

The columns are the contract between workloads (which write them) and analysis (which reads them);
``EVENT_SCHEMA_VERSION`` changes whenever a column changes meaning. New kinds and nullable columns may
be added without breaking readers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts import schemas

# Readers take every earlier version too (harness.contracts.schemas.EVENTS says what each brought).
EVENT_SCHEMA_VERSION = schemas.EVENTS.version
KINDS = ("sent", "received", "acked", "nacked", "empty_poll", "error", "dlq_seen", "cycle_start", "cycle_end",
         "fault", "refused", "action")

SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("variant", pa.string()),
        ("scenario", pa.string()),
        ("worker", pa.string()),
        ("consumer", pa.string()),  # client id of the producer / consumer user
        ("protocol", pa.string()),
        ("kind", pa.string()),
        ("topic", pa.string()),  # the topic the client used (subscription or send target)
        ("group", pa.string()),
        ("ledger_id", pa.string()),
        ("message_id", pa.string()),
        ("delivery_attempt", pa.int32()),
        ("t_client_ns", pa.int64()),  # wall clock when the event happened at the client
        ("store_ts_ms", pa.int64()),  # broker store time of the delivered copy (a retry copy on retries)
        ("born_ts_ms", pa.int64()),
        ("poll_started_ns", pa.int64()),  # wall clock when the receive call that returned it started
        ("invisible_ms", pa.int64()),  # nacked: the invisible duration requested; received: at receive
        ("origin_topic", pa.string()),  # from the message body: the topic it was first sent to
        ("intended_group", pa.string()),  # from the message body
        # error text; cycle_end: drained | timeout; fault: what was done to which process; action: what was asked and
        # answered
        ("detail", pa.string()),
        ("cycle", pa.int32()),  # the produce-and-nack cycle the message belongs to (from its body)
        ("tag", pa.string()),  # sent: the tag given; received / dlq_seen: the tag the message arrived with
        ("message_group", pa.string()),  # FIFO: the message group it was sent in (from its body)
        # acked: when the ack call started (t_client_ns is when it returned; the broker saw it in between)
        ("started_ns", pa.int64()),
        # received: the topic the message came under when it is not the one popped (a retry under its %RETRY%
        # name), as the wire names it (version 8)
        ("delivered_topic", pa.string()),
        ("queue_id", pa.int32()),  # received: the queue of the copy delivered, where the client says (version 8)
        # Derived (filled by the archive writer; see harness.measure.latency):
        ("wakeup_ms", pa.float64()),
        ("redelivery_ms", pa.float64()),
        ("pickup_ms", pa.float64()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
DERIVED = ("wakeup_ms", "redelivery_ms", "pickup_ms")
# What each version's files hold; a reader adds the missing ones as nulls.
_ADDED = {2: ("cycle", "pickup_ms"), 3: ("tag",), 4: ("message_group",), 5: ("started_ns",),
          8: ("delivered_topic", "queue_id")}
COLUMNS_BY_VERSION = {v: tuple(c for c in COLUMNS if not any(c in cols for w, cols in _ADDED.items() if w > v))
                      for v in range(1, EVENT_SCHEMA_VERSION + 1)}


@dataclass
class MessageBody:
    """The harness's own JSON message body, so nothing depends on broker properties surviving."""

    ledger_id: str
    origin_topic: str
    group: str  # the group the message is intended for
    send_ns: int
    run_id: str
    cycle: int | None = None
    tag: str | None = None  # the tag it was sent with (the broker's own tag property may not survive)
    message_group: str | None = None

    def encode(self) -> bytes:
        return json.dumps(self.__dict__, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> MessageBody | None:
        try:
            d = json.loads(raw)
            cycle, tag, mg = d.get("cycle"), d.get("tag"), d.get("message_group")
            return cls(str(d["ledger_id"]), str(d["origin_topic"]), str(d["group"]), int(d["send_ns"]),
                       str(d["run_id"]), int(cycle) if cycle is not None else None,
                       str(tag) if tag is not None else None, str(mg) if mg is not None else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


# The last part an EventLog writes (``close``) carries, in its Parquet metadata under this key, how many events of
# each kind it recorded in all: the archive writer checks every one of them reached the archive.
COUNTED = b"rmq_harness.counted"


@dataclass
class EventLog:
    """Collects events in memory and writes them as numbered Parquet parts under ``directory``; ``close``
    writes the last one, sealed with the count of every kind recorded.

    Thread-safe: client callbacks may record from the client's own threads.
    """

    directory: Path
    stem: str
    common: dict[str, str]
    flush_every: int = 50_000
    _rows: list[dict] = field(default_factory=list)
    _parts: int = 0
    _counted: dict[str, int] = field(default_factory=dict)
    _sealed: dict[str, int] | None = None  # the counts the last sealed part carries
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, **cols: object) -> dict:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        row = {**self.common, "kind": kind, "t_client_ns": cols.pop("t_client_ns", None) or time.time_ns(), **cols}
        with self._lock:
            self._rows.append(row)
            self._counted[kind] = self._counted.get(kind, 0) + 1
            full = len(self._rows) >= self.flush_every
        if full:
            self.flush()
        return row

    def flush(self, seal: bool = False) -> Path | None:
        with self._lock:
            if seal and not self._rows and self._sealed == self._counted:
                return None  # closed twice with nothing new between
            rows, self._rows = self._rows, []
            if not rows and not seal:
                return None
            part = self._parts
            self._parts += 1
            counted = dict(self._counted)
            if seal:
                self._sealed = counted
        path = self.directory / f"{self.stem}-{part:04d}.parquet"
        write_parquet(rows, path, {COUNTED: json.dumps(counted).encode()} if seal else None)
        return path

    def close(self) -> Path | None:
        """Write what is left as the sealed last part (an empty one when nothing is left)."""
        return self.flush(seal=True)


_ROW = pa.struct(list(SCHEMA))


def to_table(rows: Iterable[dict]) -> pa.Table:
    """The events as a table of SCHEMA (a key a row lacks: null; one it has beyond: ignored). Arrow converts the
    dicts itself, in a quarter of the CPU a column at a time in Python took (50,000 rows: 0.09 s against 0.43 s),
    which a worker spends in the middle of its load."""
    return pa.Table.from_struct_array(pa.array(list(rows), type=_ROW))


def write_parquet(rows: Iterable[dict], path: Path, metadata: dict[bytes, bytes] | None = None) -> None:
    """Write atomically: a reader never sees a half-written part. ``metadata`` goes into the file's schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    table = to_table(rows)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    pq.write_table(table, tmp)
    tmp.replace(path)


def counted(path: Path) -> dict[str, int] | None:
    """The per-kind counts a sealed part carries (EventLog.close), None for any other part."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[COUNTED]) if COUNTED in meta else None
