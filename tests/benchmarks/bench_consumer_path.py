"""Benchmark of the CPU a Locust worker's pop consumer spends per delivered message, without brokers: a real
PopConsumerUser and WorkerRuntime (metrics, event log writing its Parquet parts, Locust request events into
Locust's own stats) over a fake client driver whose receive and ack_all return canned deliveries at once.
Pure logic, one thread: `python -m tests.benchmarks.bench_consumer_path`. Asserts nothing.

- drain: tests/benchmarks/drain.yaml (batches of 32, every delivery acked), µs of process CPU per delivered
  message over >= 50,000 messages, the median of 3 runs.
- --dump FILE: instead, a fixed mix (nacks, retries, bodies that do not decode or name another group, duplicates,
  failed acks) under a clock that counts, written as JSON (event rows, Prometheus text, Locust request events,
  messages to the master): two versions of the code that write the same file look the same from outside.
"""

# ruff: noqa: E402 - the patching below must come before Locust (and anything importing it) is imported
from __future__ import annotations

import os

# As a worker is started (harness.workload.launch): everything but threads patched, before Locust is imported.
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
from gevent import monkey

monkey.patch_all(thread=False, queue=False)

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace as NS
from unittest import mock

from locust import events
from locust.stats import RequestStats
from prometheus_client import generate_latest

from harness.client.driver import Delivery, Received
from harness.contracts.endpoints import Endpoints
from harness.contracts.events import MessageBody, to_table
from harness.inputs.catalogue import load_scenario
from harness.workload import runtime as runtime_module
from harness.workload.runtime import WorkerRuntime
from harness.workload.spec import WorkloadSpec
from harness.workload.users import PopConsumerUser, user_classes

HERE = Path(__file__).parent
EP = Endpoints("v", "5.3.3", "h:8081", "h:8080", "h:10911", "h:9876", "http://h:5557/metrics")
MESSAGES = 60_000
REPEATS = 3


class FakeConsumer:
    """Hands out the canned deliveries a batch at a time; acks fail where ``ack_errors`` says."""

    def __init__(self, deliveries: list[Delivery], ack_errors: dict[str, Exception] | None = None) -> None:
        self.deliveries = deliveries
        self.at = 0
        self.ack_errors = ack_errors or {}

    def receive(self, max_messages: int, invisible_s: int) -> Received:
        batch = self.deliveries[self.at:self.at + max_messages]
        self.at += len(batch)
        return Received(batch, time.time_ns())

    def ack(self, delivery: Delivery) -> None:
        pass

    def ack_all(self, deliveries: list[Delivery]) -> list[Exception | None]:
        if any(d.message_id == "raise" for d in deliveries):
            raise RuntimeError("the whole batch failed")
        return [self.ack_errors.get(d.message_id) for d in deliveries]

    def change_invisible(self, delivery: Delivery, invisible_s: int, suspend: bool = False) -> None:
        if delivery.message_id.startswith("nackfail"):
            raise RuntimeError("change refused")


class FakeDriver:
    protocol = "remoting"

    def __init__(self, consumer: FakeConsumer) -> None:
        self.consumer = consumer

    def pop_consumer(self, *_args: object, **_kwargs: object) -> FakeConsumer:
        return self.consumer

    def close(self) -> None:
        pass


def consumer(scenario_file: str, root: Path, deliveries: list[Delivery], flush_every: int | None = None,
             ack_errors: dict[str, Exception] | None = None) -> tuple[PopConsumerUser, list[tuple]]:
    """A started consumer of the scenario's first group over a fake driver; the list gets each message it
    sends to the master."""
    spec = WorkloadSpec(run_id="r1", variant="v", scenario=load_scenario(str(HERE / scenario_file)), endpoints=EP,
                        worker="worker-1", events_dir=root / "events", client_log_dir=root / "client")
    fake = FakeConsumer(deliveries, ack_errors)
    with mock.patch.object(runtime_module, "driver", lambda *_a, **_k: FakeDriver(fake)):
        rt = WorkerRuntime(spec)
    if flush_every:
        rt.log.flush_every = flush_every
    sent: list[tuple] = []
    env = NS(runner=NS(send_message=lambda kind, data: sent.append((kind, data))))
    cls = next(c for c in user_classes(spec, rt) if c.__name__.startswith("Consumer_"))
    user = cls(env)
    with mock.patch("gevent.sleep"):  # its delay_s: the backlog is here already
        user.on_start()
    return user, sent


def bodies(n: int, group: str, topic: str) -> list[bytes]:
    return [MessageBody(f"worker-1-m{i}", topic, group, 1_700_000_000_000_000_000 + i, "r1", i // 1000, "TagA",
                        None).encode() for i in range(n)]


