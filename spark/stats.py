"""Candidate versus baseline, with the cycle as the unit: pure functions over numpy arrays.

The retries of one cycle are released by the same events (one revive scan, one long-poll expiry), so
they are not independent samples; cycles are. Each side of a comparison is a list of runs, each run a list
of cycles, each cycle the values of its retries (ms; ``inf`` for a retry that never came back). Lower is
better.

The rule:
- the statistic of a cycle is the median of its values; a side's level is the median of its cycles' (for a
  share, such as the retries that stalled, 0 or 1 each: the cycle's mean and the mean of its cycles');
- the test is a Mann-Whitney U on the per-cycle medians of the two sides (two-sided; one-sided, candidate
  higher, for a regression gate), exact also with ties (the permutation distribution of the rank sum given
  the ties: ``rank_sum_test``), stratified by run when both sides share runs; per scenario the primary
  comparison at alpha, the secondary ones Holm-adjusted only once it was significant (spark.comparison);
- the effect is the ratio of levels, candidate / baseline, with a (1 - alpha; one-sided 1 - 2 alpha)
  percentile interval from a hierarchical bootstrap that resamples runs, then cycles within them, then
  retries within cycles;
- improvement: adjusted p < alpha and the whole interval below 1 / (1 + min_effect); regression: adjusted
  p < alpha and the whole interval above 1 + min_effect (a margin symmetric on the log scale); for a share
  the effect is the difference, against -share_margin and +share_margin; equivalent: the interval inside the
  margin; otherwise inconclusive; and "not enough data" when the two sides have too few cycles (or too many
  ties) for any outcome to reach alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np
from scipy.stats import mannwhitneyu, rankdata

from harness.contracts.verdict import (
    AGGREGATE,
    DIFFERENCE,
    EFFECT,
    EQUIVALENT,
    IMPROVEMENT,
    INCONCLUSIVE,
    MEDIAN,
    NOT_ENOUGH,
    RATIO,
    REGRESSION,
    VerdictRule,
    level,
)
from spark.bootstrap import BootstrapSide, Runs
from spark.power import detectable_change, detectable_phrase

# A bootstrap replicate resamples at most this many values of one cycle (a random subset beyond it).
MAX_PER_CYCLE = 2_000


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value Mann-Whitney U can give with n1 and n2 cycles (no ties)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2 / comb(n1 + n2, n1))


# The exact distribution costs values x the smaller side x the range of rank sums; past this both sides have
# dozens of cycles, where the normal approximation (tie-corrected) is as good.
EXACT_WORK = 3e8


def _rank_sum_null(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The exact null distribution of the sum of ``x``'s doubled midranks among the pooled values (index: the
    sum) and its observed value; None past EXACT_WORK.

    Counted by dynamic programming over the midranks (doubled: integers) of a random subset of the pooled
    values, so it is the permutation distribution conditional on the ties. The subset counted is the smaller
    side's; the larger side's sum is the total less it."""
    n1, n2 = x.size, y.size
    doubled = np.rint(2 * rankdata(np.concatenate([x, y]))).astype(np.int64)
    k, n, total = min(n1, n2), n1 + n2, int(doubled.sum())
    top = int(np.sort(doubled)[-k:].sum()) if k else 0
    if n * max(k, 1) * max(top, 1) > EXACT_WORK:
        return None
    # ways[j, s]: the number of subsets of j values (among those seen so far) whose doubled ranks sum to s.
    ways = np.zeros((k + 1, top + 1))
    ways[0, 0] = 1.0
    for r in doubled:
        ways[1:, r:] += ways[:-1, : top + 1 - r].copy()
    dist = ways[k] / ways[k].sum()
    observed = int(doubled[:n1].sum())
    if n1 <= n2:
        return dist, observed
    full = np.zeros(total + 1)
    full[total - np.arange(top + 1)] = dist  # x's sum is the total less y's
    return full, observed


TWO_SIDED, GREATER = "two-sided", "greater"  # greater: the candidate's values higher (worse, for every metric)


