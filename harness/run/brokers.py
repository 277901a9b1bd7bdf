"""The run's brokers as parts of the run: what is checked and created once they serve (their clocks against this
host's, the settings they run without, the scenario's topics and groups), and what the record keeps of them after
the load (the broker.conf they ran, what each agent said, the module jars, the failures planted).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.client.registry import driver
from harness.contracts.endpoints import Endpoints
from harness.core.errors import HarnessError, NotApplicable
from harness.deploy import readiness
from harness.deploy.agents import PLANT_JAR
from harness.inputs import needs
from harness.inputs.scenario import Scenario
from harness.run.hooks import Hook, Log, RunState

# Wakeup subtracts the broker's store time from the client's receive time: a clock offset between them
# is a bias of that size. Refused when the measured bounds lie wholly beyond this.
MAX_CLOCK_OFFSET_MS = 10.0


def create_resources(ep: Endpoints, scenario: Scenario, log: Log = print) -> None:
    d = driver(scenario.protocol, ep)
    # What was created, as the brokers were asked for it: (name, queues, message type), (name, retries, orderly).
    topics: list[tuple[str, int, str]] = []
    groups: list[tuple[str, int, bool]] = []
    try:
        for t in scenario.topics:
            d.create_topic(t.name, queues=t.queues, message_type=t.message_type)
            topics.append((t.name, t.queues, t.message_type))
        for g in scenario.groups:
            d.create_group(g.name, retry_max_times=g.retry_max_times, orderly=g.fifo,
                           lite_bind_topic=g.topic if scenario.topic(g.topic).lite else None)
            groups.append((g.name, g.retry_max_times, g.fifo))
            if g.read_dlq:
                # The broker creates the DLQ (1 queue, read + write) on its first dead letter; made here so
                # the reader can subscribe before that.
                d.create_topic(g.dlq_topic, queues=1)
                d.create_group(g.dlq_reader, retry_max_times=g.dlq_reader_retry_max_times)
                topics.append((g.dlq_topic, 1, "NORMAL"))
                groups.append((g.dlq_reader, g.dlq_reader_retry_max_times, False))
    finally:
        d.close()
    readiness.create_on_slaves(ep, [(ep.physical(n), q, m) for n, q, m in topics],
                               [(ep.physical(n), r, o) for n, r, o in groups], log=log)
    waited = readiness.wait_replicated(ep, [ep.physical(t[0]) for t in topics], [ep.physical(g[0]) for g in groups],
                                       log=log)
    if waited > 1:
        log(f"{ep.variant}: every slave has the scenario's topics and groups ({waited:.0f} s)")


_PLANTED = re.compile(r"planted (?:failure|delay) \d+/\d+ ")


def planted_line(variant: str, report: dict[str, list[str]]) -> str:
    """How many failures the pop-fault agent planted in a variant's brokers (its `planted failure k/N` and
    `planted delay k/N` lines), as the run says it: a scenario whose plant never fired measured the broker without
    the failure. A plant whose exception could not be made (`planted failure: cannot make ...`, it failed with
    RuntimeException instead) is warned about."""
    name = Path(PLANT_JAR).name
    lines = [ln for jar, said in report.items() if jar.endswith(name) for ln in said]
    n = sum(bool(_PLANTED.search(ln)) for ln in lines)
    if n:
        fallback = [ln for ln in lines if "planted failure: cannot make" in ln]
        warn = f"; warning: {'; '.join(fallback)}" if fallback else ""
        return f"{variant}: {n} failure(s) planted (pop-fault){warn}"
    return (f"warning: {variant}: no failure was planted (pop-fault: "
            f"{'; '.join(lines[-2:]) or 'printed nothing'}): the run measured it without")


def clock_offset(ep: Endpoints, protocol: str, log: Log) -> tuple[float, float]:
    lo, hi = readiness.clock_offset_ms(ep, protocol)
    log(f"{ep.variant}: broker clock - load generator clock between {lo:.1f} and {hi:.1f} ms")
    if lo > MAX_CLOCK_OFFSET_MS or hi < -MAX_CLOCK_OFFSET_MS:
        raise HarnessError(f"{ep.variant}: the broker's clock is {lo:.0f}..{hi:.0f} ms off this host's "
                           f"(more than {MAX_CLOCK_OFFSET_MS:.0f} ms): every wakeup would be biased by it; "
                           "synchronise the clocks (NTP) and run again")
    return lo, hi


def check_settings(ep: Endpoints, scenario: Scenario, written: dict[str, str], log: Log) -> list[str]:
    """The broker.conf keys a variant's broker does not know (older releases ignore them silently): refused
    when the scenario needs one of them on (its run would measure a build without the feature), else
    logged and kept in the manifest."""
    why = needs.not_applicable(scenario, ep.version)  # an external cluster's version is known only now
    if why:
        raise NotApplicable(ep.variant, f"variant {ep.variant}: {why}")
    ignored = readiness.ignored_settings(ep, written) if written else []
    required = needs.required_settings(scenario)
    missing = [k for k in ignored if k in required]
    if missing:
        raise readiness.UnknownSetting(
            ep.variant, f"variant {ep.variant} (RocketMQ {ep.version}) does not know {', '.join(missing)}, which "
            f"scenario {scenario.name} needs; the run would measure it without: leave the scenario "
            "out for this build")
    if ignored:
        log(f"warning: {ep.variant} (RocketMQ {ep.version}) does not know {', '.join(ignored)} from its "
            "broker.conf and runs without (the manifest keeps them as ignored_settings)")
    return ignored


class BrokerFacts(Hook):
    """Once the brokers serve: where each variant serves and its version (an external cluster's is known only
    now), its clock against this host's and the settings it runs without, checked and recorded. After the load:
    the broker.conf it ran, what its agents said (with the failures the pop-fault agent planted) and its module
    jars."""

    def brokers_up(self, run: RunState) -> None:
        for ep in run.endpoints:
            rec = run.record.variant(ep.variant)
            rec.version = rec.version or ep.version
            rec.endpoints = ep.as_dict()
        for ep in run.endpoints:
            run.record.variant(ep.variant).clock_offset_ms = list(clock_offset(ep, run.scenario.protocol, run.log))
        for ep in run.endpoints:
            written = run.backend.broker_config(ep.variant)
            run.record.variant(ep.variant).ignored_settings = check_settings(ep, run.scenario, written, run.log)

    def load_ended(self, run: RunState) -> None:
        for ep in run.endpoints:
            rec = run.record.variant(ep.variant)
            rec.broker_config = run.backend.broker_config(ep.variant)
            rec.agent_report = run.backend.agent_report(ep.variant)
            if run.scenario.plant:
                run.log(planted_line(ep.variant, rec.agent_report))
            rec.modules = [m.as_dict() for m in run.backend.modules(ep.variant)]


class Resources(Hook):
    """The scenario's topics and groups, created on every variant before the load (and on their slaves)."""

    def ready(self, run: RunState) -> None:
        for ep in run.endpoints:
            create_resources(ep, run.scenario, run.log)