def drain_once(n: int) -> float:
    """CPU µs per delivered message, polls until ``n`` messages are handled and acked."""
    store = 1_700_000_000_000
    deliveries = [Delivery(b, f"id{i}", 1, store, store, None, "TagA")
                  for i, b in enumerate(bodies(n, "DrainGroup", "DrainTopic"))]
    with tempfile.TemporaryDirectory() as tmp:
        user, _ = consumer("drain.yaml", Path(tmp), deliveries)
        polls = -(-n // user.spec.scenario.consume.batch)
        started = time.process_time()
        for _ in range(polls):
            user.poll()
        spent = time.process_time() - started
        user.runtime.log.close()
    return spent / n * 1e6


def mixed_deliveries(topic: str, group: str) -> tuple[list[Delivery], dict[str, Exception]]:
    """Every branch a delivery can take, in batches of the mixed scenario."""
    base = 1_700_000_000_000
    good = bodies(400, group, topic)
    weird = [b"not json", b"", b"[]", b'"x"', b"null", b'{"ledger_id": "x"}', b"\xff\xfe",
             b'{"ledger_id":7,"origin_topic":1,"group":2,"send_ns":"42","run_id":3,"cycle":"5","tag":9,'
             b'"message_group":1.5}',
             b'{"ledger_id":"a","origin_topic":"T","group":"G","send_ns":1.9,"run_id":"r","cycle":2.7}',
             b'{"ledger_id":"a","origin_topic":"T","group":"G","send_ns":true,"run_id":"r","cycle":false}',
             b'{"ledger_id":"a","origin_topic":"T","group":"G","send_ns":"x","run_id":"r"}',
             b'{"ledger_id":"a","origin_topic":"T","group":"G","send_ns":1,"run_id":"r","cycle":[1]}',
             b'{"ledger_id":null,"origin_topic":"T","group":"G","send_ns":1,"run_id":"r","extra":1}',
             b'{"ledger_id":"b","origin_topic":"Other","group":"' + group.encode() + b'","send_ns":1,"run_id":"r"}',
             b'{"ledger_id":"c","origin_topic":"' + topic.encode() + b'","group":"*","send_ns":1,"run_id":"r"}',
             b'{"ledger_id":"d","origin_topic":"' + topic.encode() + b'","group":"Else","send_ns":1,"run_id":"r"}']
    out: list[Delivery] = []
    errors: dict[str, Exception] = {}
    for i, b in enumerate(good):
        out.append(Delivery(b, f"m{i}", 1, base + i, base + i - 5, None, "TagA"))
        if i % 7 == 0:  # a retry: waited for, or picked up late
            out.append(Delivery(b, f"r{i}", 2, base + i * 10 ** (i % 3), None, None, None))
        if i % 50 == 3:  # a duplicate of one acked earlier
            out.append(Delivery(good[i - 3], f"dup{i}", 1, base, base, None, "TagA"))
        if i % 61 == 5:
            out.append(Delivery(b, f"nackfail{i}", 1, base, base, None, "TagA"))
        if i % 43 == 1:
            errors[f"m{i}"] = RuntimeError(f"ack refused {i}")
    out[100:100] = [Delivery(b, f"w{i}", 1 + i % 2, base, base, None, None) for i, b in enumerate(weird)]
    out.insert(200, Delivery(good[0], "raise", 1, base, base, None, None))
    return out, errors


def dump(path: Path) -> None:
    fired: list[dict] = []

    def on_request(**kw: object) -> None:
        fired.append({k: repr(v) for k, v in sorted(kw.items())})

    clock = itertools.count(1_700_000_000_000_000_000, 1_234_567)
    events.request.add_listener(on_request)
    with tempfile.TemporaryDirectory() as tmp, mock.patch("time.time_ns", lambda: next(clock)):
        sc = load_scenario(str(HERE / "mixed.yaml"))
        deliveries, errors = mixed_deliveries(sc.groups[0].topic, sc.groups[0].name)
        user, sent = consumer("mixed.yaml", Path(tmp), deliveries, flush_every=10 ** 9, ack_errors=errors)
        while user.consumer.at < len(deliveries):
            user.poll()
        rows = user.runtime.log._rows
        out = {"rows": [{k: repr(v) for k, v in r.items()} for r in rows], "table": to_table(rows).to_pylist(),
               "metrics": generate_latest(user.runtime.metrics.registry).decode(),
               "fired": fired, "sent": sent, "counted": user.runtime.log._counted}
    path.write_text(json.dumps(out, indent=1, default=repr))
    print(f"{len(out['rows'])} events, {len(fired)} Locust request events, {len(sent)} messages -> {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=MESSAGES)
    parser.add_argument("--dump", type=Path, help="write the observable output of the fixed mix here instead")
    args = parser.parse_args()
    if args.dump:
        dump(args.dump)
        return
    # What a worker's runner does with every request event: Locust's own stats.
    stats = RequestStats()
    events.request.add_listener(lambda request_type, name, response_time, response_length, exception=None, **_:
                                stats.log_request(request_type, name, response_time, response_length))
    runs = [drain_once(args.messages) for _ in range(REPEATS)]
    print(f"consumer path (poll -> handle -> flush_acks), {args.messages} messages x {REPEATS}: "
          f"{statistics.median(runs):.2f} µs/message median ({', '.join(f'{r:.2f}' for r in runs)})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
