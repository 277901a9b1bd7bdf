"""Calibration of the verdict rule on real brokers: how often it calls two identical builds different
(negative control, A/A) and how often it catches a known slowdown (positive control, the pop-wakeup-delay
agent adding a fixed delay to every wakeup).

Every run is the setup a user runs: two variants side by side, brought up in a random order (recorded), at
the scenario's run length, judged on its own by the code `rmq-harness compare` uses. A/A runs put the build
beside an identical copy; each planted shift has runs of its own (the build beside the build plus the delay),
so no shift reuses another's pairs. The result keeps, per run, the primary comparison's per-cycle levels, raw
and adjusted p, interval and the order the variants came up in: every rate it states can be derived again
from it (docs/statistics.md, Calibration).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from harness.campaigns.loop import Campaign
from harness.contracts.verdict import CHANGED, EFFECT, REGRESSION, VerdictRule
from harness.core.errors import ConfigError
from harness.core.publish import publish_json
from harness.deploy.agents import DELAY_JAR
from harness.inputs.scenario import Scenario
from harness.inputs.variants import JavaAgent, Variant

COPY_SUFFIX = "-copy"
MAX_SHIFT_MS = 2000  # the delay agent's own bound (DelayOptions.MAX_DELAY_MS); beyond it the agent refuses
AA = "aa"


@dataclass(frozen=True)
class Plan:
    base: Variant
    copy: Variant
    shifted: dict[int, Variant]  # delay in ms -> the variant with the delay agent

    @property
    def variants(self) -> list[Variant]:
        return [self.base, self.copy, *self.shifted.values()]

    def pairs(self, runs: int, shift_runs: int) -> list[tuple[str | int, list[Variant]]]:
        """(what the run controls: AA or a shift in ms, its two variants) for every run, interleaved so
        that a calibration cut short still has some of each."""
        out: list[tuple[str | int, list[Variant]]] = []
        for i in range(max(runs, shift_runs)):
            if i < runs:
                out.append((AA, [self.base, self.copy]))
            if i < shift_runs:
                out += [(ms, [self.base, v]) for ms, v in self.shifted.items()]
        return out


def plan(base: Variant, shifts_ms: Sequence[int]) -> Plan:
    """The variants of every calibration run: ``base``, a copy of it, and ``base`` plus each delay."""
    def renamed(name: str, **update: object) -> Variant:
        v = base.model_copy(update={"name": name, "description": f"calibration: {name}", **update})
        Variant.model_validate(v.model_dump())  # the name must still be a valid variant name
        return v

    if base.is_external:
        raise ConfigError(f"variant {base.name} is an external cluster: a calibration plants its delays with an "
                          "agent on brokers it starts; calibrate a build (version: or jars:) instead")
    for ms in shifts_ms:
        if not 0 < ms <= MAX_SHIFT_MS:
            raise ConfigError(f"--shift-ms {ms}: a planted shift is a whole number of milliseconds from 1 to "
                              f"{MAX_SHIFT_MS}")
    return Plan(base=base, copy=renamed(base.name + COPY_SUFFIX),
                shifted={ms: renamed(f"{base.name}-plus{ms}ms",
                                     agents=[*base.agents, JavaAgent(jar=DELAY_JAR, options=f"delay_ms={ms}")])
                         for ms in dict.fromkeys(shifts_ms)})


def rate(k: int, n: int, level: float = 0.95) -> dict:
    """k of n, with its exact (Clopper-Pearson) two-sided interval and one-sided bounds: "at most ``upper``" is the
    claim a false-alarm rate supports (0 of 59 bounds it at 5%), "at least ``lower``" the one a detection rate (power)
    supports."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci": None, "upper": None, "lower": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    upper = binomtest(k, n, alternative="less").proportion_ci(confidence_level=level, method="exact").high
    lower = binomtest(k, n, alternative="greater").proportion_ci(confidence_level=level, method="exact").low
    return {"k": k, "n": n, "rate": k / n, "ci": [round(ci.low, 4), round(ci.high, 4)], "upper": round(upper, 6),
            "lower": round(lower, 6)}


def delay_controls(scenario: Scenario) -> bool:
    """Whether a planted wakeup delay is a positive control of this scenario: its verdict judges the wakeup. (A
    scenario judged on stalls or losses is not moved by a delay of every wakeup: its power is the planted 2x's,
    spark.calibration.POWER_FACTOR.)"""
    return scenario.verdict_metric == "wakeup_ms"


def run_all(p: Plan, scenarios: Sequence[Scenario], runs: int, shift_runs: int,
            campaign: Campaign) -> list[Path | str]:
    """Every run of the calibration, round by round (each round: every scenario's A/A run, then its delayed runs
    where a delay controls it), so that a calibration cut short has some of each; a run that failed is no
    comparison: it is said, and the calibration goes on."""
    campaign.check(list(scenarios), p.variants)
    rounds = [(sc, what, variants) for i in range(max(runs, shift_runs)) for sc in scenarios
              for what, variants in p.pairs(1 if i < runs else 0, 1 if i < shift_runs and delay_controls(sc) else 0)]
    for i, (sc, what, variants) in enumerate(rounds):
        campaign.run(sc, variants, f"calibration run {i + 1} of {len(rounds)} ({sc.name}, "
                                   f"{'A/A' if what == AA else f'+{what} ms'})")
    return campaign.finish().archives


