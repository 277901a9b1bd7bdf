"""A calibration's runs judged one by one (harness.campaigns.calibrate runs them and summarises the rates): in each
run the build against its other variant, by the comparison rule on that run's data alone, kept with what it was
judged on (the primary comparison's cycle levels), so that every rate a calibration states can be derived again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from harness.contracts.verdict import SHARE, STATISTIC, VerdictRule, level
from harness.core.errors import ConfigError
from spark.comparison import Collected, analyse, collect, nested_runs, sides_of
from spark.io import Archive, load_archives
from spark.stats import compare, decide

# The change every A/A run is judged again with, planted into its candidate's own cycles: each value of a latency
# doubled, or a side's share doubled (as many more of its values set to 1 as it had, up to all of them). Power
# against it comes from the spread the runs had, on every scenario whatever its metric (a planted wakeup delay
# moves only a scenario judged on the wakeup).
POWER_FACTOR = 2.0


def planted(cycles: Sequence[np.ndarray], statistic: str, factor: float = POWER_FACTOR) -> list[np.ndarray]:
    """A side's cycles with the change planted: every latency times ``factor``; for a share, the side's level
    (the mean of its cycles' shares, as spark.stats compares it) times ``factor``, capped at 1, by setting zeros to
    1 across the side's cycles (a flip in a cycle of n values adds 1/n to its share), as near the target as the
    cycles' sizes allow. The level is the side's, not each cycle's: a cycle of one retry (0 or 1) cannot be
    doubled on its own, and doubling cycle by cycle left such scenarios (v2-whole-poll) with no change at all.
    Which cycles take the flips does not matter to a comparison that resamples whole cycles."""
    if statistic != SHARE or not len(cycles):
        return [np.asarray(c, dtype=float) * factor for c in cycles]
    out = [np.asarray(c, dtype=float).copy() for c in cycles]
    sized = [c for c in out if c.size]
    if not sized:
        return out
    now = float(np.mean([c.mean() for c in sized]))
    wanted = (min(1.0, factor * now) - now) * len(sized)  # the rise of the sum of the cycles' shares
    # Zeros taken round-robin over the cycles (the first zero of each, then the second, ...), each flipped while
    # that brings the sum nearer the target.
    zeros = [np.flatnonzero(c == 0) for c in out]
    added = 0.0
    for k in range(max((z.size for z in zeros), default=0)):
        for c, z in zip(out, zeros, strict=True):
            if k < z.size and added + 1 / c.size <= wanted + 0.5 / c.size:
                c[z[k]] = 1
                added += 1 / c.size
    return out


def _with_change(data: Collected, base: str, other: str, rule: VerdictRule, run_id: str, scenario: str,
                 metric: str) -> dict:
    """The run's primary comparison with POWER_FACTOR planted into the candidate's cycles (the primary is tested
    alone: its family's first test): its verdict, and the effect it was judged on."""
    statistic = STATISTIC[metric]
    both = sides_of(data.samples[data.samples["run_id"] == run_id], scenario, base, other, metric)
    both["cand"] = _planted_runs(both["cand"], statistic)
    result = compare(rule=rule, statistic=statistic, **both)
    return {"verdict": decide(result, result["p_value"], 1, rule)[0],
            **{k: result[k] for k in ("ratio_of_medians", "difference", "ci")}}


def _planted_runs(runs: Sequence[Sequence[np.ndarray]], statistic: str) -> list[list[np.ndarray]]:
    """The candidate's runs (each a list of cycles) with the change planted over all their cycles together."""
    flat = planted([c for run in runs for c in run], statistic)
    out, i = [], 0
    for run in runs:
        out.append(flat[i:i + len(run)])
        i += len(run)
    return out


def _judged(data: Collected, base: str, other: str, rule: VerdictRule, archive: Archive) -> dict:
    """One run's judgement, with what it was judged on (its scenario's primary metric's cycle levels)."""
    scenario = archive.record.scenario_name
    metric = data.scenarios[scenario].verdict_metric
    samples = data.samples[data.samples["run_id"] == archive.run_id]
    levels = {side: [level(c, STATISTIC[metric]) for run in nested_runs(samples, scenario, variant, metric)
                     for c in run]
              for side, variant in (("baseline", base), ("candidate", other))}
    result = analyse(data, base, other, rule, run_id=archive.run_id)
    primary = next(c for c in result["comparisons"] if c["primary"] and c["scenario"] == scenario)
    run_id, order = archive.run_id, archive.record.variant_order
    keep = ("metric", "statistic", "n_baseline", "n_candidate", "median_baseline", "median_candidate",
            "ratio_of_medians", "difference", "ci", "detectable", "p_value", "p_floor", "p_adjusted", "verdict",
            "reason")
    return {"run_id": run_id, "scenario": scenario, "baseline": result["baseline"], "candidate": result["candidate"],
            "variant_order": order, "verdict": result["verdict"], "family": result["family"],
            "doubled": _with_change(data, base, other, rule, run_id, scenario, metric),
            "primary": {k: primary.get(k) for k in keep}, "cycle_levels": levels,
            "comparisons": {c["metric"]: c["verdict"] for c in result["comparisons"]}}


def judge_runs(archives: Sequence[Path | str], base: str, controls: Mapping[str, str | int], rule: VerdictRule,
               log: Callable[[str], None]) -> dict:
    """Each archive's ``base`` against each other variant of it that ``controls`` names (-> what that variant
    controls: the A/A copy, or a planted delay in ms); {"rule", "per_run": one judgement each}. Archives of the
    earlier layout (all variants in every run) are judged pair by pair."""
    from spark.session import local_session

    loaded = load_archives([str(a) for a in archives], warn=log)
    for a in loaded:
        if base not in a.variants or not set(controls) & set(a.variants):
            raise ConfigError(f"archive {a.run_id} ({', '.join(a.variants)}) is no calibration run of {base} (it "
                              f"needs {base} and its copy or a delayed copy)")
    present = sorted({base, *controls} & {v for a in loaded for v in a.variants})
    data = collect(local_session("local[*]"), loaded, present, seed=rule.seed, per_run=True)
    data.close()  # (judged from the samples and tables; no report keeps the rows)
    per_run = [{"control": controls[other], **_judged(data, base, other, rule, a)}
               for a in loaded for other in a.variants if other in controls]
    return {"rule": rule.as_dict(), "power_factor": POWER_FACTOR, "per_run": per_run}