def _p(dist: np.ndarray, observed: int, alternative: str = TWO_SIDED) -> tuple[float, float]:
    """(p, floor) of a statistic with this null distribution: two-sided, twice the smaller tail (as scipy's
    exact method; with ties the distribution is skewed); greater, the upper tail. The floor is the smallest
    p any outcome could give."""
    below, above = np.cumsum(dist), np.cumsum(dist[::-1])[::-1]  # P(S <= s), P(S >= s)
    possible = np.flatnonzero(dist)
    if alternative == GREATER:
        return float(min(above[observed], 1.0)), float(dist[possible[-1]])
    p = 2 * min(below[observed], above[observed])
    floor = 2 * min(dist[possible[0]], dist[possible[-1]])
    return float(min(p, 1.0)), float(min(floor, 1.0))


def rank_sum_test(x: np.ndarray, y: np.ndarray, alternative: str = TWO_SIDED) -> tuple[float, float]:
    """(p, floor): the p-value of the Mann-Whitney test of ``x`` against ``y`` (two-sided, or ``greater``: x
    higher) and the smallest p any arrangement of these values could give.

    Exact also with ties (``_rank_sum_null``: scipy's exact method assumes none; its normal approximation goes
    below the exact floor with few cycles: 5 vs 5, all tied within a side, gives 0.0040 for an exact 2/252 =
    0.0079). Past ``EXACT_WORK``, the tie-corrected normal approximation."""
    null = _rank_sum_null(x, y)
    if null is None:
        floor = min_p_value(x.size, y.size)
        return (float(mannwhitneyu(x, y, alternative=alternative, method="asymptotic").pvalue),
                floor / 2 if alternative == GREATER else floor)
    return _p(*null, alternative)


def stratified_rank_sum_test(strata: Sequence[tuple[np.ndarray, np.ndarray]],
                             alternative: str = TWO_SIDED) -> tuple[float, float]:
    """(p, floor) of the rank-sum test stratified by run: within each run the candidate's cycles (``x``) are
    ranked against the baseline's of the same run only, and the statistic is the sum of those rank sums, its
    exact null the convolution of each run's (``_rank_sum_null``). A shift of one run's level that both its
    variants share (the machine, the instance) then moves no rank: cycles of several runs are not pooled as
    if independent. Runs lacking one side say nothing and are left out; past EXACT_WORK in a run, the normal
    approximation of the sum (tie-corrected)."""
    used = [(x, y) for x, y in strata if x.size and y.size]
    if not used:
        return 1.0, 1.0
    nulls = [_rank_sum_null(x, y) for x, y in used]
    if all(n is not None for n in nulls):
        dist, observed = np.ones(1), 0
        for d, o in nulls:
            dist, observed = np.convolve(dist, d), observed + o
        return _p(dist / dist.sum(), observed, alternative)
    from scipy.stats import norm

    stat = mean = var = 0.0
    for x, y in used:
        n1, n2 = x.size, y.size
        n = n1 + n2
        ranks = rankdata(np.concatenate([x, y]))
        _, ties = np.unique(ranks, return_counts=True)
        stat += ranks[:n1].sum()
        mean += n1 * (n + 1) / 2
        var += n1 * n2 / 12 * ((n + 1) - (ties ** 3 - ties).sum() / (n * (n - 1)))
    z = (stat - mean) / np.sqrt(var) if var > 0 else 0.0
    if alternative == GREATER:
        return float(norm.sf(z)), 0.0
    return float(min(1.0, 2 * norm.sf(abs(z)))), 0.0


def cycles_needed(alpha: float) -> int:
    """The fewest cycles per side (equal sides) with which a comparison can reach ``alpha``."""
    n = 1
    while min_p_value(n, n) >= alpha:
        n += 1
    return n


def tarone(floors: Sequence[float | None], alpha: float) -> list[bool]:
    """Which comparisons to test (Tarone 1990): a comparison whose smallest possible p (its cycles and ties)
    cannot reach the level is left out of the family before testing, so it does not dilute the others. The
    family is the smallest K for which at most K comparisons have floor < alpha / K; those are tested. None
    (no data) is never tested."""
    known = [f for f in floors if f is not None]
    for k in range(1, len(known) + 1):
        testable = [f is not None and f < alpha / k for f in floors]
        if sum(testable) <= k:
            return testable
    return [False] * len(floors)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (None stays None and is not counted in the family)."""
    idx = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def _of(statistic: str) -> object:
    return getattr(np, AGGREGATE[statistic])


def cycle_values(runs: Runs, statistic: str = MEDIAN) -> np.ndarray:
    """Each cycle's statistic (its median, or its share)."""
    f = _of(statistic)
    return np.array([f(c) for run in runs for c in run if len(c)], dtype=float)