def judge(archives: Sequence[Path | str], p: Plan, rule: VerdictRule, log: Callable[[str], None]) -> dict:
    """Every run judged on its own on Spark (spark.calibration): the build against the other variant of the run,
    its copy (A/A) or the build plus a delay (power)."""
    from spark.calibration import judge_runs

    controls: dict[str, str | int] = {p.copy.name: AA, **{v.name: ms for ms, v in p.shifted.items()}}
    return judge_runs(archives, p.base.name, controls, rule, log)


def order_effect(records: Sequence[dict]) -> dict | None:
    """A/A runs: how much slower the variant brought up second was than the one brought up first (the ratio of
    their levels, geometric mean over runs, with a t interval on the log scale). None without recorded orders."""
    logs = []
    for r in records:
        order, prim = r["variant_order"], r["primary"]
        if not order or order.get("how") != "random" or not prim["median_baseline"] or not prim["median_candidate"]:
            continue
        first_is_base = order["names"][0] == r["baseline"]
        second, first = ((prim["median_candidate"], prim["median_baseline"]) if first_is_base
                         else (prim["median_baseline"], prim["median_candidate"]))
        if np.isfinite(first) and np.isfinite(second) and first > 0 and second > 0:
            logs.append(np.log(second / first))
    if len(logs) < 3:
        return None
    from scipy.stats import t

    arr = np.asarray(logs)
    half = t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / np.sqrt(arr.size)
    return {"runs": int(arr.size), "second_over_first": float(np.exp(arr.mean())),
            "ci": [float(np.exp(arr.mean() - half)), float(np.exp(arr.mean() + half))],
            "second_slower_in": int((arr > 0).sum())}


def _controls(runs: Sequence[dict], p: Plan) -> dict:
    """The rates of one set of judged runs: A/A false verdicts, each delay's detections, the planted 2x's."""
    aa = [r for r in runs if r["control"] == AA]
    aa_verdicts = [r["verdict"] for r in aa]
    out = {
        "aa": {**rate(sum(v in CHANGED for v in aa_verdicts), len(aa_verdicts)),
               "verdicts": {v: aa_verdicts.count(v) for v in sorted(set(aa_verdicts))},
               "cycles": [[r["primary"]["n_baseline"], r["primary"]["n_candidate"]] for r in aa],
               "ratios": [r["primary"]["ratio_of_medians"] for r in aa],
               "order_effect": order_effect(aa)},
        "shifts": [],
    }
    # How large a regression one run of the scenario detects with 80% power (spark.power), its A/A runs' median:
    # what an "inconclusive" of this scenario could have hidden. Archives judged before it was kept have none.
    # None over scenarios whose effects differ (a ratio and a difference have no common median).
    sized = [(r["primary"]["detectable"][1], EFFECT[r["primary"]["statistic"]]) for r in aa
             if (r["primary"].get("detectable") or [None, None])[1] is not None]
    effects = {e for _, e in sized}
    out["aa"]["detectable_regression"] = (
        {"median": float(np.median([d for d, _ in sized])), "runs": len(sized), "effect": effects.pop()}
        if sized and len(effects) == 1 else None)
    # Every A/A run judged again with a 2x change planted into its candidate's cycles (spark.calibration).
    doubled = [r["doubled"]["verdict"] for r in aa if r.get("doubled")]
    out["power_2x"] = {**rate(sum(v == REGRESSION for v in doubled), len(doubled)),
                       "verdicts": {v: doubled.count(v) for v in sorted(set(doubled))}}
    for ms in p.shifted:
        mine = [r for r in runs if r["control"] == ms]
        if not mine:
            continue
        verdicts = [r["verdict"] for r in mine]
        out["shifts"].append({"delay_ms": ms, **rate(verdicts.count(REGRESSION), len(verdicts)),
                              "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
                              "ratios": [r["primary"]["ratio_of_medians"] for r in mine],
                              "levels_ms": [[r["primary"]["median_baseline"], r["primary"]["median_candidate"]]
                                            for r in mine]})
    return out


def summarise(judged: dict, p: Plan, scenarios: Sequence[Scenario]) -> dict:
    """The rates pooled over every scenario (``aa``, ``shifts``, ``power_2x``: what a claim about the gate set
    quotes) and per scenario (``per_scenario``), with every run's judgement (``runs``)."""
    runs = judged["per_run"]
    named = {sc.name for sc in scenarios}
    other = sorted({r["scenario"] for r in runs} - named)
    if other:
        raise ConfigError(f"archives of scenario {', '.join(other)}, which the calibration does not name: add "
                          f"--scenario {other[0]} (or leave its archives out)")
    return {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "variant": p.base.name,
        "scenarios": [sc.model_dump(mode="json") for sc in scenarios],
        "unit": "one run of two variants side by side, in random order, judged on its own at the scenario's length",
        "rule": judged["rule"],
        "power_factor": judged["power_factor"],
        **_controls(runs, p),
        "per_scenario": {sc.name: _controls([r for r in runs if r["scenario"] == sc.name], p) for sc in scenarios},
        "runs": runs,
    }


def write(result: dict, out: Path) -> Path:
    return publish_json(result, out, "calibration results")
