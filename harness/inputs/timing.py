"""How a scenario's run is timed: how long Locust may run at most, whether a producer starts another cycle, and
after how long an ack counts as late."""

from __future__ import annotations

from harness.inputs.scenario import Scenario


def late_after_ms(sc: Scenario) -> float | None:
    """After how long from its send an ack is late (harness.measure.ledger's ``late``): a drained cycle gives
    up on its messages drain_timeout_s after its burst; None where cycles do not drain (a window's messages
    are waited for until the run's drain phase ends, and what is not acked then is lost)."""
    return sc.cycles.drain_timeout_s * 1000 if sc.drains else None


def starts_another(sc: Scenario, ran: int, elapsed_s: float) -> bool:
    """Whether a producer that has run ``ran`` cycles in ``elapsed_s`` starts one more: exactly count
    cycles, or every cycle that starts within duration_s, and past it up to at_least cycles by cap_s."""
    c = sc.cycles
    if c.count:
        return ran < c.count
    if elapsed_s < sc.duration_s:
        return True
    return ran < c.at_least and elapsed_s < (c.cap_s or 0.0)


def run_time_s(sc: Scenario) -> float:
    """How long Locust may run at most: cycles start until duration_s, and the last may take until it
    drains or times out. A run whose cycles are all done ends before."""
    c = sc.cycles
    if sc.produce.pattern == "steady":
        sending = c.count * float(c.spacing) if c.count else sc.duration_s
        return sc.produce.delay_s + sending + c.drain_timeout_s + c.linger_s
    if sc.drains:
        per_cycle = c.drain_timeout_s + c.settle_s
        if c.count == 0:
            starting = max(sc.duration_s, c.cap_s or 0.0) if c.at_least else sc.duration_s
            return sc.produce.delay_s + starting + per_cycle + c.linger_s
        return sc.produce.delay_s + c.count * per_cycle + c.linger_s
    # Spaced bursts: the last starts by duration_s (or after count spacings), then the drain phase.
    sending = sc.duration_s + float(c.spacing) if c.count == 0 else c.count * float(c.spacing)
    return sc.produce.delay_s + sending + c.drain_timeout_s + c.linger_s