def _ratio(num: float, den: float) -> float | None:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.float64(num) / np.float64(den)
    return None if np.isnan(r) else float(r)


def _difference(cand: float, base: float) -> float | None:
    with np.errstate(invalid="ignore"):  # both endless: no difference, said as None
        d = np.float64(cand) - np.float64(base)
    return None if np.isnan(d) else float(d)


def effect_draws(base: Runs, cand: Runs, rule: VerdictRule, statistic: str = MEDIAN,
                 paired: bool = False) -> np.ndarray | None:
    """The hierarchical bootstrap's draws of the effect (EFFECT[statistic]): level(candidate) / level(baseline),
    or for a share their difference; None when the baseline's level is zero or both are endless too often for a
    ratio to mean anything. ``paired``: the i-th run of each side is the same run, and each replicate draws the
    same runs for both (what a run does to both variants cancels, as it did in the run)."""
    rng = np.random.default_rng(rule.seed)

    def capped(runs: Runs) -> list[list[np.ndarray]]:
        return [[c if c.size <= MAX_PER_CYCLE else rng.choice(c, MAX_PER_CYCLE, replace=False)
                 for c in run if c.size] for run in runs if any(c.size for c in run)]

    b, c = BootstrapSide(capped(base)), BootstrapSide(capped(cand))
    paired = paired and len(b) == len(c)

    # Each side's draws at once, a block at a time (spark.bootstrap); paired, both sides draw the same runs.
    step = min(b.block(), c.block())
    pairs = []
    for start in range(0, rule.bootstrap, step):
        k = min(step, rule.bootstrap - start)
        runs = b.draw_runs(rng, k) if paired else None
        pairs.append((c.draws(rng, k, statistic, runs), b.draws(rng, k, statistic, runs)))
    cand_levels = np.concatenate([p[0] for p in pairs])
    base_levels = np.concatenate([p[1] for p in pairs])
    # As _ratio and _difference: a draw whose effect is undefined (0/0, inf/inf, inf - inf) is dropped.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = cand_levels - base_levels if EFFECT[statistic] == DIFFERENCE else cand_levels / base_levels
    ratios = ratios[~np.isnan(ratios)]
    return None if ratios.size < rule.bootstrap * 0.9 else ratios


def interval(draws: np.ndarray, rule: VerdictRule) -> tuple[float, float]:
    """The (``rule.level``: 1 - alpha, or 1 - 2 alpha one-sided) percentile interval of the draws."""
    # No interpolation between draws: an endless (inf) level would turn it into nan.
    lo, hi = np.quantile(draws, [rule.tail, 1 - rule.tail], method="inverted_cdf")
    return float(lo), float(hi)


def hierarchical_ratio_ci(base: Runs, cand: Runs, rule: VerdictRule,
                          statistic: str = MEDIAN, paired: bool = False) -> tuple[float, float] | None:
    """The interval of the effect from ``effect_draws``; None where those are."""
    draws = effect_draws(base, cand, rule, statistic, paired)
    return None if draws is None else interval(draws, rule)


def level_ci(runs: Runs, rule: VerdictRule, statistic: str = MEDIAN) -> tuple[float, float] | None:
    """(``rule.level``) percentile interval of one side's level, by the same hierarchical bootstrap (runs, cycles,
    retries); None without cycles. Endless waits stay endless (an upper end of inf)."""
    rng = np.random.default_rng(rule.seed)
    kept = [[c if c.size <= MAX_PER_CYCLE else rng.choice(c, MAX_PER_CYCLE, replace=False) for c in run if c.size]
            for run in runs]
    kept = [run for run in kept if run]
    if not kept:
        return None
    side = BootstrapSide(kept)
    draws = side.draws(rng, rule.bootstrap, statistic)
    lo, hi = np.quantile(draws, [rule.tail, 1 - rule.tail], method="inverted_cdf")
    return float(lo), float(hi)


