"""What a worker's users do, written to each of the worker's three sinks in one place: an event row (the run
archive, harness.contracts.events), its Prometheus metrics (harness.contracts.metrics), and a Locust request event
(so Locust's own stats, CSV and HTML mean something).

One recorder per user, one method per thing that happens to it: the users (harness.workload.users) say what
happened, a recorder what each sink keeps of it. Each retry delivery is also reported to Locust as a
pseudo-request "retry wakeup" whose response time is the wakeup latency, which puts its percentiles in Locust's
report. ``received`` and ``acked`` run once per delivery: tests/benchmarks/bench_consumer_path.py measures them.
"""

from __future__ import annotations

import time

from locust import events

from harness.client.driver import CLIENT_UNFIT, Delivery, DriverError, Received, outcome_unknown
from harness.contracts.events import MessageBody
from harness.measure.latency import due_ms, redelivery_ms, waited, wakeup_ms
from harness.measure.ledger import ACK_UNKNOWN, ANY_GROUP
from harness.workload.runtime import WorkerRuntime

# What every event of one delivery says of it: consumer, topic, group, ledger_id, message_id, delivery_attempt,
# cycle, message_group. A user keeps it for what it records of the delivery later (nacked, acked, an error).
Columns = dict[str, object]


def _detail(what: str, e: BaseException) -> str:
    return f"{what}: {e}"[:500]


def _failed_to(what: str, e: BaseException) -> str:
    """An error event's detail; a DriverError means the client cannot measure at all, which the run refuses to
    pass (harness.run.sequence)."""
    return _detail(CLIENT_UNFIT if isinstance(e, DriverError) else what, e)


def _fire(request_type: str, name: str, started_ns: int, ended_ns: int, exc: BaseException | None = None,
          length: int = 0) -> None:
    events.request.fire(request_type=request_type, name=name, response_time=(ended_ns - started_ns) / 1e6,
                        response_length=length, exception=exc, context={})


def _count_error(runtime: WorkerRuntime, group: str, operation: str) -> None:
    runtime.metrics.errors.labels(**runtime.labels(group), operation=operation).inc()


class _Reader:
    """What a consumer and a DLQ reader record alike: a poll's own events, and each delivery's columns."""

    def __init__(self, runtime: WorkerRuntime, client_id: str, group: str, topic: str) -> None:
        self._rt = runtime
        self._record = runtime.log.record
        self.client_id = client_id
        self.group = group
        self.topic = topic

    def _poll_event(self, kind: str, started: int, detail: str) -> None:
        self._record(kind, consumer=self.client_id, topic=self.topic, group=self.group, poll_started_ns=started,
                     detail=detail)

    def _columns(self, d: Delivery, body: MessageBody | None) -> Columns:
        if body is None:
            ledger_id = cycle = message_group = None
        else:
            ledger_id, cycle, message_group = body.ledger_id, body.cycle, body.message_group
        return {"consumer": self.client_id, "topic": self.topic, "group": self.group, "ledger_id": ledger_id,
                "message_id": d.message_id, "delivery_attempt": d.delivery_attempt, "cycle": cycle,
                "message_group": message_group}


