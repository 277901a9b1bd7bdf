"""`rmq-harness ramp`: how much can a cluster take on the pop-retry path?

A steady scenario (e.g. mixed-load: a produce rate, a share of it nacked) runs at one offered rate after
another, every variant side by side at each; after each step every variant's summary is checked against the
scenario's own `expect:` rules (wakeup and redelivery within their limits, nothing lost or duplicated). A
variant holds at a rate when every rule is met there and at every rate below it; it breaks at the first rate
where one is not. The ramp stops once no variant holds. A step whose producers did not reach the rate offered
(the load generator, not the brokers, was the limit) says so and judges nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.inputs.expectations import FAILED, MET, describe, evaluate
from harness.inputs.scenario import Scenario, parse_scenario
from harness.inputs.variants import Variant
from harness.run.sequence import Run

# Below this share of the offered rate the producers, not the brokers, set the pace: the step judges nothing.
REACHED = 0.9
HOLDS, BREAKS, SHORT = "holds", "breaks", "load generator short"


def check(scenario: Scenario, rates: Sequence[float]) -> None:
    """Before anything starts: a steady scenario with rules to check, and rates that go up."""
    if scenario.produce.pattern != "steady":
        raise ConfigError(f"scenario {scenario.name} sends {scenario.produce.pattern}s: a ramp raises a steady rate "
                          "(e.g. --scenario mixed-load)")
    if not scenario.expect:
        raise ConfigError(f"scenario {scenario.name} has no expect: rules, so no rate can hold or break; add them "
                          "(e.g. 'wakeup_ms.p50 < 1000', 'ledger.lost == 0')")
    if len(rates) < 2 or any(r <= 0 for r in rates) or any(b <= a for a, b in zip(rates, rates[1:], strict=False)):
        raise ConfigError(f"--rates {','.join(f'{r:g}' for r in rates)}: at least two rates in messages per second, "
                          "each above the one before (e.g. --rates 50,100,200,400)")


def at_rate(scenario: Scenario, rate: float, duration_s: float | None = None) -> Scenario:
    """``scenario`` offering ``rate`` messages per second in all (its producers share it), named for the rate so
    that steps are never pooled as one scenario."""
    data = scenario.model_dump()
    data["produce"] = {**data["produce"], "rate": rate / scenario.produce.producers}
    data["name"] = f"{scenario.name}-at-{rate:g}".replace(".", "p")[:100]
    if duration_s is not None:
        data["duration_s"] = duration_s
    return parse_scenario(data, f"{scenario.source} (ramp at {rate:g}/s)")


def judge(scenario: Scenario, row: dict, offered: float) -> dict:
    """One variant at one step: holds, breaks (with the rules not met) or the load generator fell short."""
    reached = row.get("sent", 0) / scenario.duration_s
    checked = evaluate(scenario.expect, row)
    failing = [describe(c) for c in checked["checks"] if c["status"] != MET]
    if reached < REACHED * offered:
        state = SHORT
    else:
        state = HOLDS if not failing else BREAKS
    return {"state": state, "offered_per_s": offered, "reached_per_s": round(reached, 2), "failing": failing,
            "failed_rules": sum(c["status"] == FAILED for c in checked["checks"])}


@dataclass
class Outcome:
    steps: list[dict] = field(default_factory=list)  # {rate, scenario, archive, variants: {name: judge()}}
    failed: dict[str, str] = field(default_factory=dict)  # rate -> why its run failed
    wall_s: float = 0.0


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
            if j["state"] == BREAKS:
                broke, why = step["rate"], j["failing"]
            else:
                note = (f"at {step['rate']:g}/s the producers reached {j['reached_per_s']:g}/s: add workers to go "
                        "higher")
            break
        else:
            if outcome.steps and held == outcome.steps[-1]["rate"]:
                note = "held at every rate asked: ramp higher to find where it breaks"
        out.append({"variant": v, "holds_up_to_per_s": held, "breaks_at_per_s": broke, "why": why, "note": note})
    return out


def run_all(scenario: Scenario, variants: Sequence[Variant], rates: Sequence[float], runs_dir: Path | str,
            log: Callable[[str], None], duration_s: float | None = None, make_run: Callable[..., Run] = Run,
            on_result: Callable[[list[dict]], None] = lambda summary: None) -> Outcome:
    """Every rate in turn until no variant holds; a step whose run fails ends the ramp (said why)."""
    check(scenario, rates)
    out = Outcome()
    t0 = time.monotonic()
    holding = {v.name for v in variants}
    for i, rate in enumerate(rates):
        sc = at_rate(scenario, rate, duration_s)
        log(f"ramp step {i + 1}/{len(rates)}: {rate:g} messages/s on {', '.join(v.name for v in variants)} "
            f"(elapsed {(time.monotonic() - t0) / 60:.1f} min)")
        try:
            result = make_run(list(variants), sc, runs_dir, log=log).execute()
        except HarnessError as e:
            out.failed[f"{rate:g}"] = str(e).splitlines()[0][:300]
            log(f"ramp step at {rate:g}/s: run failed: {out.failed[f'{rate:g}']}")
            break
        on_result(result.summary)
        judged = {r["variant"]: judge(sc, r, rate) for r in result.summary}
        out.steps.append({"rate": rate, "scenario": sc.name, "archive": str(result.archive), "variants": judged})
        holding &= {v for v, j in judged.items() if j["state"] == HOLDS}
        if not holding:
            log(f"no variant holds at {rate:g}/s: the ramp ends")
            break
    out.wall_s = time.monotonic() - t0
    return out
