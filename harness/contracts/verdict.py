"""The verdict rule as a contract: its words, its exit code, its options and the level of a cycle. The run's
terminal, the analysis (spark/stats.py applies the rule), the report and CI all read them from here.

A level is how values become one figure: a cycle's level from its retries' values, a side's from its cycles'
levels. Latencies take the median; shares (0 or 1 per retry, such as the retries that stalled) the mean, as
their median says only "most" or "few".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from harness.core.errors import ConfigError

IMPROVEMENT, REGRESSION, NOT_ENOUGH = "improvement", "regression", "not enough data"
# Neither better nor worse, told apart: the interval lies inside the margin (the builds are the same to within
# it), or it reaches past it (the data cannot say; more cycles might). Summaries before schema 7 said
# "no change" for both.
EQUIVALENT, INCONCLUSIVE = "equivalent", "inconclusive"
VERDICTS = (IMPROVEMENT, REGRESSION, EQUIVALENT, INCONCLUSIVE, NOT_ENOUGH)
# A verdict that says the two builds differ: what an A/A calibration counts as false, what bisect follows.
CHANGED = (IMPROVEMENT, REGRESSION)
# The exit code of a command asked to gate (--fail-on-regression, history) when the candidate regressed.
EXIT_REGRESSION = 3


def add_gate_option(parser: argparse.ArgumentParser, what: str = "the candidate regresses") -> None:
    """--fail-on-regression, the same on every command that ends in a verdict (compare, run, matrix, ...)."""
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {EXIT_REGRESSION} when {what} (a CI gate)")


def gate_exit(args: argparse.Namespace, verdicts: Iterable[str]) -> int:
    """The exit code of a command given its verdicts: EXIT_REGRESSION when asked to gate and one regressed."""
    return EXIT_REGRESSION if getattr(args, "fail_on_regression", False) and REGRESSION in set(verdicts) else 0


MEDIAN, SHARE = "median", "share"
# What a comparison can judge, and how: latencies (ms) by medians; stalls (harness.measure.latency.stalled: 1
# for a retry that waited for a poll to run out, else 0) and losses (harness.measure.ledger: 1 for an owed
# (message, group) pair whose class is lost, else 0) by shares.
STATISTIC = {"wakeup_ms": MEDIAN, "redelivery_ms": MEDIAN, "stalled": SHARE, "lost": SHARE}
# Compared in every scenario; a scenario's own verdict metric (Scenario.verdict_metric) joins them.
COMPARED = ("wakeup_ms", "redelivery_ms")
# The aggregate of a statistic, by its name in numpy and in pandas alike.
AGGREGATE = {MEDIAN: "median", SHARE: "mean"}
# How a comparison states its effect, by statistic: candidate / baseline for levels, candidate - baseline for
# shares (a zero-stall baseline has no ratio).
RATIO, DIFFERENCE = "ratio", "difference"
EFFECT = {MEDIAN: RATIO, SHARE: DIFFERENCE}


def level(values: Sequence[float] | np.ndarray, statistic: str = MEDIAN) -> float:
    """THE level of a set of values (a cycle's retries, a side's cycles): their median, or their mean for a
    share; nan when there are none."""
    arr = np.asarray(values, dtype=float)
    return float(getattr(np, AGGREGATE[statistic])(arr)) if arr.size else float("nan")


# The rule's defaults.
ALPHA, MIN_EFFECT, BOOTSTRAP, SEED = 0.05, 0.10, 2000, 20251110
# A share (of retries that stalled) changes by a difference, not a ratio: a zero-stall baseline has no ratio.
SHARE_MARGIN = 0.05
# The power at which an "equivalent" or "inconclusive" verdict states the smallest change its cycles could have
# told (spark.power.detectable_change): the convention of sample-size planning.
POWER = 0.80



# The verdict's samples: rows of (scenario, variant, run_id, cycle, metric, value), a row standing for SAMPLE_COUNT
# equal values (one when the column is absent): a cycle's values are its rows' values, each repeated its count, in
# the rows' order. A share's 0s and 1s and the endless wakeups of retries never redelivered come as a row per cycle
# and value, not a row per message: a comparison's driver held a row for every retry and owed message before
# (1.3 GB at 10M events, docs/benchmarks.md).
SAMPLE_COUNT = "count"


def sample_counts(samples: Any) -> np.ndarray:
    """How many values each row of ``samples`` stands for."""
    if SAMPLE_COUNT in samples.columns:
        return samples[SAMPLE_COUNT].to_numpy(dtype=np.int64)
    return np.ones(len(samples), dtype=np.int64)


def per_value(samples: Any) -> Any:
    """``samples`` a row a value (SAMPLE_COUNT's rows repeated), without the count: for what is small (one
    metric's latencies, whose repeated rows are the few never redelivered)."""
    if SAMPLE_COUNT not in samples.columns:
        return samples
    n = sample_counts(samples)
    out = samples if (n == 1).all() else samples.iloc[np.repeat(np.arange(len(samples)), n)]
    return out.drop(columns=SAMPLE_COUNT).reset_index(drop=True)


def group_levels(groups: Any, statistic: str | Callable[[Any], Sequence[str]]) -> Any:
    """THE level of each group of a pandas SeriesGroupBy, as ``level`` computes it for one: ``statistic`` is
    the statistic of every group, or a function from the groups' index to each group's."""
    import pandas as pd

    both = groups.agg(sorted(set(AGGREGATE.values())))
    stats = [statistic] * len(both) if isinstance(statistic, str) else list(statistic(both.index))
    at = both.columns.get_indexer([AGGREGATE[s] for s in stats])
    return pd.Series(both.to_numpy()[np.arange(len(both)), at], index=both.index, name="level", dtype=float)


@dataclass(frozen=True)
class VerdictRule:
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    bootstrap: int = BOOTSTRAP
    seed: int = SEED
    share_margin: float = SHARE_MARGIN
    # A regression gate asks one question, "is the candidate worse?": each test one-sided at alpha and the
    # interval the 1 - 2 alpha one (its lower end the one-sided bound; inside the margin it is TOST's
    # equivalence); improvements are then not claimed.
    one_sided: bool = False

    def __post_init__(self) -> None:
        if self.one_sided and not 0 < self.alpha < 0.5:
            raise ConfigError(f"--alpha {self.alpha:g} with --one-sided: below 0.5 (the interval is 1 - 2 alpha)")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"--alpha {self.alpha:g}: a significance level above 0 and below 1 "
                              f"(default {ALPHA:g})")
        if not 0 <= self.min_effect < 1:
            raise ConfigError(f"--min-effect {self.min_effect:g}: a relative change from 0 to below 1 "
                              f"(default {MIN_EFFECT:g})")
        if self.bootstrap < 1:
            raise ConfigError(f"--bootstrap {self.bootstrap}: at least one resample (default {BOOTSTRAP})")
        if not 0 <= self.share_margin < 1:
            raise ConfigError(f"--min-share-change {self.share_margin:g}: a difference of shares from 0 to below 1 "
                              f"(default {SHARE_MARGIN:g})")

    @property
    def level(self) -> float:
        """The interval's coverage: 1 - alpha, or 1 - 2 alpha when one-sided."""
        return 1 - 2 * self.tail

    @property
    def tail(self) -> float:
        """The share of bootstrap draws left out below the interval (and above it)."""
        return self.alpha if self.one_sided else self.alpha / 2

    def margin(self, effect: str) -> tuple[float, float]:
        """(low, high): an effect wholly below low is an improvement, wholly above high a regression, wholly
        between them equivalent. Ratios: symmetric on the log scale (1/1.1 and 1.1: faster by the factor
        slower is); differences of shares: -share_margin and +share_margin."""
        if effect == DIFFERENCE:
            return -self.share_margin, self.share_margin
        return 1 / (1 + self.min_effect), 1 + self.min_effect

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VerdictRule:
        """The rule from the options ``add_rule_options`` added (checked: a bad one is a ConfigError)."""
        return cls(alpha=args.alpha, min_effect=args.min_effect, bootstrap=args.bootstrap,
                   share_margin=getattr(args, "min_share_change", SHARE_MARGIN),
                   one_sided=bool(getattr(args, "one_sided", False) or getattr(args, "fail_on_regression", False)))

    def as_args(self) -> list[str]:
        """The options that give this rule again (``add_rule_options``'s), for a command run elsewhere."""
        return ["--alpha", repr(self.alpha), "--min-effect", repr(self.min_effect), "--bootstrap", str(self.bootstrap),
                "--min-share-change", repr(self.share_margin), *(["--one-sided"] if self.one_sided else [])]

    def describe(self) -> str:
        low, high = self.margin(RATIO)
        sided = ("one-sided: is the candidate higher? (a regression gate; improvements are not claimed)"
                 if self.one_sided else "two-sided")
        bounds = (f"entirely above {high:.3g} (regression)" if self.one_sided else
                  f"entirely below {low:.3g} (improvement) or above {high:.3g} (regression)")
        return (f"unit: the cycle. Mann-Whitney U ({sided}, exact also with ties) on per-cycle medians (shares "
                f"for stalls); per scenario the primary comparison at p < {self.alpha:g}, the secondary ones "
                "(Holm-adjusted among those whose cycles could reach the level: Tarone) only once the primary was "
                f"significant; and the {self.level:.0%} hierarchical bootstrap interval (runs, cycles, retries) of "
                f"the ratio of median cycle medians (candidate/baseline) {bounds}; for stall shares the difference "
                f"of mean shares beyond -{self.share_margin:g} or +{self.share_margin:g}; equivalent when the "
                "interval lies inside those bounds, otherwise inconclusive; a retry never redelivered counts as an "
                "endless wait; not enough data when too few cycles (or too many ties) could reach the level")

    def as_dict(self) -> dict:
        return {**asdict(self), "text": self.describe()}


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """The rule's options, the same on every command that judges (compare, matrix, sweep, calibrate)."""
    parser.add_argument("--alpha", type=float, default=ALPHA,
                        help=f"family-wise significance level; the interval is at 1 - alpha, 1 - 2 alpha one-sided "
                             f"(default {ALPHA:g})")
    parser.add_argument("--min-effect", type=float, default=MIN_EFFECT,
                        help=f"relative change of the level that counts (default {MIN_EFFECT:g} = "
                             f"{MIN_EFFECT * 100:.0f}%%)")
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP,
                        help=f"bootstrap resamples (default {BOOTSTRAP})")
    parser.add_argument("--one-sided", action="store_true",
                        help="test for regressions only, one-sided at alpha with the 1 - 2 alpha interval (a "
                             "regression gate; --fail-on-regression implies it)")
    parser.add_argument("--min-share-change", type=float, default=SHARE_MARGIN,
                        help=f"change of a share (stalled retries) that counts, as a difference (default "
                             f"{SHARE_MARGIN:g} = {SHARE_MARGIN * 100:.0f} points)")
