"""The canary: a small steady pop-retry load that never ends, measured as it goes.

One producer sends the scenario's first group's topic ``produce.rate`` messages a second; one pop consumer of
that group receives them and nacks by the scenario's ``nack:`` policy (change_invisible or lapse), acking the
rest. Everything it sees goes to the harness's metrics (harness.contracts.metrics: the same wakeup, pickup and
redelivery histograms and counters a run's workers export) and to a rolling ledger (harness.workload.rolling),
whose overdue, lost and late counts are metrics too. Nothing is written to disk: memory is the ledger's cap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.client.driver import Delivery, Driver, PopConsumer, Producer, ack_again
from harness.contracts.metrics import HarnessMetrics
from harness.inputs.scenario import Scenario
from harness.measure.latency import waited, wakeup_ms
from harness.workload.rolling import STAGES, RollingLedger

BODY_PREFIX = b"rmq-harness-canary:"
SWEEP_S = 1.0
ERROR_PAUSE_S = 1.0


def refusal(scenario: Scenario) -> str | None:
    """Why the canary cannot drive ``scenario`` (None: it can)."""
    if scenario.produce.pattern != "steady":
        return f"scenario {scenario.name} sends in bursts; the canary sends a steady load (produce.pattern: steady)"
    if scenario.nack.how == "same_deadline":
        return f"scenario {scenario.name} nacks with same_deadline; the canary nacks with change_invisible or lapse"
    topic = scenario.topic(scenario.groups[0].topic)
    if topic.lite or topic.message_type != "NORMAL":
        return f"scenario {scenario.name}'s first group reads a {topic.message_type.lower()} topic; the canary " \
               "drives a normal one"
    return None


@dataclass(frozen=True)
class CanaryPlan:
    variant: str
    scenario: Scenario
    grace_s: float  # how late a message may be before it counts overdue
    lost_after_s: float  # how long past that before it counts lost
    cap: int  # messages the ledger holds at most

    @property
    def group(self) -> str:
        return self.scenario.groups[0].name

    @property
    def topic(self) -> str:
        return self.scenario.groups[0].topic


def _key(body: bytes) -> int | None:
    if not body.startswith(BODY_PREFIX):
        return None
    try:
        return int(body[len(BODY_PREFIX):])
    except ValueError:
        return None


class Canary:
    def __init__(self, plan: CanaryPlan, driver: Driver, metrics: HarnessMetrics,
                 clock: Callable[[], float] = time.time) -> None:
        self.plan, self.driver, self.metrics, self.clock = plan, driver, metrics, clock
        self.ledger = RollingLedger(plan.grace_s, plan.lost_after_s, plan.cap)
        self._lock = threading.Lock()  # the ledger is the producer's, the consumer's and the sweeper's
        self._labels = {"variant": plan.variant, "scenario": plan.scenario.name,
                        "protocol": plan.scenario.protocol, "group": plan.group}
        self._seq = 0
        self.failure: str | None = None  # why a loop ended before it was stopped

    def _m(self, metric, **extra: str):  # noqa: ANN001, ANN202 - a prometheus_client metric's child
        return metric.labels(**self._labels, **extra)

    def run(self, stop: threading.Event) -> None:
        """Send, receive and sweep until ``stop`` is set; then return once the three have stopped. A client that
        cannot be made raises here; a loop that fails sets ``stop`` and ``failure`` says why."""
        s = self.plan.scenario
        producer = self.driver.producer(self.plan.topic)
        consumer = self.driver.pop_consumer(self.plan.group, self.plan.topic, s.consume.long_poll_s)
        loops: list[tuple[str, Callable[[threading.Event], None]]] = [
            ("send", lambda st: self._send_loop(producer, st)),
            ("receive", lambda st: self._receive_loop(consumer, st)),
            ("sweep", self._sweep_loop)]
        threads = [threading.Thread(target=self._guarded, args=(n, f, stop), name=f"canary-{n}", daemon=True)
                   for n, f in loops]
        for t in threads:
            t.start()
        stop.wait()
        for t in threads:
            t.join(s.consume.long_poll_s + 5)

    def _guarded(self, name: str, loop: Callable[[threading.Event], None], stop: threading.Event) -> None:
        try:
            loop(stop)
        except Exception as e:  # noqa: BLE001 - any loop's end ends the canary: a half canary would look healthy
            self.failure = f"the canary's {name} loop failed: {type(e).__name__}: {e}"
            stop.set()

    def _send_loop(self, producer: Producer, stop: threading.Event) -> None:
        period = 1.0 / self.plan.scenario.produce.rate
        next_at = time.monotonic()
        while not stop.is_set():
            self._seq += 1
            key = self._seq
            # Owed before it is sent: a poll already waiting may hand it over before send() returns.
            with self._lock:
                self.ledger.sent(key, self.clock())
            try:
                producer.send(BODY_PREFIX + str(key).encode())
            except Exception:  # noqa: BLE001 - a failed send is counted and the load goes on
                with self._lock:
                    self.ledger.forget(key)
                self._m(self.metrics.errors, operation="send").inc()
            else:
                self._m(self.metrics.sent).inc()
            next_at += period
            stop.wait(max(0.0, next_at - time.monotonic()))

    def _receive_loop(self, consumer: PopConsumer, stop: threading.Event) -> None:
        c = self.plan.scenario.consume
        while not stop.is_set():
            started = time.time_ns()
            try:
                got = consumer.receive(c.batch, c.invisible_s)
            except Exception:  # noqa: BLE001 - counted; the next poll tries again
                self._m(self.metrics.errors, operation="receive").inc()
                stop.wait(ERROR_PAUSE_S)
                continue
            self._m(self.metrics.poll_wait).observe((got.at_ns - started) / 1e9)
            if not got.deliveries:
                self._m(self.metrics.empty_polls).inc()
            for d in got.deliveries:
                self._handle(consumer, d, started, got.at_ns)

    def _handle(self, consumer: PopConsumer, d: Delivery, poll_started_ns: int, received_ns: int) -> None:
        s = self.plan.scenario
        self._m(self.metrics.deliveries).inc()
        key = _key(d.body)
        if key is None:
            self._m(self.metrics.cross_topic).inc()
            self._settle(consumer, d, None, nack=False)
            return
        now = received_ns / 1e9
        with self._lock:
            due_s = self.ledger.due(key)
            kind = self.ledger.delivered(key, d.delivery_attempt, now, s.consume.invisible_s)
        if kind == "duplicate":
            self._m(self.metrics.duplicates).inc()
        if d.delivery_attempt > 1:
            wait_ms = wakeup_ms(received_ns, d.store_ts_ms)
            hist = self.metrics.retry_wakeup if waited(poll_started_ns, d.store_ts_ms) else self.metrics.retry_pickup
            self._m(hist).observe(max(0.0, wait_ms) / 1000)
            if due_s is not None:
                self._m(self.metrics.redelivery_delay).observe(max(0.0, now - due_s))
        nack = kind in ("first", "retry") and s.nack.applies(d.delivery_attempt, str(key))
        self._settle(consumer, d, key, nack)

    def _settle(self, consumer: PopConsumer, d: Delivery, key: int | None, nack: bool) -> None:
        s = self.plan.scenario
        try:
            if not nack:
                try:
                    consumer.ack(d)
                except Exception as e:  # noqa: BLE001 - again while its outcome is unknown, then as any failure
                    err = ack_again(lambda: consumer.ack(d), e,
                                    unknown=lambda _: self._m(self.metrics.errors, operation="ack").inc())
                    if err is not None:
                        raise err from None
                self._m(self.metrics.acks).inc()
                if key is not None:
                    with self._lock:
                        self.ledger.acked(key, self.clock())
                return
            if s.nack.how == "change_invisible":
                consumer.change_invisible(d, s.nack.delay_s, suspend=s.nack.suspend)
                with self._lock:
                    self.ledger.nacked(key, self.clock(), s.nack.delay_s)
            # lapse: neither ack nor change; the ledger owes it back when its invisible time runs out
            self._m(self.metrics.nacks).inc()
        except Exception:  # noqa: BLE001 - the message comes back when its invisible time runs out
            self._m(self.metrics.errors, operation="nack" if nack else "ack").inc()

    def _sweep_loop(self, stop: threading.Event) -> None:
        while not stop.wait(SWEEP_S):
            self.sweep()

    def sweep(self) -> None:
        with self._lock:
            found = self.ledger.sweep(self.clock())
            late = self.ledger.late()
        for stage in STAGES:
            self._m(self.metrics.overdue, stage=stage).set(found.overdue[stage])
            self._m(self.metrics.lost, stage=stage).inc(found.lost[stage])
            self._m(self.metrics.late, stage=stage).inc(late[stage])
