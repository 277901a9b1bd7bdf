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
from harness.client.driver import Driver, driver
from harness.endpoints import Endpoints
from harness.errors import HarnessError

# What every backend creates and sends through a variant before calling it ready.
READY_TOPIC = "RMQ_HARNESS_READY"
READY_GROUP = "RMQ_HARNESS_READY_GROUP"
# gRPC limits (rocketmq-facts.md): receive's invisible duration >= 10 s, long poll >= 5 s.
_INVISIBLE_S = 15
_POLL_S = 5


@dataclass(frozen=True)
class RoundTrip:
    """One message sent and popped back; the times bracket the broker's store time of it."""

    seconds: float  # from the consumer's start to the message's return
    send_started_ns: int  # client clock
    send_done_ns: int
    store_ts_ms: int  # broker clock, between the two above in true time

    @property
    def clock_offset_ms(self) -> tuple[float, float]:
        """Bounds of (broker clock - client clock): the store happened while the send was in flight."""
        return self.store_ts_ms - self.send_done_ns / 1e6, self.store_ts_ms - self.send_started_ns / 1e6


def round_trip(d: Driver, topic: str, group: str, timeout_s: float) -> RoundTrip:
    """Send one message to ``topic`` and pop it back as ``group``; TimeoutError when it does not return."""
    started = time.monotonic()
    consumer = d.pop_consumer(group, topic, long_poll_s=_POLL_S)
    producer = d.producer(topic)
    token = uuid.uuid4().hex
    sent_at = time.time_ns()
    producer.send(json.dumps({"readiness": token}).encode())
    sent_done = time.time_ns()
    while time.monotonic() - started < timeout_s:
        for m in consumer.receive(16, _INVISIBLE_S).deliveries:
            consumer.ack(m)
            if json.loads(m.body).get("readiness") == token:
                return RoundTrip(time.monotonic() - started, sent_at, sent_done, m.store_ts_ms)
    raise TimeoutError(f"a message sent to {topic} was not popped back within {timeout_s:.0f} s")


def wait_serving(ep: Endpoints, protocol: str, deadline: float, alive: Callable[[], None] = lambda: None,
                 detail: Callable[[], str] = str) -> RoundTrip:
    """Until ``ep`` accepts admin requests and passes a send/pop round trip through ``protocol``'s driver.

    ``deadline`` is a time.monotonic() value; ``alive`` raises when the deployment died meanwhile;
    ``detail`` gives the lines (a log tail) to show when it is not ready in time.
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
                if time.monotonic() > deadline:
                    raise HarnessError(f"{ep.variant}: broker {ep.broker} does not accept admin requests: {e}",
                                       detail=detail()) from e
                time.sleep(0.5)
        try:
            return round_trip(d, READY_TOPIC, READY_GROUP, timeout_s=max(10.0, deadline - time.monotonic()))
        except Exception as e:  # noqa: BLE001 - any client failure means not ready; say which
            raise HarnessError(f"{ep.variant}: send/pop round trip through {protocol} {ep.grpc} failed: {e}",
                               detail=detail()) from e
    finally:
        d.close()


def agent_problems(broker_output: str, jars: Sequence[str]) -> list[str]:
    """What the broker's output says against the agents being active: each of the harness's agents
    prints one line `[<jar stem>] ...` when it patches RocketMQ, and `not installed` when it cannot."""
    problems = []
    lines = broker_output.splitlines()
    for jar in jars:
        tag = f"[{Path(jar).stem}] "
        said = [ln for ln in lines if ln.startswith(tag)]
        if not said:
            problems.append(f"{Path(jar).name} printed nothing (not loaded?)")
        problems += [f"{Path(jar).name}: {ln[len(tag):]}" for ln in said if "not installed" in ln]
    problems += [ln.strip() for ln in lines if "NoClassDefFoundError" in ln and "rmqharness" in ln][:3]
    return problems
