"""`rmq-harness matrix`: every scenario on every variant (variants side by side, scenarios one after
another), then one Spark job over all the archives and one report (spark/jobs/matrix.py).

Everything is checked before the first broker starts: each scenario file, its expectations, and whether
any variant sets a broker setting the scenario decides. A scenario whose run fails is reported in the
matrix as failed, and the others still run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.campaigns.loop import Campaign, Failed, Outcome
from harness.core.errors import ConfigError
from harness.inputs.catalogue import builtin_names, load_scenario, load_scenarios, on_protocol
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant

ALL = "all"
GATE = "gate"  # the scenarios marked `gate: true`: the set a pull request runs
UPSTREAM = "upstream"  # the scenarios marked `upstream: true`: pop defects upstream reported (the sweep's table)
# Brokers starting and stopping, Prometheus, the archive: measured ~40-50 s per run with three variants here.
OVERHEAD_S = 50.0


@dataclass
class Plan:
    scenarios: list[Scenario]
    not_applicable: dict[str, str] = field(default_factory=dict)  # scenario form -> why it is not run


def scenarios(names: Sequence[str], protocols: Sequence[str] = ()) -> Plan:
    """The scenarios named (or every built-in one for 'all'), each loaded and validated; a series gives
    every point of it, NAME@N one point. With ``protocols``, each scenario over each of them (its form over
    another protocol is NAME-PROTOCOL); a form that does not apply is left out and said why."""
    if not names or list(names) == [ALL]:
        names = builtin_names()
    elif list(names) == [GATE]:
        names = sorted(n for n in builtin_names() if all(sc.gate for sc in load_scenarios(n)))
    elif ALL in names or GATE in names:
        raise ConfigError(f"--scenario {ALL if ALL in names else GATE} cannot be combined with named scenarios")
    if UPSTREAM in names:  # the set, with any scenario named beside it (the sweep's `upstream` plus burst)
        marked = sorted(n for n in builtin_names() if all(sc.upstream for sc in load_scenarios(n)))
        names = [x for n in names for x in (marked if n == UPSTREAM else [n])]
    loaded = [sc for n in dict.fromkeys(names) for sc in ([load_scenario(n)] if "@" in n else load_scenarios(n))]
    plan = Plan(scenarios=[])
    for sc in loaded:
        for protocol in dict.fromkeys(protocols or [sc.protocol]):
            try:
                plan.scenarios.append(on_protocol(sc, protocol))
            except ConfigError as e:
                plan.not_applicable[f"{sc.name}-{protocol}"] = str(e).split(": ", 1)[-1]
    seen: dict[str, str] = {}
    for sc in plan.scenarios:
        if sc.name in seen:
            raise ConfigError(f"{sc.source}: scenario name {sc.name!r} is also the name of {seen[sc.name]}")
        seen[sc.name] = sc.source
    if not plan.scenarios:
        raise ConfigError("no scenario applies to --protocol " + ", ".join(protocols) + ": "
                          + "; ".join(f"{k}: {v}" for k, v in plan.not_applicable.items()))
    return plan


def check(plan: Sequence[Scenario], variants: Sequence[Variant], campaign: Campaign) -> None:
    if len(variants) < 2:
        raise ConfigError("matrix needs at least two variants (the first is the baseline): --variant A --variant B")
    campaign.check(plan, variants)


def estimate_s(sc: Scenario) -> float:
    """About how long one scenario takes: its sending time, one cycle's drain, the overhead of a run."""
    c = sc.cycles
    if sc.produce.pattern == "burst" and c.count:
        sending = c.count * (20.0 if sc.drains else float(c.spacing))
    elif c.at_least:  # a variant that stalls (~20 s a cycle) runs past duration_s to its cycles
        sending = max(sc.duration_s, min(c.cap_s or 0.0, c.at_least * 20.0))
    else:
        sending = sc.duration_s
    return sc.produce.delay_s + sending + 20.0 + c.linger_s + OVERHEAD_S


def run_all(plan: Sequence[Scenario], variants: Sequence[Variant], campaign: Campaign) -> Outcome:
    """Each scenario in turn on every variant that can run it (two at least); ``campaign.on_result`` gets each
    run's own summary as it lands."""
    for i, sc in enumerate(plan):
        remaining = sum(estimate_s(s) for s in plan[i:])
        done = campaign.run(sc, variants, f"scenario {i + 1}/{len(plan)}: {sc.name}",
                            f", about {remaining / 60:.0f} min left")
        if isinstance(done, Failed):
            campaign.outcome.failed[sc.name] = done.why
    out = campaign.finish()
    campaign.log(f"matrix runs done in {out.wall_s / 60:.1f} min: {len(out.archives)} archived, "
                 f"{len(out.failed)} failed")
    return out
