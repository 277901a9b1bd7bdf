"""`rmq-harness ramp`: how much can a cluster take on the pop-retry path?

A steady scenario (e.g. mixed-load: a produce rate, a share of it nacked) runs at one offered rate after
another, every variant side by side at each; after each step every variant's summary is checked against the
scenario's own `expect:` rules and any the user adds (an SLO such as 'redelivery_ms.p99 < 3000'), and a client
error breaks it too. A variant holds at a rate when every rule is met there and at every rate below it; it
breaks at the first rate where one is not. The ramp stops once no variant holds. A step whose producers did not
reach the rate offered judges nothing and says so. Each step also says whose CPU ran out (harness.run.cpu: the
load generator's busiest Locust process, the machine, or none): a rate not reached with CPU to spare is the
brokers slowing every send (each producer sends one message at a time); a break with the load generator out of
CPU is not the brokers' limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.campaigns import loop
from harness.campaigns.loop import Campaign, Failed
from harness.core.errors import ConfigError
from harness.inputs.expectations import FAILED, NO_DATA, describe, evaluate, parse
from harness.inputs.scenario import Scenario, parse_scenario
from harness.inputs.variants import Variant

# Below this share of the offered rate the producers did not keep the pace: the step judges nothing.
REACHED = 0.9
# What one producer is asked to send at most; more producers share a higher rate (each sends one message at
# a time, so its rate is bounded by the send round trip: one gRPC producer reached 85/s of 100 offered here).
PER_PRODUCER = 50.0
MAX_PRODUCERS = 64
# A step shorter than this after the producers' start delay says little about a rate.
MIN_SENDING_S = 10.0
HOLDS, BREAKS, NOT_REACHED = "holds", "breaks", "rate not reached"


def sending_s(scenario: Scenario) -> float:
    """How long a steady scenario's producers send: from their start delay to the end of duration_s."""
    return scenario.duration_s - scenario.produce.delay_s


def check(scenario: Scenario, rates: Sequence[float], rules: Sequence[str] = (),
          duration_s: float | None = None) -> None:
    """Before anything starts: a steady scenario that runs for a time, rules to check, rates that go up."""
    if scenario.produce.pattern != "steady":
        raise ConfigError(f"scenario {scenario.name} sends {scenario.produce.pattern}s: a ramp raises a steady rate "
                          "(e.g. --scenario mixed-load)")
    if scenario.cycles.count:
        raise ConfigError(f"scenario {scenario.name} runs {scenario.cycles.count} cycles whatever the time: a ramp "
                          "step runs for --duration; pick a scenario with cycles.count 0")
    if not scenario.expect and not rules:
        raise ConfigError(f"scenario {scenario.name} has no expect: rules, so no rate can hold or break; add "
                          "--rule (e.g. --rule 'redelivery_ms.p99 < 3000')")
    for r in rules:
        try:
            parse(r)
        except ValueError as e:
            raise ConfigError(f"--rule {r!r}: {e}") from None
    shown = ",".join(f"{r:g}" for r in rates)
    if (len(rates) < 2 or not all(math.isfinite(r) and r > 0 for r in rates)
            or any(b <= a for a, b in zip(rates, rates[1:], strict=False))):
        raise ConfigError(f"--rates {shown}: at least two rates in messages per second, each above the one "
                          "before (e.g. --rates 50,100,200,400)")
    for r in rates:  # every step a valid scenario before the first starts
        sc = at_rate(scenario, r, duration_s)
        if sending_s(sc) < MIN_SENDING_S:
            raise ConfigError(f"--duration {sc.duration_s:g}: the producers start {sc.produce.delay_s:g} s in, which "
                              f"leaves under {MIN_SENDING_S:g} s of load per step; give at least "
                              f"{sc.produce.delay_s + MIN_SENDING_S:g}")


def at_rate(scenario: Scenario, rate: float, duration_s: float | None = None) -> Scenario:
    """``scenario`` offering ``rate`` messages per second in all, over enough producers (PER_PRODUCER each), named
    for the rate so that steps are never pooled as one scenario."""
    data = scenario.model_dump()
    producers = max(scenario.produce.producers, min(MAX_PRODUCERS, math.ceil(rate / PER_PRODUCER)))
    data["produce"] = {**data["produce"], "rate": rate / producers, "producers": producers}
    data["name"] = f"{scenario.name}-at-{rate:g}".replace(".", "p")[:100]
    if duration_s is not None:
        data["duration_s"] = duration_s
    return parse_scenario(data, f"{scenario.source} (ramp at {rate:g}/s)")