class ProducerRecorder:
    """One producer's sends and cycles. Made when the producer starts: from then it counts among the worker's
    producers sending (the run's cycle signal), until ``draining``."""

    def __init__(self, runtime: WorkerRuntime, client_id: str, topic: str) -> None:
        self._rt = runtime
        self._record = runtime.log.record
        self.client_id = client_id
        self.topic = topic
        self._sending = runtime.metrics.producers_sending.labels(**runtime.run_labels)
        self._sending.inc()

    def sent(self, cycle: int, ledger_id: str, intended: str, tag: str | None, message_group: str | None, *,
             message_id: str, length: int, started: int, ended: int) -> None:
        """One message of a send (``started`` to ``ended``) went out: ``message_id`` is what the broker named it."""
        self._record("sent", t_client_ns=started, consumer=self.client_id, topic=self.topic, group=intended,
                     ledger_id=ledger_id, message_id=message_id, origin_topic=self.topic, intended_group=intended,
                     cycle=cycle, tag=tag, message_group=message_group)
        self._rt.group_metrics(intended).sent.inc()
        _fire(self._rt.protocol, "send", started, ended, length=length)

    def send_failed(self, cycle: int, ledger_id: str, intended: str, tag: str | None, *, error: BaseException,
                    started: int, ended: int) -> None:
        self._record("error", consumer=self.client_id, topic=self.topic, group=intended, ledger_id=ledger_id,
                     cycle=cycle, tag=tag, detail=_detail("send", error))
        _count_error(self._rt, intended, "send")
        _fire(self._rt.protocol, "send", started, ended, exc=error)

    def cycle_started(self, cycle: int) -> None:
        self._record("cycle_start", consumer=self.client_id, topic=self.topic, cycle=cycle)
        rt = self._rt
        if cycle > rt.newest_cycle:  # the worker's newest, whichever of its producers started it
            rt.newest_cycle = cycle
            rt.metrics.cycle.labels(**rt.run_labels).set(cycle)

    def cycle_ended(self, cycle: int, end: str) -> None:
        """``end``: drained, or timeout."""
        self._record("cycle_end", consumer=self.client_id, topic=self.topic, cycle=cycle, detail=end)

    def draining(self) -> None:
        """The producer entered its drain phase: it sends nothing more."""
        self._sending.dec()


