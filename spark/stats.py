"""Candidate versus baseline on one latency metric: effect size, bootstrap interval, Mann-Whitney U,
and a verdict by a stated rule. Lower latency is better. Pure functions over numpy arrays."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import mannwhitneyu

IMPROVEMENT, REGRESSION, NO_CHANGE = "improvement", "regression", "no change"
# Bootstrap resamples at most this many values per side (a random subset beyond it) to bound memory.
BOOTSTRAP_MAX_N = 10_000


@dataclass(frozen=True)
class VerdictRule:
    """improvement: p < alpha and the whole 95% interval of candidate/baseline median ratio lies below
    1 - min_effect; regression: p < alpha and the whole interval lies above 1 + min_effect; else no change."""

    alpha: float = 0.05
    min_effect: float = 0.10
    bootstrap: int = 2000
    min_samples: int = 5
    seed: int = 20251110

    def describe(self) -> str:
        return (f"Mann-Whitney U two-sided p < {self.alpha:g} and the bootstrap 95% interval of "
                f"median(candidate)/median(baseline) entirely below {1 - self.min_effect:g} (improvement) "
                f"or above {1 + self.min_effect:g} (regression); otherwise no change; "
                f"at least {self.min_samples} samples per side")

    def as_dict(self) -> dict:
        return {**asdict(self), "text": self.describe()}


def _ratio(num: float, den: float) -> float | None:
    if den == 0:
        return None if num == 0 else float("inf")
    return num / den


def bootstrap_ratio_ci(base: np.ndarray, cand: np.ndarray, rule: VerdictRule) -> tuple[float, float] | None:
    rng = np.random.default_rng(rule.seed)
    if base.size > BOOTSTRAP_MAX_N:
        base = rng.choice(base, BOOTSTRAP_MAX_N, replace=False)
    if cand.size > BOOTSTRAP_MAX_N:
        cand = rng.choice(cand, BOOTSTRAP_MAX_N, replace=False)
    ratios = np.empty(rule.bootstrap)
    chunk = max(1, 2_000_000 // max(base.size, cand.size))
    for start in range(0, rule.bootstrap, chunk):
        k = min(chunk, rule.bootstrap - start)
        mb = np.median(base[rng.integers(0, base.size, (k, base.size))], axis=1)
        mc = np.median(cand[rng.integers(0, cand.size, (k, cand.size))], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios[start:start + k] = mc / mb
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size < rule.bootstrap * 0.9:
        return None  # the baseline median is zero too often for a ratio to mean anything
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return float(lo), float(hi)


def compare(base: np.ndarray, cand: np.ndarray, rule: VerdictRule) -> dict:
    base = np.asarray(base, dtype=float)
    cand = np.asarray(cand, dtype=float)
    base, cand = base[np.isfinite(base)], cand[np.isfinite(cand)]
    out: dict = {"n_baseline": int(base.size), "n_candidate": int(cand.size)}
    if min(base.size, cand.size) < rule.min_samples:
        return {**out, "verdict": NO_CHANGE, "reason": f"fewer than {rule.min_samples} samples on a side",
                "median_baseline": None, "median_candidate": None, "ratio_of_medians": None, "ci95": None,
                "p_value": None, "rank_biserial": None, "median_difference": None}
    mb, mc = float(np.median(base)), float(np.median(cand))
    res = mannwhitneyu(cand, base, alternative="two-sided")
    # Rank-biserial correlation: -1 = every candidate value below every baseline value.
    rank_biserial = float(2 * res.statistic / (base.size * cand.size) - 1)
    ci = bootstrap_ratio_ci(base, cand, rule)
    p = float(res.pvalue)
    verdict, reason = NO_CHANGE, "not significant" if p >= rule.alpha else "effect within the margin"
    if ci is None:
        reason = "baseline median is zero; ratio undefined"
    elif p < rule.alpha and ci[1] < 1 - rule.min_effect:
        verdict, reason = IMPROVEMENT, "candidate lower"
    elif p < rule.alpha and ci[0] > 1 + rule.min_effect:
        verdict, reason = REGRESSION, "candidate higher"
    return {**out, "verdict": verdict, "reason": reason, "median_baseline": mb, "median_candidate": mc,
            "ratio_of_medians": _ratio(mc, mb), "ci95": list(ci) if ci else None, "p_value": p,
            "rank_biserial": rank_biserial, "median_difference": mc - mb}