def compare(base: Runs, cand: Runs, rule: VerdictRule, statistic: str = MEDIAN,
            runs: tuple[Sequence[str], Sequence[str]] | None = None) -> dict:
    """Everything but the verdict (which needs the family's adjusted p-value: see ``decide``). ``runs``: the run
    of each side's runs (baseline's, candidate's). When both sides share two or more runs, the comparison is
    paired by run over those: the test is stratified by run and the bootstrap draws the same runs for both
    sides. Sides from different runs (a sweep's batches) are compared pooled, and said so (``paired`` False)."""
    mb, mc = cycle_values(base, statistic), cycle_values(cand, statistic)
    base_ids, cand_ids = runs if runs else ([], [])
    # Paired over the runs both sides have (a run where one side has no value of this metric says nothing about
    # the difference within it); two such runs at least.
    def has_values(side: Runs, ids: Sequence[str], run: str) -> bool:
        return any(len(c) for c in side[list(ids).index(run)])

    common = [r for r in base_ids if r in set(cand_ids)
              and has_values(base, base_ids, r) and has_values(cand, cand_ids, r)]
    paired = len(common) >= 2
    if paired:
        base = [base[list(base_ids).index(r)] for r in common]
        cand = [cand[list(cand_ids).index(r)] for r in common]
    out: dict = {"unit": "cycle", "statistic": statistic, "n_baseline": int(mb.size), "n_candidate": int(mc.size),
                 "runs_baseline": sum(1 for r in base if any(len(c) for c in r)),
                 "runs_candidate": sum(1 for r in cand if any(len(c) for c in r)),
                 "retries_baseline": int(sum(len(c) for r in base for c in r)),
                 "retries_candidate": int(sum(len(c) for r in cand for c in r)),
                 "median_baseline": None, "median_candidate": None, "ratio_of_medians": None,
                 "effect": EFFECT[statistic], "difference": None, "ci": None, "detectable": None,
                 "p_value": None, "p_floor": None, "rank_biserial": None,
                 # None: one run (or a side without values); True: paired over the runs both sides have; False:
                 # sides from different runs
                 "paired": None if runs is None or len({*base_ids, *cand_ids}) < 2 else paired}
    if not mb.size or not mc.size:
        out["paired"] = None
        return out
    level_b, level_c = level(mb, statistic), level(mc, statistic)
    out.update(median_baseline=level_b, median_candidate=level_c, ratio_of_medians=_ratio(level_c, level_b),
               difference=_difference(level_c, level_b))
    alternative = GREATER if rule.one_sided else TWO_SIDED
    if paired:
        out["p_value"], out["p_floor"] = stratified_rank_sum_test(
            [(cycle_values([c], statistic), cycle_values([b], statistic)) for b, c in zip(base, cand, strict=True)],
            alternative)
    else:
        out["p_value"], out["p_floor"] = rank_sum_test(mc, mb, alternative)
    # -1: every candidate cycle below every baseline cycle (ties count half).
    u = (rankdata(np.concatenate([mc, mb]))[: mc.size].sum() - mc.size * (mc.size + 1) / 2)
    out["rank_biserial"] = float(2 * u / (mb.size * mc.size) - 1)
    draws = effect_draws(base, cand, rule, statistic, paired)
    out["ci"] = None if draws is None else list(interval(draws, rule))
    out["detectable"] = detectable_change(draws, rule, EFFECT[statistic])
    return out


def decide(result: dict, p_adjusted: float | None, family: int, rule: VerdictRule,
           tested: bool = True, of: int | None = None, gated: str | None = None) -> tuple[str, str]:
    """The verdict of one comparison given its p-value (adjusted, for a secondary one) in a family of ``family`` tests
    (``tested`` False: left out of the family by ``tarone``, as its cycles or their ties could not reach the
    level; ``of``: the comparisons its family has, which the cycles needed are counted against; ``gated``:
    why it was not tested: its primary comparison was not significant, so only its interval speaks). An
    equivalent or inconclusive one says what it could have seen (``detectable_phrase``)."""
    verdict, why = _decide(result, p_adjusted, family, rule, tested, of, gated)
    if verdict in (EQUIVALENT, INCONCLUSIVE):
        why = f"{why}; {detectable_phrase(result, rule)}"
    return verdict, why