class ConsumerRecorder(_Reader):
    """One pop consumer's receives and what it did with each delivery (``group``: its group's name, ``topic``: the
    topic the group subscribes to)."""

    def __init__(self, runtime: WorkerRuntime, client_id: str, group: str, topic: str) -> None:
        super().__init__(runtime, client_id, group, topic)
        self._protocol = runtime.protocol
        self._m = runtime.group_metrics(group)
        self._acked = runtime.acked
        self._nack_due_ms = runtime.nack_due_ms
        # Read per delivery; the scenario does not change during a run, so once is enough.
        self._invisible_ms = runtime.spec.scenario.consume.invisible_s * 1000

    def receive_refused(self, started: int, e: BaseException) -> None:
        """A receive refused for flow control (the next poll tries again): an event, not an error."""
        self._poll_event("refused", started, _detail("receive", e))

    def receive_failed(self, started: int, e: BaseException) -> None:
        self._poll_event("error", started, _failed_to("receive", e))
        _count_error(self._rt, self.group, "receive")
        _fire(self._protocol, "receive", started, time.time_ns(), exc=e)

    def polled(self, started: int, received: Received) -> None:
        """A receive started at ``started`` returned, with messages or none (an empty poll)."""
        returned = received.at_ns
        self._m.poll_wait.observe((returned - started) / 1e9)
        _fire(self._protocol, "receive", started, returned, length=len(received.deliveries))
        if not received.deliveries:
            self._record("empty_poll", t_client_ns=returned, consumer=self.client_id, topic=self.topic,
                         group=self.group, poll_started_ns=started)
            self._m.empty_polls.inc()

    def received(self, d: Delivery, poll_started: int, received: int) -> Columns:
        """One delivery of a receive that started at ``poll_started`` and returned at ``received``: its event,
        counts and latencies (a retry's wakeup or pickup, and redelivery delay when this worker nacked it)."""
        body = MessageBody.decode(d.body)
        common = self._columns(d, body)
        if body is None:
            origin_topic = intended = None
        else:
            origin_topic, intended = body.origin_topic, body.group
        self._record("received", t_client_ns=received, store_ts_ms=d.store_ts_ms, born_ts_ms=d.born_ts_ms,
                     poll_started_ns=poll_started, invisible_ms=self._invisible_ms, tag=d.tag,
                     origin_topic=origin_topic, intended_group=intended, delivered_topic=d.topic,
                     queue_id=d.queue_id, **common)
        m = self._m
        group = self.group
        m.deliveries.inc()
        if body is not None and (origin_topic != self.topic or intended not in (group, ANY_GROUP)):
            m.cross_topic.inc()
        ledger_id = common["ledger_id"]
        if (group, ledger_id) in self._acked:
            m.duplicates.inc()
        attempt = d.delivery_attempt
        if attempt > 1:
            wakeup = wakeup_ms(received, d.store_ts_ms)
            if waited(poll_started, d.store_ts_ms):
                m.retry_wakeup.observe(max(wakeup, 0.0) / 1e3)
                _fire("measure", "retry wakeup", 0, int(wakeup * 1e6))
            else:
                m.retry_pickup.observe(max(wakeup, 0.0) / 1e3)
            due = self._nack_due_ms.pop((group, ledger_id, attempt), None)
            if due is not None:
                m.redelivery_delay.observe(max(redelivery_ms(received, due), 0.0) / 1e3)
        return common

    def nacked(self, common: Columns, nacked: int, invisible_ms: float, detail: str) -> None:
        """Nacked at ``nacked`` (ns): due again ``invisible_ms`` later, which its redelivery is measured against."""
        self._record("nacked", t_client_ns=nacked, invisible_ms=invisible_ms, detail=detail, **common)
        self._nack_due_ms[(self.group, common["ledger_id"], common["delivery_attempt"] + 1)] = due_ms(
            nacked, invisible_ms)
        self._m.nacks.inc()

    def called(self, name: str, started: int) -> None:
        """A call on one delivery (a nack, an extend) went through."""
        _fire(self._protocol, name, started, time.time_ns())

    def refused(self, name: str, e: BaseException, common: Columns) -> None:
        """A call on one delivery was refused for flow control; it is tried again."""
        self._record("refused", detail=_detail(name, e), **common)

    def failed(self, name: str, e: BaseException, common: Columns, started: int, ended: int | None = None) -> None:
        """A call on one delivery failed (``ended``: when its round trip did, by default now). An ack
        whose outcome the client cannot know (harness.client.driver.outcome_unknown) says so in its detail, which
        the ledger's why reads."""
        what = ACK_UNKNOWN if name == "ack" and outcome_unknown(e) else name
        self._record("error", detail=_detail(what, e), **common)
        _count_error(self._rt, self.group, name)
        _fire(self._protocol, name, started, time.time_ns() if ended is None else ended, exc=e)

    def acked(self, common: Columns, started: int, ended: int) -> None:
        """One delivery acked by the ack round trip from ``started`` to ``ended``; the acks counter goes up
        once per round trip (``acks_counted``)."""
        self._record("acked", t_client_ns=ended, started_ns=started, **common)
        self._acked.add((self.group, common["ledger_id"]))
        _fire(self._protocol, "ack", started, ended)

    def acks_counted(self, n: int) -> None:
        """An ack round trip is over, ``n`` of its deliveries acked."""
        self._m.acks.inc(n)


class DlqRecorder(_Reader):
    """One group's dead-letter queue reader (``group``: the group whose DLQ it reads, ``topic``: that DLQ)."""

    def receive_failed(self, started: int, e: BaseException) -> None:
        self._poll_event("error", started, _failed_to("dlq receive", e))

    def seen(self, d: Delivery, poll_started: int, received: int) -> Columns:
        """A message found in the DLQ by a receive that started at ``poll_started`` and returned at ``received``."""
        body = MessageBody.decode(d.body)
        common = self._columns(d, body)
        self._record("dlq_seen", t_client_ns=received, store_ts_ms=d.store_ts_ms, tag=d.tag,
                     poll_started_ns=poll_started, origin_topic=body.origin_topic if body else None,
                     intended_group=body.group if body else None, **common)
        return common

    def ack_failed(self, common: Columns, e: BaseException) -> None:
        """Seen is seen; a failed ack may show it again."""
        self._record("error", detail=_detail("dlq ack", e), **common)
