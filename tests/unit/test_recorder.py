"""The recorders behind the Locust users: the worker's cycle signal, and a consumer's sinks for one delivery.

The whole of what the users write (event rows, metrics, Locust request events) is compared before and after a
change by tests/benchmarks/bench_consumer_path.py --dump."""

from types import ModuleType
from types import SimpleNamespace as NS

import pytest
from prometheus_client import generate_latest

from harness.client.driver import Delivery, Received
from harness.contracts import metrics
from harness.contracts.events import MessageBody
from harness.workload.runtime import GroupMetrics, RecentKeys

RUN = {"variant": "v", "scenario": "s", "protocol": "grpc"}


@pytest.fixture
def recorder(monkeypatch) -> ModuleType:
    # Imported here, without Locust's gevent patching of everything (a worker patches all but threads:
    # harness.workload.launch), which would stop this test process's own threads.
    monkeypatch.setenv("LOCUST_SKIP_MONKEY_PATCH", "1")
    from harness.workload import recorder

    return recorder


def _runtime() -> NS:
    m = metrics.create()
    rows: list[tuple[str, dict]] = []
    return NS(metrics=m, run_labels=RUN, protocol="grpc", newest_cycle=-1, rows=rows,
              log=NS(record=lambda kind, **cols: rows.append((kind, cols))),
              labels=lambda group: {**RUN, "group": group},
              group_metrics=lambda group: GroupMetrics(m, {**RUN, "group": group}),
              acked=RecentKeys(60.0), nack_due_ms={}, spec=NS(scenario=NS(consume=NS(invisible_s=15))))


def _sample(rt: NS, name: str) -> float | None:
    return rt.metrics.registry.get_sample_value(name, RUN)


def test_the_cycle_signal_is_the_newest_cycle_started_and_the_producers_not_yet_draining(recorder):
    rt = _runtime()
    assert _sample(rt, "rmq_harness_cycle") is None and _sample(rt, "rmq_harness_producers_sending") is None
    a, b = recorder.ProducerRecorder(rt, "w-producer0", "T"), recorder.ProducerRecorder(rt, "w-producer1", "T")
    assert _sample(rt, "rmq_harness_producers_sending") == 2
    assert _sample(rt, "rmq_harness_cycle") is None  # no cycle started yet: absent, not 0
    a.cycle_started(0)
    a.cycle_started(1)
    b.cycle_started(0)  # a producer behind the other does not set it back
    assert _sample(rt, "rmq_harness_cycle") == 1
    a.draining()
    assert _sample(rt, "rmq_harness_producers_sending") == 1
    b.cycle_started(2)
    b.draining()
    assert (_sample(rt, "rmq_harness_cycle"), _sample(rt, "rmq_harness_producers_sending")) == (2, 0)
    assert [(k, c["cycle"]) for k, c in rt.rows] == [("cycle_start", 0), ("cycle_start", 1), ("cycle_start", 0),
                                                    ("cycle_start", 2)]


def test_a_nacked_delivery_that_comes_back_is_measured_against_its_due_time(recorder, monkeypatch):
    rt = _runtime()
    fired: list[dict] = []
    monkeypatch.setattr(recorder.events.request, "fire", lambda **kw: fired.append(kw))
    rec = recorder.ConsumerRecorder(rt, "w-G-consumer0", "G", "T")
    body = MessageBody("w-m1", "T", "G", 1, "r1", 0, "TagA").encode()
    first = Delivery(body, "id1", 1, 1_000, 999, None, "TagA")
    started = 2_000_000_000
    rec.polled(started, Received([first], 2_500_000_000))
    common = rec.received(first, started, 2_500_000_000)
    assert common == {"consumer": "w-G-consumer0", "topic": "T", "group": "G", "ledger_id": "w-m1",
                      "message_id": "id1", "delivery_attempt": 1, "cycle": 0, "message_group": None}
    rec.nacked(common, 3_000_000_000, 1000.0, "change_invisible")  # due at 4 000 ms
    retry = Delivery(body, "id1", 2, 4_200, None, None, "TagA")
    rec.received(retry, 4_100_000_000, 4_250_000_000)  # the poll waited: a wakeup, 50 ms
    text = generate_latest(rt.metrics.registry).decode()
    labels = '{group="G",protocol="grpc",scenario="s",variant="v"}'
    assert f"rmq_harness_redelivery_delay_seconds_sum{labels} 0.25" in text
    assert f"rmq_harness_retry_wakeup_seconds_sum{labels} 0.05" in text
    assert f"rmq_harness_deliveries_total{labels} 2.0" in text and f"rmq_harness_nacks_total{labels} 1.0" in text
    assert [f["name"] for f in fired] == ["receive", "retry wakeup"]
    assert fired[1]["request_type"] == "measure" and fired[1]["response_time"] == 50.0
    assert [k for k, _ in rt.rows] == ["received", "nacked", "received"]