def _decide(result: dict, p_adjusted: float | None, family: int, rule: VerdictRule,
            tested: bool, of: int | None, gated: str | None) -> tuple[str, str]:
    nb, nc = result["n_baseline"], result["n_candidate"]
    level_needed = rule.alpha / max(family, 1)
    ci = result["ci"]
    low, high = rule.margin(result.get("effect", RATIO))
    inside = ci is not None and low <= ci[0] and ci[1] <= high
    significant = tested and p_adjusted is not None and p_adjusted < rule.alpha
    sides = 2 if rule.one_sided else 1  # one-sided, the smallest p is half the two-sided one
    if min_p_value(nb, nc) / sides >= level_needed:
        need = cycles_needed(sides * rule.alpha / max(of or family, 1))
        return NOT_ENOUGH, f"{nb}/{nc} cycles; at least {need} per side are needed to reach alpha {rule.alpha:g}"
    if inside and not significant:
        # Equivalence rests on the interval, not on the test: ties that keep p from the level do not stop it.
        return EQUIVALENT, "not significant, interval inside the margin"
    if gated:
        return INCONCLUSIVE, f"not tested: {gated}; the interval only"
    if rule.one_sided and ci is not None and ci[1] < low:
        # The data go the other way: whatever ties keep the upper tail from, the gate's question is answered.
        return INCONCLUSIVE, "candidate lower, not tested: a regression gate tests one side only"
    floor = result.get("p_floor") or 0
    if not tested or floor >= level_needed:
        return NOT_ENOUGH, (f"{nb}/{nc} cycles whose ties leave the smallest possible p at {floor:.2g}, which "
                            "cannot reach the level (left out of the family)")
    if not significant:
        return INCONCLUSIVE, "not significant, interval reaches past the margin" if ci else "not significant"
    if ci is None:
        return INCONCLUSIVE, "ratio undefined (baseline level zero or both endless)"
    if ci[1] < low:
        return IMPROVEMENT, "candidate lower"
    if ci[0] > high:
        return REGRESSION, "candidate higher"
    if inside:
        return EQUIVALENT, "effect within the margin"
    return INCONCLUSIVE, "significant, interval reaches past the margin"


# Completeness: what a faster candidate must not pay for it. Rates per message sent.
COMPLETENESS = {
    "lost": "messages lost (neither acked nor dead-lettered)",
    "never_received": "messages never received",
    "retries_never_redelivered": "retries never redelivered",
    "late": "messages acked only after the drain timeout (late, not lost)",
    "duplicated": "messages duplicated",
    "cross_topic": "messages delivered to another topic's group",
    "duplicate_deliveries": "duplicate deliveries",
    "errors": "client errors",
}
# Defects a candidate must not bring where the baseline had none: each is a regression whatever the speed.
LOSSES = ("lost", "never_received", "retries_never_redelivered", "duplicated", "cross_topic")


def completeness(base: dict, cand: dict) -> tuple[str | None, list[str]]:
    """Compare the two sides' ledgers ({sent, never_received, ...} counts). Returns (REGRESSION, why) when the
    candidate loses messages or retries the baseline did not lose at all, (INCONCLUSIVE, why) when it is worse
    on any count (it cannot then be an improvement), else (None, [])."""
    def rate(side: dict, key: str) -> float:
        return side.get(key, 0) / max(side.get("sent", 0), 1)

    worse = [f"{COMPLETENESS[k]} {cand.get(k, 0)} vs {base.get(k, 0)}" for k in COMPLETENESS
             if rate(cand, k) > rate(base, k)]
    lost = [f"{COMPLETENESS[k]} {cand.get(k, 0)} vs 0" for k in LOSSES if cand.get(k, 0) and not base.get(k, 0)]
    if lost:
        return REGRESSION, lost
    return (INCONCLUSIVE, worse) if worse else (None, [])


def overall(comparisons: Sequence[dict], blocked: dict[str, tuple[str | None, list[str]]]) -> str:
    """One word for the report: regression if anything regressed (a metric or completeness); improvement if
    the primary metric improved in every scenario and nothing blocks it; not enough data if a primary
    comparison lacked cycles; equivalent if every primary comparison was; else inconclusive."""
    primary = [c for c in comparisons if c["primary"]]
    if any(c["verdict"] == REGRESSION for c in comparisons) or any(v == REGRESSION for v, _ in blocked.values()):
        return REGRESSION
    if primary and all(c["verdict"] == IMPROVEMENT for c in primary):
        return IMPROVEMENT
    if any(c["verdict"] == NOT_ENOUGH for c in primary):
        return NOT_ENOUGH
    if primary and all(c["verdict"] == EQUIVALENT for c in primary) and not any(v for v, _ in blocked.values()):
        return EQUIVALENT
    return INCONCLUSIVE
