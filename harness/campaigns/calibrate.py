"""Calibration of the verdict rule on real brokers: how often it calls two identical builds different
(negative control, A/A) and how often it catches a known slowdown (positive control, the pop-wakeup-delay
agent adding a fixed delay to every wakeup).

Each run puts, side by side, the variant, an identical copy of it, and one copy per planted shift; every run
is then judged on its own, by the same code `rmq-harness compare` uses, at the scenario's run length.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import binomtest

from harness.contracts.verdict import CHANGED, REGRESSION, VerdictRule
from harness.core.errors import ConfigError, HarnessError
from harness.core.publish import publish_json
from harness.inputs.scenario import Scenario
from harness.inputs.variants import DELAY_JAR, JavaAgent, Variant
from harness.run.sequence import Run

COPY_SUFFIX = "-copy"
MAX_SHIFT_MS = 2000  # the delay agent's own bound (DelayOptions.MAX_DELAY_MS); beyond it the agent refuses


@dataclass(frozen=True)
class Plan:
    base: Variant
    copy: Variant
    shifted: dict[int, Variant]  # delay in ms -> the variant with the delay agent

    @property
    def variants(self) -> list[Variant]:
        return [self.base, self.copy, *self.shifted.values()]


def plan(base: Variant, shifts_ms: Sequence[int]) -> Plan:
    """The variants of every calibration run: ``base``, a copy of it, and ``base`` plus each delay."""
    def renamed(name: str, **update: object) -> Variant:
        v = base.model_copy(update={"name": name, "description": f"calibration: {name}", **update})
        Variant.model_validate(v.model_dump())  # the name must still be a valid variant name
        return v

    for ms in shifts_ms:
        if not 0 < ms <= MAX_SHIFT_MS:
            raise ConfigError(f"--shift-ms {ms}: a planted shift is a whole number of milliseconds from 1 to "
                              f"{MAX_SHIFT_MS}")
    return Plan(base=base, copy=renamed(base.name + COPY_SUFFIX),
                shifted={ms: renamed(f"{base.name}-plus{ms}ms",
                                     agents=[*base.agents, JavaAgent(jar=DELAY_JAR, options=f"delay_ms={ms}")])
                         for ms in dict.fromkeys(shifts_ms)})


def rate(k: int, n: int, level: float = 0.95) -> dict:
    """k of n, with its exact (Clopper-Pearson) interval."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return {"k": k, "n": n, "rate": k / n, "ci": [round(ci.low, 4), round(ci.high, 4)]}


def run_all(p: Plan, scenario: Scenario, runs: int, runs_dir: Path | str,
            log: Callable[[str], None]) -> list[Path | str]:
    archives = []
    for i in range(runs):
        log(f"calibration run {i + 1} of {runs}: {', '.join(v.name for v in p.variants)}")
        try:
            archives.append(Run(p.variants, scenario, runs_dir, log=log).execute().archive)
        except HarnessError as e:
            # A run that failed is no comparison; it is counted and said, and the calibration goes on.
            log(f"calibration run {i + 1} failed: {e}")
    return archives


def judge(archives: Sequence[Path], p: Plan, rule: VerdictRule, log: Callable[[str], None]) -> dict:
    """Every run judged on its own: base vs copy (A/A), base vs each shifted variant (power)."""
    from spark.comparison import analyse, check_variants, collect
    from spark.io import load_archives
    from spark.session import local_session

    loaded = load_archives([str(a) for a in archives], warn=log)
    names = [v.name for v in p.variants]
    check_variants(loaded, names)
    spark = local_session("local[*]")
    data = collect(spark, loaded, names, seed=rule.seed, per_run=True)
    data.close()  # (judged from the samples and tables; no report keeps the rows)
    per_run = []
    for a in loaded:
        row = {"run_id": a.run_id, "aa": analyse(data, p.base.name, p.copy.name, rule, run_id=a.run_id)}
        row["shifts"] = {ms: analyse(data, p.base.name, v.name, rule, run_id=a.run_id) for ms, v in p.shifted.items()}
        per_run.append(row)
    return {"rule": rule.as_dict(), "per_run": per_run}


def _primary(result: dict) -> dict:
    return next(c for c in result["comparisons"] if c["primary"])


def summarise(judged: dict, p: Plan, scenario: Scenario) -> dict:
    runs = judged["per_run"]
    aa = [r["aa"]["verdict"] for r in runs]
    out = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "variant": p.base.name,
        "scenario": scenario.model_dump(mode="json"),
        "unit": "one run judged on its own: cycles of the run, the scenario's run length",
        "rule": judged["rule"],
        "aa": {**rate(sum(v in CHANGED for v in aa), len(aa)),
               "verdicts": {v: aa.count(v) for v in sorted(set(aa))},
               "cycles": [[_primary(r["aa"])["n_baseline"], _primary(r["aa"])["n_candidate"]] for r in runs],
               "ratios": [_primary(r["aa"])["ratio_of_medians"] for r in runs]},
        "shifts": [],
        "runs": [r["run_id"] for r in runs],
    }
    for ms in p.shifted:
        verdicts = [r["shifts"][ms]["verdict"] for r in runs]
        out["shifts"].append({"delay_ms": ms, **rate(verdicts.count(REGRESSION), len(verdicts)),
                              "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
                              "ratios": [_primary(r["shifts"][ms])["ratio_of_medians"] for r in runs],
                              "levels_ms": [[_primary(r["shifts"][ms])["median_baseline"],
                                             _primary(r["shifts"][ms])["median_candidate"]] for r in runs]})
    return out


def write(result: dict, out: Path) -> Path:
    return publish_json(result, out, "calibration results")
