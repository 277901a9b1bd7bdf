"""Locust users: producers, and pop consumers that nack by the scenario's policy.

Every client operation is recorded three ways: as an event row (the run archive), in the worker's
Prometheus metrics, and as a Locust request event (so Locust's own stats, CSV and HTML mean
something). Each retry delivery is also reported to Locust as a pseudo-request "retry wakeup" whose
response time is the wakeup latency, which puts its percentiles in Locust's report.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import gevent
import gevent.event
import gevent.pool
from locust import User, constant, events

from harness.client.grpc import load_client, store_timestamp_ms
from harness.events import EventLog, MessageBody
from harness.metrics import HarnessMetrics
from harness.scenario import Group, Scenario
from harness.workload.gevent_bridge import call, ensure_threads

PROTOCOL = "grpc"
BURST_CONCURRENCY = 64
ANY_GROUP = "*"


@dataclass
class WorkerContext:
    """What all users of one worker process share."""

    run_id: str
    variant: str
    scenario: Scenario
    endpoint: str
    worker: str
    log: EventLog
    metrics: HarnessMetrics
    clients: list = field(default_factory=list)  # started clients, shut down at test stop
    acked: set = field(default_factory=set)  # (group, ledger_id) acked by this worker
    nack_due_ms: dict = field(default_factory=dict)  # (group, ledger_id, next attempt) -> due time, ms
    _seq: itertools.count = field(default_factory=itertools.count)

    def labels(self, group: str) -> dict[str, str]:
        return {"variant": self.variant, "scenario": self.scenario.name, "protocol": PROTOCOL, "group": group}

    def next_id(self, prefix: str) -> str:
        return f"{self.worker}-{prefix}{next(self._seq)}"


# Set by the locustfile's init hook. A worker connects to the master before Locust fires init, so a
# spawn message can start users first: they wait for the context rather than fail.
CONTEXT: WorkerContext | None = None
CONTEXT_READY = gevent.event.Event()


def _ctx() -> WorkerContext:
    if not CONTEXT_READY.wait(timeout=120) or CONTEXT is None:
        raise RuntimeError("workload context not initialised (the locustfile's init hook did not run)")
    return CONTEXT


def _fire(name: str, started_ns: int, ended_ns: int, exc: BaseException | None = None, length: int = 0,
          request_type: str = PROTOCOL) -> None:
    events.request.fire(request_type=request_type, name=name, response_time=(ended_ns - started_ns) / 1e6,
                        response_length=length, exception=exc, context={})


class ProducerUser(User):
    """Sends the scenario's messages: one burst after ``delay_s``, or a steady rate."""

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        ctx = _ctx()
        rmq = load_client()
        self.ctx = ctx
        self.rmq = rmq
        self.topic = ctx.scenario.produce_topic
        # The group each message is meant for; "*" when several groups subscribe to the topic.
        subscribed = [g.name for g in ctx.scenario.groups if g.topic == self.topic]
        self.intended = subscribed[0] if len(subscribed) == 1 else ANY_GROUP
        self.client_id = ctx.next_id("producer")
        cfg = rmq.ClientConfiguration(ctx.endpoint, rmq.Credentials(), request_timeout=10)
        self.producer = rmq.Producer(cfg, (self.topic,))
        call(self.producer.startup)
        ctx.clients.append(self.producer)
        self.burst_done = False
        gevent.sleep(ctx.scenario.produce.delay_s)
        self.next_send = time.monotonic()

    def send_one(self) -> None:
        ctx = self.ctx
        ledger_id = ctx.next_id("m")
        started = time.time_ns()
        msg = self.rmq.Message()
        msg.topic = self.topic
        msg.body = MessageBody(ledger_id, self.topic, self.intended, started, ctx.run_id).encode()
        labels = ctx.labels(self.intended)
        try:
            receipt, ended = call(self.producer.send, msg)
        except Exception as e:  # noqa: BLE001 - every client failure is data
            ended = time.time_ns()
            ctx.log.record("error", consumer=self.client_id, topic=self.topic, group=self.intended,
                           ledger_id=ledger_id, detail=f"send: {e}"[:500])
            ctx.metrics.errors.labels(**labels, operation="send").inc()
            _fire("send", started, ended, exc=e)
            return
        ctx.log.record("sent", t_client_ns=started, consumer=self.client_id, topic=self.topic, group=self.intended,
                       ledger_id=ledger_id, message_id=receipt.message_id, origin_topic=self.topic,
                       intended_group=self.intended)
        ctx.metrics.sent.labels(**labels).inc()
        _fire("send", started, ended, length=len(msg.body))

    def run_burst(self) -> None:
        # All at once, as far as the pool of real threads allows.
        pool = gevent.pool.Pool(BURST_CONCURRENCY)
        for _ in range(self.ctx.scenario.produce.count):
            pool.spawn(self.send_one)
        pool.join()

    def produce(self) -> None:
        p = self.ctx.scenario.produce
        if p.pattern == "burst":
            if not self.burst_done:
                self.burst_done = True
                self.run_burst()
            gevent.sleep(1.0)  # silence until the run ends
            return
        # Steady: keep a fixed schedule (not fixed gaps), so slow sends do not lower the rate.
        self.next_send += 1.0 / p.rate
        delay = self.next_send - time.monotonic()
        if delay > 0:
            gevent.sleep(delay)
        self.send_one()

    tasks = [produce]


