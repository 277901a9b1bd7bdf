"""The canary as a run without an end: one variant up (a build started here, or a cluster of yours), the
scenario's topic and group created, the canary's load (harness.workload.canary) until stopped, then everything
it made taken down. The command (harness.cli.canary) chooses the backend and serves the metrics."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.client.registry import driver
from harness.contracts.metrics import HarnessMetrics
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.core.errors import HarnessError
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run.brokers import create_resources
from harness.workload.canary import Canary, CanaryPlan, refusal

__all__ = ["CanaryOptions", "refusal", "serve", "status"]

STATUS_EVERY_S = 60.0


@dataclass(frozen=True)
class CanaryOptions:
    grace_s: float
    lost_after_s: float
    for_s: float  # 0: until stopped
    grpc_client: str | None
    where: str  # where the metrics are served, as the start line says it


def serve(backend: object, variant: Variant, scenario: Scenario, metrics: HarnessMetrics, options: CanaryOptions,
          say: Callable[[str], None]) -> str:
    """Bring the variant up on ``backend``, drive the canary until SIGTERM, Ctrl-C or ``for_s``, take it down;
    return the last status line."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        [ep] = backend.up([variant], scenario.topology)  # type: ignore[attr-defined]
        create_resources(ep, scenario, log=say)
        # A generous cap: every message of the grace, lost_after_s and an invisible time at the scenario's rate,
        # four times over.
        span_s = options.lost_after_s + options.grace_s + scenario.consume.invisible_s
        plan = CanaryPlan(variant.name, scenario, options.grace_s, options.lost_after_s,
                          max(1000, int(4 * scenario.produce.rate * span_s)))
        d = driver(scenario.protocol, ep, client=options.grpc_client or scenario.grpc_client or DEFAULT_GRPC_CLIENT)
        canary = Canary(plan, d, metrics)
        made: list[BaseException] = []

        def run() -> None:
            try:
                canary.run(stop)
            except Exception as e:  # noqa: BLE001 - a client that cannot be made: said below
                made.append(e)
                stop.set()

        worker = threading.Thread(target=run, name="canary", daemon=True)
        say(f"{variant.name}: canary on {plan.topic}/{plan.group} ({scenario.produce.rate:g} messages/s, scenario "
            f"{scenario.name}); metrics at {options.where}; Ctrl-C stops it")
        worker.start()
        _wait(stop, options.for_s, canary, say)
        stop.set()
        worker.join(scenario.consume.long_poll_s + 10)
        d.close()
        if made:
            raise HarnessError(f"{variant.name}: the canary's clients could not start: {made[0]}")
        if canary.failure:
            raise HarnessError(f"{variant.name}: {canary.failure}; {status(canary)}")
        return f"{variant.name}: canary stopped; {status(canary)}"
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        backend.down([variant.name])  # type: ignore[attr-defined]


def _wait(stop: threading.Event, for_s: float, canary: Canary, say: Callable[[str], None]) -> None:
    """Until ``stop`` (SIGTERM), Ctrl-C or ``for_s`` (0: never); a status line now and then."""
    end = time.monotonic() + for_s if for_s else None
    next_status = time.monotonic() + STATUS_EVERY_S
    try:
        while not stop.is_set():
            now = time.monotonic()
            if end is not None and now >= end:
                return
            if now >= next_status:
                say(status(canary))
                next_status = now + STATUS_EVERY_S
            stop.wait(min(1.0, end - now) if end is not None else 1.0)
    except KeyboardInterrupt:
        return


def status(canary: Canary) -> str:
    def total(metric: object) -> int:
        return int(sum(s.value for m in metric.collect() for s in m.samples if s.name.endswith("_total")))

    m = canary.metrics
    return (f"sent {total(m.sent)}, delivered {total(m.deliveries)}, nacked {total(m.nacks)}, "
            f"owed now {len(canary.ledger)}, lost {total(m.lost)}, late {total(m.late)}, errors {total(m.errors)}")