def judge(scenario: Scenario, row: dict, offered: float, rules: Sequence[str] = ()) -> dict:
    """One variant at one step: holds, breaks (the rules not met, client errors) or the rate was not reached.
    A rule with no data (e.g. no retry found a waiting poll) neither holds nor breaks: it is listed."""
    reached = row.get("sent", 0) / sending_s(scenario)
    checked = evaluate([*scenario.expect, *rules], row)
    failing = [describe(c) for c in checked["checks"] if c["status"] == FAILED]
    if row.get("errors"):
        failing.append(f"client errors ({row['errors']})")
    if failing:
        state = BREAKS
    elif reached < REACHED * offered:
        state = NOT_REACHED
    else:
        state = HOLDS
    return {"state": state, "offered_per_s": offered, "reached_per_s": round(reached, 2), "failing": failing,
            "no_data": [c["rule"] for c in checked["checks"] if c["status"] == NO_DATA]}


@dataclass
class Outcome(loop.Outcome):
    """The campaign's outcome with its steps; ``failed``: the rate whose run failed -> why."""

    steps: list[dict] = field(default_factory=list)  # {rate, scenario, archive, cpu, variants: {name: judge()}}


def verdicts(outcome: Outcome, variants: Sequence[str]) -> list[dict]:
    """Per variant: the highest rate it held (at it and every step below), the first where it broke and why."""
    out = []
    for v in variants:
        held, broke, why, note = None, None, [], ""
        for step in outcome.steps:
            j = step["variants"].get(v)
            if j is None:
                continue
            if j["state"] == HOLDS:
                held = step["rate"]
                continue
            cpu = step.get("cpu", {}).get("ran_out", {})
            if j["state"] == BREAKS:
                broke, why = step["rate"], j["failing"]
                note = f"at {step['rate']:g}/s: {cpu.get('line', 'CPU not measured')}" + (
                    "; so the break need not be the brokers' limit" if cpu.get("load_generator") or cpu.get("machine")
                    else "")
            else:
                note = f"at {step['rate']:g}/s the producers reached {j['reached_per_s']:g}/s: " + (
                    "the load generator is the limit" if cpu.get("load_generator") else
                    "the machine is the limit (brokers and load generator share it)" if cpu.get("machine") else
                    "the brokers slowed the sends" if cpu else "the brokers or the load generator is the limit"
                ) + f" ({cpu.get('line', 'CPU not measured')})"
            out.append({"variant": v, "holds_up_to_per_s": held, "breaks_at_per_s": broke, "why": why,
                        "note": note, "cpu_ran_out": {k: cpu.get(k) for k in ("load_generator", "machine")}})
            break
        else:
            if outcome.steps and held == outcome.steps[-1]["rate"]:
                note = "held at every rate asked: ramp higher to find where it breaks"
            out.append({"variant": v, "holds_up_to_per_s": held, "breaks_at_per_s": broke, "why": why,
                        "note": note, "cpu_ran_out": {}})
    return out


def run_all(scenario: Scenario, variants: Sequence[Variant], rates: Sequence[float], campaign: Campaign,
            duration_s: float | None = None, rules: Sequence[str] = ()) -> Outcome:
    """Every rate in turn until no variant holds (``campaign.outcome`` an Outcome of this module's, which keeps
    the steps). A step whose run fails ends the ramp, said why; bad input (refused before that step started
    anything, e.g. an external cluster that does not answer) is raised."""
    check(scenario, rates, rules, duration_s)
    steps = [at_rate(scenario, rate, duration_s) for rate in rates]
    campaign.check(steps, variants)
    out = campaign.outcome
    holding = {v.name for v in variants}
    for i, (rate, sc) in enumerate(zip(rates, steps, strict=True)):
        done = campaign.run(sc, variants, f"ramp step {i + 1}/{len(rates)}: {rate:g} messages/s "
                                          f"({sc.produce.producers} producers)")
        if done is None or isinstance(done, Failed):
            out.failed[f"{rate:g}"] = done.why if done else "no variant can run it"
            break
        judged = {r["variant"]: judge(sc, r, rate, rules) for r in done.summary}
        out.steps.append({"rate": rate, "scenario": sc.name, "archive": str(done.archive), "cpu": done.cpu,
                          "variants": judged})
        holding &= {v for v, j in judged.items() if j["state"] == HOLDS}
        if not holding:
            campaign.log(f"no variant holds at {rate:g}/s: the ramp ends")
            break
    return campaign.finish()
