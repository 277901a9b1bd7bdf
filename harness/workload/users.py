"""Locust users: producers, pop consumers that nack by the scenario's policy, and dead-letter queue readers.

They talk to RocketMQ only through the worker's client driver (harness.client.driver), and tell their recorder
(harness.workload.recorder) what happened: it writes each client operation as an event row (the run archive), to
the worker's Prometheus metrics and as a Locust request event.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import gevent
import gevent.pool
from locust import User, constant

from harness.client.driver import FLOW_BACKOFF_S, FLOW_RETRIES, Delivery, PopConsumer, ack_again, flow_limited
from harness.contracts.events import MessageBody
from harness.core.waiting import Deadline
from harness.inputs import timing
from harness.inputs.traffic import Group
from harness.measure.ledger import ANY_GROUP
from harness.workload import cycles
from harness.workload.recorder import Columns, ConsumerRecorder, DlqRecorder, ProducerRecorder
from harness.workload.runtime import BURST_CONCURRENCY, SEND_CHUNK, WorkerRuntime
from harness.workload.spec import WorkloadSpec


class ProducerUser(User):
    """Sends the scenario's messages in cycles: a burst per cycle (the next one once the last drained, or
    on a fixed spacing), or a steady rate whose cycles are windows of time."""

    abstract = True
    wait_time = constant(0)
    spec: WorkloadSpec  # set on the concrete class, with the worker's runtime
    runtime: WorkerRuntime

    def on_start(self) -> None:
        rt = self.runtime
        sc = self.spec.scenario
        self.topic = sc.produce_topic
        self.sent_count = 0  # which tag the next message gets
        self.client_id = rt.next_id("producer")
        self.producer = rt.driver.producer(self.topic, lite=sc.topic(self.topic).lite)
        self.recorder = ProducerRecorder(rt, self.client_id, self.topic)
        self.started = time.monotonic()
        self.cycle = 0
        self.open_cycles: list[int] = []  # reported to the master, not yet drained or timed out
        self.last_reported = -1
        self.window_ids: dict[int, dict[str, list[str]]] = {}  # steady: per window, group -> ids it is owed
        self.finished = False
        gevent.sleep(sc.produce.delay_s)
        self.first_send = self.next_send = time.monotonic()

    def send_many(self, cycle: int, n: int) -> list[tuple[str, list[str]] | None]:
        """Send ``n`` messages of ``cycle`` together (one round trip where the protocol allows): for each, its
        ledger id and the groups it is owed to, or None when its send failed (an error event)."""
        rt = self.runtime
        produce = self.spec.scenario.produce
        started = time.time_ns()
        msgs = []
        for _ in range(n):
            tag, message_group = produce.tag(self.sent_count), produce.message_group(self.sent_count)
            self.sent_count += 1
            owed = self.spec.scenario.owed_groups(self.topic, tag)
            # The group the message is meant for; "*" when several are (or none: it is nobody's).
            intended = owed[0] if len(owed) == 1 else ANY_GROUP
            ledger_id = rt.next_id("m")
            body = MessageBody(ledger_id, self.topic, intended, started, self.spec.run_id, cycle, tag,
                               message_group).encode()
            msgs.append((ledger_id, owed, intended, tag, message_group, body, produce.priority(self.sent_count - 1)))
        try:
            results: list[str | Exception] = self.producer.send_all([(m[5], m[3], m[4], m[6]) for m in msgs])
        except Exception as e:  # noqa: BLE001 - every client failure is data
            results = [e] * n
        ended = time.time_ns()
        recorder = self.recorder
        out: list[tuple[str, list[str]] | None] = []
        for (ledger_id, owed, intended, tag, message_group, body, _), result in zip(msgs, results, strict=True):
            if isinstance(result, Exception):
                recorder.send_failed(cycle, ledger_id, intended, tag, error=result, started=started, ended=ended)
                out.append(None)
            else:
                recorder.sent(cycle, ledger_id, intended, tag, message_group, message_id=result, length=len(body),
                              started=started, ended=ended)
                out.append((ledger_id, owed))
        return out

    @staticmethod
    def _owed(sent: list[tuple[str, list[str]] | None], into: dict[str, list[str]] | None = None) -> dict:
        """Sends -> group -> the ledger ids it is owed."""
        out = into if into is not None else {}
        for item in sent:
            if item:
                for g in item[1]:
                    out.setdefault(g, []).append(item[0])
        return out

    def burst(self, cycle: int) -> dict[str, list[str]]:
        # All at once, as far as the pool of real threads allows; one after another to a FIFO topic, so the
        # order they were sent in is the order within each message group.
        produce = self.spec.scenario.produce
        fifo = bool(produce.message_groups)
        pool = gevent.pool.Pool(1 if fifo else BURST_CONCURRENCY)
        # Spread over the pool first (a burst of up to BURST_CONCURRENCY is one send per call, at once);
        # larger bursts in chunks that go together (one round trip each over remoting). One by one to a FIFO
        # topic, where a broker that handles a connection's requests on several threads could reorder a chunk.
        chunk = 1 if fifo else max(1, min(SEND_CHUNK, -(-produce.count // BURST_CONCURRENCY)))
        jobs = [pool.spawn(self.send_many, cycle, min(chunk, produce.count - i))
                for i in range(0, produce.count, chunk)]
        pool.join()
        return self._owed([sent for j in jobs for sent in j.value])

    def more_cycles(self) -> bool:
        return timing.starts_another(self.spec.scenario, self.cycle, time.monotonic() - self.started)

    def report(self, cycle: int, owed: dict[str, list[str]]) -> None:
        """Tell the master what ``cycle`` sent, so it can say when every group has acked all of it owes."""
        self.environment.runner.send_message(cycles.SENT, {"cycle": cycle, "owed": owed})
        self.open_cycles.append(cycle)
        self.last_reported = cycle

    def close_cycle(self, cycle: int, timeout_s: float) -> None:
        self.recorder.cycle_ended(cycle, "drained" if self.runtime.drains.wait(cycle, timeout_s) else "timeout")
        self.open_cycles.remove(cycle)

    def run_cycle(self) -> None:
        """One burst; with spacing 'drained' also its end (the master says every group acked it, or it timed
        out), else the next one starts after the spacing and the drain phase closes them all."""
        sc = self.spec.scenario
        k = self.cycle
        begun = time.monotonic()
        self.recorder.cycle_started(k)
        self.report(k, self.burst(k))
        if sc.drains:
            self.close_cycle(k, sc.cycles.drain_timeout_s)
        else:
            gevent.sleep(max(0.0, begun + float(sc.cycles.spacing) - time.monotonic()))
        self.cycle += 1
        if sc.drains and self.more_cycles():
            gevent.sleep(sc.cycles.settle_s)

    def drain(self) -> None:
        """The run's drain phase: nothing new is sent; every cycle still open gets until drain_timeout_s from
        now to be acked by every group; what is acked later (in the linger) is late, what never is, lost."""
        self.recorder.draining()
        last = self.cycle - 1 if self.spec.scenario.produce.pattern == "burst" else self.last_reported
        self.environment.runner.send_message(cycles.SENDS_OVER, {"last": last})
        deadline = Deadline(self.spec.scenario.cycles.drain_timeout_s)
        for k in list(self.open_cycles):
            self.close_cycle(k, deadline.left())
        gevent.sleep(self.spec.scenario.cycles.linger_s)
        self.finished = True
        self.environment.runner.send_message(cycles.DONE, {})

    def produce(self) -> None:
        sc = self.spec.scenario
        if self.finished:
            gevent.sleep(1.0)  # silence until the run ends
            return
        if sc.produce.pattern == "burst":
            self.run_cycle()
            if not self.more_cycles():
                self.drain()
            return
        # Steady: keep a fixed schedule (not fixed gaps), so slow sends do not lower the rate; a cycle is
        # a window of cycles.spacing seconds, reported to the master (empty or not) once it is over.
        window = int((time.monotonic() - self.first_send) // float(sc.cycles.spacing))
        while self.cycle < window:
            self.report(self.cycle, self.window_ids.pop(self.cycle, {}))
            self.cycle += 1
        if not self.more_cycles():
            if self.cycle in self.window_ids:  # the window sending was in when time ran out
                self.report(self.cycle, self.window_ids.pop(self.cycle))
            self.drain()
            return
        if window not in self.window_ids:
            self.recorder.cycle_started(window)
            self.window_ids[window] = {}
        # Every message due by now, in one chunk: on time at low rates, and at high rates the producer
        # catches up in round trips of many messages rather than falling behind one at a time.
        due = 1 + int((time.monotonic() - self.next_send) * sc.produce.rate)
        n = min(due, SEND_CHUNK) if not sc.produce.message_groups else 1
        self._owed(self.send_many(window, n), into=self.window_ids[window])
        self.next_send += n / sc.produce.rate
        gevent.sleep(max(0.0, self.next_send - time.monotonic()))

    tasks = [produce]


class PopConsumerUser(User):
    """A pop consumer in one group: receives with a long poll, nacks by policy, acks the rest."""

    abstract = True
    wait_time = constant(0)
    spec: WorkloadSpec  # set on each concrete class, with the worker's runtime and the class's group
    runtime: WorkerRuntime
    group: Group

    def on_start(self) -> None:
        rt = self.runtime
        self.client_id = rt.next_id(f"{self.group.name}-consumer")
        long_poll_s = self.spec.scenario.consume.long_poll_s
        # Round robin over the group's consumer filters, among this worker's consumers of the group.
        self.tags = self.group.consumer_filter(rt.next_index(self.group.name))
        sc = self.spec.scenario
        self.consumer = rt.driver.pop_consumer(self.group.name, self.group.topic, long_poll_s, self.tags,
                                               lite_topics=sc.lite_topics(self.group.topic),
                                               options=sc.consume.receive_options)
        self.receipts = 0  # receives that returned messages
        self.recorder = ConsumerRecorder(rt, self.client_id, self.group.name, self.group.topic)
        if sc.consume.after_sends:
            # Until every producer's first burst is acknowledged (the master says so); at most the run's length and
            # a drain's, after which the consumers start anyway and the sends' overlap shows in the events.
            rt.drains.wait_sent(0, sc.duration_s + sc.cycles.drain_timeout_s)
        gevent.sleep(sc.consume.delay_s)

    def poll(self) -> None:
        c = self.spec.scenario.consume
        if c.receives and self.receipts >= c.receives:
            gevent.sleep(1.0)  # done receiving (consume.receives): what the broker committed stays as it is
            return
        started = time.time_ns()
        try:
            received = self.consumer.receive(c.batch, c.invisible_s)
        except Exception as e:  # noqa: BLE001
            if flow_limited(e):  # refused for flow control: the next poll tries again
                self.recorder.receive_refused(started, e)
                gevent.sleep(FLOW_BACKOFF_S)
                return
            self.recorder.receive_failed(started, e)
            gevent.sleep(0.5)  # a failing proxy is not hammered in a tight loop
            return
        self.recorder.polled(started, received)
        if not received.deliveries:
            return
        self.receipts += 1
        # Acks wait for the end of the batch and go together (one round trip where the protocol allows);
        # nacks and extends go at once.
        acks: list[tuple[Delivery, Columns]] = []
        returned = received.at_ns
        # FIFO (a message group, a lite topic): what follows a message given back in its group, within one receive,
        # is given back too, as an in-order consumer must (acked, the broker would deliver it again with the one
        # before it: a duplicate of the consumer's making).
        blocked: set[str] = set()
        for d in received.deliveries:
            self.handle(d, started, returned, acks, blocked)
        self.flush_acks(acks)

    def handle(self, d: Delivery, poll_started: int, received: int, acks: list[tuple[Delivery, Columns]],
               blocked: set[str] | None = None) -> None:
        common = self.recorder.received(d, poll_started, received)
        sc = self.spec.scenario
        if sc.consume.processing_s:
            # A consumer that takes its time acks each message when done with it, not with the batch.
            self.flush_acks(acks)
            gevent.sleep(sc.consume.processing_s)
        g, nack, ledger_id = self.group, sc.nack, common["ledger_id"]
        message_group = common["message_group"]
        behind = blocked is not None and message_group is not None and message_group in blocked
        if behind or (g.nacks and nack.applies(d.delivery_attempt, ledger_id) and not (
                nack.suspend and (g.name, ledger_id) in self.runtime.nacked_once)):
            self.nack(d, common, received, "behind a message given back in its group" if behind else "")
            if blocked is not None and message_group is not None:
                blocked.add(message_group)
        else:
            self.ack(d, common, acks)

    def nack(self, d: Delivery, common: Columns, received: int, why: str = "") -> None:
        nack = self.spec.scenario.nack
        detail = nack.how
        if nack.how == "lapse":
            # Neither ack nor change: the message reappears when the receive's invisible time runs out.
            nacked, invisible_ms = received, self.spec.scenario.consume.invisible_s * 1000
        elif nack.how == "same_deadline":
            # Changes aimed at the receive's own deadline: the message is due when the receive's invisible time
            # runs out, as with lapse; the event says how many changes it took and whether the last hit it.
            nacked, invisible_ms = received, self.spec.scenario.consume.invisible_s * 1000
            done: list[tuple[int, int]] = []
            if not self._operation("nack", common, lambda: done.append(self.consumer.keep_deadline(d))):
                return
            tries, hit = done[0]
            detail = f"same_deadline: {tries} change(s), {'hit' if hit else 'missed'} the deadline"
        else:
            # The broker's new checkpoint starts when it handles the request; the client's send time is the
            # closest the client can see.
            nacked, invisible_ms = time.time_ns(), nack.delay_s * 1000
            if not self._operation("nack", common,
                                   lambda: self.consumer.change_invisible(d, nack.delay_s, suspend=nack.suspend)):
                return
            if nack.suspend:
                self.runtime.nacked_once.add((self.group.name, common["ledger_id"]))
                detail = "change_invisible, suspend"
        # The why first: the ledger reads a suspend from the detail's end (harness.measure.ledger.SUSPEND_SUFFIX).
        self.recorder.nacked(common, nacked, invisible_ms, f"{why}: {detail}" if why else detail)

    def ack(self, d: Delivery, common: Columns, acks: list[tuple[Delivery, Columns]]) -> None:
        extend = self.spec.scenario.consume.extend_s
        if extend and not self._operation("extend", common, lambda: self.consumer.change_invisible(d, extend)):
            return
        acks.append((d, common))

    def flush_acks(self, acks: list[tuple[Delivery, Columns]]) -> None:
        """Ack every delivery in ``acks`` (emptied): an acked or error event each, and one message to the
        master per cycle with the ids now final."""
        if not acks:
            return
        recorder = self.recorder
        started = time.time_ns()
        try:
            errors = self.consumer.ack_all([d for d, _ in acks])
        except Exception as e:  # noqa: BLE001 - every client failure is data
            errors = [e] * len(acks)
        ended = time.time_ns()
        failed = 0
        final: dict[object, list[object]] = {}
        for (d, common), err in zip(acks, errors, strict=True):
            if err is not None:
                err = ack_again(lambda d=d: self.consumer.ack(d), err,
                                lambda e, tries, common=common: self._refused("ack", e, tries, common),
                                lambda e, common=common: recorder.failed("ack", e, common, time.time_ns()))
                if err is not None:
                    recorder.failed("ack", err, common, started, ended)
                    failed += 1
                    continue
                recorder.acked(common, started, time.time_ns())  # through on a later try
            else:
                recorder.acked(common, started, ended)
            cycle = common["cycle"]
            if cycle is not None:
                final.setdefault(cycle, []).append(common["ledger_id"])
        recorder.acks_counted(len(acks) - failed)
        acks.clear()
        for cycle, ids in final.items():
            self.environment.runner.send_message(cycles.FINAL, {"cycle": cycle, "group": self.group.name, "ids": ids})

    def _refused(self, name: str, e: BaseException, tries: int, common: Columns) -> bool:
        """Whether a failed call was refused for flow control and may be tried again (a ``refused`` event, a
        pause that doubles each time): as a client would, up to FLOW_RETRIES times."""
        if not flow_limited(e) or tries > FLOW_RETRIES:
            return False
        self.recorder.refused(name, e, common)
        gevent.sleep(FLOW_BACKOFF_S * 2 ** (tries - 1))
        return True

    def _operation(self, name: str, common: Columns, call: Callable[[], object]) -> bool:
        """A client call on one delivery, tried again while the server refuses it for flow control; False when
        it failed for good."""
        started = time.time_ns()
        for tries in itertools.count(1):
            try:
                call()
                break
            except Exception as e:  # noqa: BLE001 - every client failure is data
                if self._refused(name, e, tries, common):
                    continue
                self.recorder.failed(name, e, common, started)
                return False
        self.recorder.called(name, started)
        return True

    tasks = [poll]


class DlqReaderUser(User):
    """Reads one group's dead-letter queue: each message found there is a ``dlq_seen`` event of that group
    (the ledger's dead_lettered), acked, and counted as final for the drain."""

    abstract = True
    wait_time = constant(0)
    spec: WorkloadSpec
    runtime: WorkerRuntime
    group: Group

    def on_start(self) -> None:
        self.client_id = self.runtime.next_id(f"{self.group.dlq_reader}-consumer")
        self.consumer: PopConsumer | None = None
        self.recorder = DlqRecorder(self.runtime, self.client_id, self.group.name, self.group.dlq_topic)

    def poll(self) -> None:
        g = self.group
        c = self.spec.scenario.consume
        started = time.time_ns()
        try:
            # Started here, not in on_start: a reader the broker refuses is an error event (the report says
            # the DLQ could not be read), and it tries again rather than dying unseen in Locust's log.
            if self.consumer is None:
                self.consumer = self.runtime.driver.pop_consumer(g.dlq_reader, g.dlq_topic, c.long_poll_s)
            received = self.consumer.receive(c.batch, c.invisible_s)
        except Exception as e:  # noqa: BLE001
            self.recorder.receive_failed(started, e)
            gevent.sleep(0.5)
            return
        for d in received.deliveries:
            common = self.recorder.seen(d, started, received.at_ns)
            try:
                self.consumer.ack(d)
            except Exception as e:  # noqa: BLE001 - seen is seen; a failed ack may show it again
                self.recorder.ack_failed(common, e)
            if common["cycle"] is not None:
                self.environment.runner.send_message(cycles.FINAL, {"cycle": common["cycle"], "group": g.name,
                                                                    "ids": [common["ledger_id"]]})

    tasks = [poll]


def user_classes(spec: WorkloadSpec, runtime: WorkerRuntime | None, module: str = __name__) -> list[type[User]]:
    """One concrete producer class and one consumer class per group, with the scenario's counts.

    The master defines the same classes (it dispatches users by class name) but never runs one, so it
    passes no runtime.
    """
    scenario = spec.scenario
    common = {"abstract": False, "spec": spec, "runtime": runtime, "__module__": module}
    classes: list[type[User]] = [
        type("Producer", (ProducerUser,), {**common, "fixed_count": scenario.produce.producers})]
    for g in scenario.groups:
        classes.append(type(f"Consumer_{g.name}", (PopConsumerUser,),
                            {**common, "fixed_count": g.consumers, "group": g}))
        if g.read_dlq:
            classes.append(type(f"DlqReader_{g.name}", (DlqReaderUser,), {**common, "fixed_count": 1, "group": g}))
    return classes
