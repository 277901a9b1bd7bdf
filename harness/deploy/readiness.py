"""When a variant counts as up, on every backend: its broker takes admin requests and a message sent
through the client driver comes back from a pop. Also what the broker's output says about its agents.

Backends run their own start-up waits first (processes alive, pods Ready); this is the part they share.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.client import remoting
from harness.client.driver import Driver, NotReady
from harness.client.registry import driver
from harness.contracts.endpoints import BrokerNode, Endpoints
from harness.core.errors import HarnessError, NotApplicable
from harness.core.waiting import Deadline, Pending, wait_until

# What every backend creates and sends through a variant before calling it ready.
READY_TOPIC = "RMQ_HARNESS_READY"
READY_GROUP = "RMQ_HARNESS_READY_GROUP"
# gRPC limits (rocketmq-facts.md): receive's invisible duration >= 10 s, long poll >= 5 s.
_INVISIBLE_S = 15
_POLL_S = 5
# How long a round trip through a proxy that accepted the send may take (a serving proxy takes seconds), and,
# when it returned nothing, how long the broker's own round trip may take.
PROXY_TRIP_S = 60.0
BROKER_TRIP_S = 20.0


@dataclass(frozen=True)
class RoundTrip:
    """One message sent and popped back; the send's start and end bracket the broker's store time of it."""

    seconds: float  # from the consumer's start to the message's return
    send_started_ns: int  # client clock
    send_done_ns: int
    store_ts_ms: int  # broker clock

    @property
    def clock_offset_ms(self) -> tuple[float, float]:
        """Bounds of (broker clock - client clock): the store happened while the send was in flight (1 ms
        added on each side: the store time has millisecond resolution)."""
        return self.store_ts_ms - self.send_done_ns / 1e6 - 1, self.store_ts_ms - self.send_started_ns / 1e6 + 1


def round_trips(d: Driver, topic: str, group: str, n: int, timeout_s: float) -> list[RoundTrip]:
    """Send ``n`` messages to ``topic`` one after another and pop them back as ``group``."""
    started = time.monotonic()
    consumer = d.pop_consumer(group, topic, long_poll_s=_POLL_S)
    producer = d.producer(topic)
    sent: dict[str, tuple[int, int]] = {}
    for _ in range(n):
        token = uuid.uuid4().hex
        at = time.time_ns()
        producer.send(json.dumps({"readiness": token}).encode())
        sent[token] = (at, time.time_ns())
    out: dict[str, RoundTrip] = {}
    while len(out) < n and time.monotonic() - started < timeout_s:
        for m in consumer.receive(16, _INVISIBLE_S).deliveries:
            consumer.ack(m)
            token = json.loads(m.body).get("readiness")
            if token in sent:
                out[token] = RoundTrip(time.monotonic() - started, *sent[token], m.store_ts_ms)
    if len(out) < n:
        raise TimeoutError(f"{n - len(out)} of {n} messages sent to {topic} were not popped back within "
                           f"{timeout_s:.0f} s")
    return [out[t] for t in sent]


def round_trip(d: Driver, topic: str, group: str, timeout_s: float) -> RoundTrip:
    """Send one message to ``topic`` and pop it back as ``group``; TimeoutError when it does not return."""
    return round_trips(d, topic, group, 1, timeout_s)[0]


def clock_offset_ms(ep: Endpoints, protocol: str, samples: int = 5, timeout_s: float = 60.0) -> tuple[float, float]:
    """Bounds of (broker clock - this process's clock) in ms, from the store times of a few messages: wakeup
    subtracts a broker time from a client time, so an offset between the two clocks is a bias in it.
    Every sample's bounds hold the offset; their intersection is the answer (the narrowest one, should
    the clock have stepped meanwhile)."""
    d = driver(protocol, ep)
    try:
        trips = round_trips(d, READY_TOPIC, READY_GROUP, samples, timeout_s)
    except TimeoutError:
        if protocol == "remoting":
            raise
        # Pops through the proxy return nothing (see wait_serving): the broker's clock is read straight from it.
        return clock_offset_ms(ep, "remoting", samples, timeout_s)
    finally:
        d.close()
    bounds = [rt.clock_offset_ms for rt in trips]
    lo, hi = max(b[0] for b in bounds), min(b[1] for b in bounds)
    return (lo, hi) if lo <= hi else min(bounds, key=lambda b: b[1] - b[0])


def _broker_round_trip(ep: Endpoints, through_proxy: Exception, detail: Callable[[], str]) -> RoundTrip:
    d = driver("remoting", ep)
    try:
        return round_trip(d, READY_TOPIC, READY_GROUP, timeout_s=BROKER_TRIP_S)
    except Exception as e:  # noqa: BLE001 - neither way pops: not ready, say both
        raise HarnessError(f"{ep.variant}: send/pop round trip failed through the proxy {ep.grpc} ({through_proxy}) "
                           f"and straight to the broker ({e})", detail=detail()) from e
    finally:
        d.close()


def wait_serving(ep: Endpoints, protocol: str, deadline: Deadline, alive: Callable[[], None] = lambda: None,
                 detail: Callable[[], str] = str, warn: Callable[[str], None] = print) -> RoundTrip:
    """Until ``ep`` accepts admin requests and passes a send/pop round trip through ``protocol``'s driver.

    ``alive`` raises when the deployment died meanwhile; ``detail`` gives the lines (a log tail) to show when
    it is not ready in time.
    """
    d = driver(protocol, ep)
    try:
        while True:
            alive()
            try:
                d.create_topic(READY_TOPIC, queues=1)
                d.create_group(READY_GROUP, retry_max_times=16)
                break
            except (remoting.RemotingError, OSError) as e:
                if deadline.passed():
                    raise HarnessError(f"{ep.variant}: broker {ep.broker} does not accept admin requests: {e}",
                                       detail=detail()) from e
                time.sleep(0.5)
        while True:
            try:
                return round_trip(d, READY_TOPIC, READY_GROUP,
                                  timeout_s=min(max(10.0, deadline.left()), PROXY_TRIP_S))
            except TimeoutError as e:
                if protocol == "remoting":
                    raise HarnessError(f"{ep.variant}: send/pop round trip through remoting failed: {e}",
                                       detail=detail()) from e
                # Pops through the proxy return nothing: a defect under test may do exactly that (apache/
                # rocketmq#9862). Ready when the broker's own pop works; the run measures what the proxy does.
                direct_trip = _broker_round_trip(ep, e, detail)
                warn(f"warning: {ep.variant}: pops through the proxy {ep.grpc} returned nothing ({e}); the broker's "
                     "own pop works, so the run goes on and measures it")
                return direct_trip
            except NotReady as e:
                # A broker just started accepts admin requests before its proxy serves consumers (seen on
                # Kubernetes, where the pod is recreated for the run): try again until the deadline.
                if deadline.passed():
                    raise HarnessError(f"{ep.variant}: {e}", detail=detail()) from e
                alive()
                d.close()
                d = driver(protocol, ep)
            except Exception as e:  # noqa: BLE001 - any other client failure means not ready; say which
                raise HarnessError(f"{ep.variant}: send/pop round trip through {protocol} {ep.grpc} failed: {e}",
                                   detail=detail()) from e
    finally:
        d.close()


def create_on_slaves(ep: Endpoints, topics: Sequence[tuple[str, int, str]], groups: Sequence[tuple[str, int, bool]],
                     log: Callable[[str], None] = print) -> None:
    """The scenario's topics (name, queues, message type) and groups (name, retry max times, orderly), as created on
    the masters, created on every slave of ``ep`` too: a slave copies its master's only every 60 s (RocketMQ's
    SlaveSynchronize), which a run would otherwise wait out before its load (wait_replicated). The copy, when it
    comes, brings the same configs. A slave that refuses is said, and the run waits for the copy as before. A cluster
    the harness does not own (``ep.suffix``) is left to copy its own."""
    if ep.suffix:
        return
    for node in (n for n in ep.brokers if not n.master):
        try:
            for name, queues, message_type in topics:
                remoting.create_topic(node.address, name, queues=queues, message_type=message_type)
            for name, retry_max_times, orderly in groups:
                remoting.create_group(node.address, name, retry_max_times=retry_max_times, orderly=orderly)
        except remoting.RemotingError as e:
            log(f"{ep.variant}: the {node.name} {node.address} did not take the scenario's topics and groups "
                f"({e}); waiting for it to copy them from its master")


def wait_replicated(ep: Endpoints, topics: Sequence[str], groups: Sequence[str], timeout_s: float = 120.0,
                    log: Callable[[str], None] = print) -> float:
    """Until every slave of ``ep`` has ``topics`` and ``groups`` (a slave copies its master's every 60 s): a
    slave acting master without them refuses the pops it should serve. Returns the seconds waited."""
    slaves = [n for n in ep.brokers if not n.master]
    started = time.monotonic()
    deadline = Deadline(timeout_s)
    for node in slaves:
        log(f"{ep.variant}: waiting for the {node.name} to copy the scenario's topics and groups from its master "
            "(every 60 s)")

        def copied(node: BrokerNode = node) -> bool | Pending:
            try:
                missing = sorted(set(topics) - remoting.topics(node.address)) + sorted(
                    set(groups) - remoting.groups(node.address))
            except remoting.RemotingError as e:
                return Pending(str(e))
            return Pending(f"it lacks {', '.join(missing[:3])}") if missing else True

        wait_until(f"{ep.variant}'s {node.name} {node.address} to copy the topics and groups created on its master",
                   copied, deadline)
    return time.monotonic() - started


def agent_report(broker_output: str, jars: Sequence[str]) -> dict[str, list[str]]:
    """What each of the harness's agents said in the broker's output: every one prints lines
    `[<jar stem>] ...` (when it patches RocketMQ, and `not installed: ...` when it cannot)."""
    lines = broker_output.splitlines()
    report = {}
    for jar in jars:
        tag = f"[{Path(jar).stem}] "
        report[Path(jar).name] = [ln[len(tag):] for ln in lines if ln.startswith(tag)]
    return report


def agent_problems(broker_output: str, jars: Sequence[str]) -> list[str]:
    """Why the output says the agents are not active: silent, refused, or crashed (empty when all are)."""
    problems = []
    for jar, said in agent_report(broker_output, jars).items():
        if not said:
            problems.append(f"{jar} printed nothing (not loaded?)")
        problems += [f"{jar}: {ln}" for ln in said if "not installed" in ln]
    crashes = [ln.strip() for ln in broker_output.splitlines() if "NoClassDefFoundError" in ln and "rmqharness" in ln]
    return problems + crashes[:3]


class UnknownSetting(NotApplicable):
    """A broker does not know a setting its scenario needs."""


def ignored_settings(ep: Endpoints, written: dict[str, str]) -> list[str]:
    """The keys of a variant's broker.conf that its masters do not know (the broker ignores them silently)."""
    known: set[str] = set()
    for broker in ep.masters:
        known |= set(remoting.broker_settings(broker))
    return sorted(k for k in written if k not in known)