class PopConsumerUser(User):
    """A gRPC SimpleConsumer in one group: receives with a long poll, nacks by policy, acks the rest."""

    abstract = True
    wait_time = constant(0)
    group: Group  # set on each concrete subclass (one per group)

    def on_start(self) -> None:
        ctx = _ctx()
        rmq = load_client()
        self.ctx = ctx
        self.rmq = rmq
        self.client_id = ctx.next_id(f"{self.group.name}-consumer")
        c = ctx.scenario.consume
        cfg = rmq.ClientConfiguration(ctx.endpoint, rmq.Credentials(), request_timeout=10)
        self.consumer = rmq.SimpleConsumer(cfg, self.group.name, {self.group.topic: rmq.FilterExpression()},
                                           await_duration=c.long_poll_s)
        call(self.consumer.startup)
        ctx.clients.append(self.consumer)

    def poll(self) -> None:
        ctx = self.ctx
        c = ctx.scenario.consume
        labels = ctx.labels(self.group.name)
        started = time.time_ns()
        try:
            messages, returned = call(self.consumer.receive, c.batch, c.invisible_s)
        except Exception as e:  # noqa: BLE001
            ended = time.time_ns()
            ctx.log.record("error", consumer=self.client_id, topic=self.group.topic, group=self.group.name,
                           poll_started_ns=started, detail=f"receive: {e}"[:500])
            ctx.metrics.errors.labels(**labels, operation="receive").inc()
            _fire("receive", started, ended, exc=e)
            gevent.sleep(0.5)  # a failing proxy is not hammered in a tight loop
            return
        ctx.metrics.poll_wait.labels(**labels).observe((returned - started) / 1e9)
        _fire("receive", started, returned, length=len(messages))
        if not messages:
            ctx.log.record("empty_poll", t_client_ns=returned, consumer=self.client_id, topic=self.group.topic,
                           group=self.group.name, poll_started_ns=started)
            ctx.metrics.empty_polls.labels(**labels).inc()
            return
        for m in messages:
            self.handle(m, started, returned)

    def handle(self, m: object, poll_started: int, received: int) -> None:
        ctx = self.ctx
        g = self.group
        labels = ctx.labels(g.name)
        body = MessageBody.decode(m.body)
        ledger_id = body.ledger_id if body else None
        attempt = int(m.delivery_attempt or 1)
        store_ms = store_timestamp_ms(m)
        common = {"consumer": self.client_id, "topic": g.topic, "group": g.name, "ledger_id": ledger_id,
                  "message_id": m.message_id, "delivery_attempt": attempt}
        ctx.log.record("received", t_client_ns=received, store_ts_ms=store_ms, born_ts_ms=m.born_timestamp,
                       poll_started_ns=poll_started, invisible_ms=int(ctx.scenario.consume.invisible_s * 1000),
                       origin_topic=body.origin_topic if body else None,
                       intended_group=body.group if body else None, **common)
        ctx.metrics.deliveries.labels(**labels).inc()
        if body and (body.origin_topic != g.topic or body.group not in (g.name, ANY_GROUP)):
            ctx.metrics.cross_topic.labels(**labels).inc()
        if (g.name, ledger_id) in ctx.acked:
            ctx.metrics.duplicates.labels(**labels).inc()
        if attempt > 1 and store_ms:
            wakeup_s = received / 1e9 - store_ms / 1e3
            ctx.metrics.retry_wakeup.labels(**labels).observe(max(wakeup_s, 0.0))
            _fire("retry wakeup", 0, int(wakeup_s * 1e9), request_type="measure")
            due = ctx.nack_due_ms.pop((g.name, ledger_id, attempt), None)
            if due is not None:
                ctx.metrics.redelivery_delay.labels(**labels).observe(max(received / 1e6 - due, 0.0) / 1e3)

        processing = ctx.scenario.consume.processing_s
        if processing:
            gevent.sleep(processing)
        nack = ctx.scenario.nack
        if attempt in nack.attempts:
            self.nack(m, common, received)
        else:
            self.ack(m, common)

    def nack(self, m: object, common: dict, received: int) -> None:
        ctx = self.ctx
        nack = ctx.scenario.nack
        labels = ctx.labels(self.group.name)
        key = (self.group.name, common["ledger_id"], common["delivery_attempt"] + 1)
        if nack.how == "lapse":
            # Neither ack nor change: the message reappears when the receive's invisible time runs out.
            invisible_ms = int(ctx.scenario.consume.invisible_s * 1000)
            ctx.log.record("nacked", t_client_ns=received, invisible_ms=invisible_ms, detail="lapse", **common)
            ctx.nack_due_ms[key] = received / 1e6 + invisible_ms
            ctx.metrics.nacks.labels(**labels).inc()
            return
        started = time.time_ns()
        ended = self._operation("nack", common, self.consumer.change_invisible_duration, m, nack.delay_s)
        if ended is None:
            return
        invisible_ms = int(nack.delay_s * 1000)
        # The broker's new checkpoint starts when it handles the request; the client's send time is the
        # closest the client can see.
        ctx.log.record("nacked", t_client_ns=started, invisible_ms=invisible_ms, detail="change_invisible", **common)
        ctx.nack_due_ms[key] = started / 1e6 + invisible_ms
        ctx.metrics.nacks.labels(**labels).inc()

    def ack(self, m: object, common: dict) -> None:
        ctx = self.ctx
        ended = self._operation("ack", common, self.consumer.ack, m)
        if ended is None:
            return
        ctx.log.record("acked", t_client_ns=ended, **common)
        ctx.acked.add((self.group.name, common["ledger_id"]))
        ctx.metrics.acks.labels(**ctx.labels(self.group.name)).inc()

    def _operation(self, name: str, common: dict, fn: object, *args: object) -> int | None:
        """Run a client call on a pool thread and report it to Locust; on failure record an error event and
        count it. Returns the wall clock (ns) when it returned, or None when it failed."""
        ctx = self.ctx
        started = time.time_ns()
        try:
            _, ended = call(fn, *args)
        except Exception as e:  # noqa: BLE001 - every client failure is data
            ctx.log.record("error", detail=f"{name}: {e}"[:500], **common)
            ctx.metrics.errors.labels(**ctx.labels(self.group.name), operation=name).inc()
            _fire(name, started, time.time_ns(), exc=e)
            return None
        _fire(name, started, ended)
        return ended

    tasks = [poll]


def user_classes(scenario: Scenario, module: str = __name__) -> list[type[User]]:
    """One concrete producer class and one consumer class per group, with the scenario's counts."""
    classes: list[type[User]] = [
        type("Producer", (ProducerUser,),
             {"abstract": False, "fixed_count": scenario.produce.producers, "__module__": module})
    ]
    for g in scenario.groups:
        classes.append(type(f"Consumer_{g.name}", (PopConsumerUser,),
                            {"abstract": False, "fixed_count": g.consumers, "group": g, "__module__": module}))
    ensure_threads(scenario.consumer_count + scenario.produce.producers * BURST_CONCURRENCY + 8)
    return classes
