"""One side of a comparison as the hierarchical bootstrap draws it (runs, then cycles, then values), at a cost
per cycle whatever the cycles hold. Pure numpy; spark.stats draws its intervals with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import bdtr, bdtrc, gammaln

from harness.contracts.verdict import AGGREGATE, MEDIAN

Runs = Sequence[Sequence[np.ndarray]]  # runs -> cycles -> values
# Cycles drawn at a time (a block of draws, ``BootstrapSide.block``): 2M values of 8 bytes in each of a few arrays.
BLOCK_CYCLES = 65_536


@dataclass(frozen=True)
class MedianTable:
    """How a cycle of n sorted values resamples to a median, as an alias table (Walker; Vose's construction):
    the place K (0-based) of the resample's lower middle order statistic (the (m+1)-th of n = 2m + 1, the m-th
    of n = 2m), drawn in constant time from one uniform; for an even n, ``move[K]``, the chance that the upper
    middle one lies above it.

    P(K < k) is the chance that j or more of n picks fall among the k smallest values, P(Binomial(n, k/n) >= j),
    j the middle order statistic's rank. For n = 2m the upper middle one is above place k exactly when the k+1
    smallest values hold m picks and the k smallest fewer: P(Binomial(n, (k+1)/n) = m) (1 - (k/(k+1))^m), over
    P(K = k); then the other n - m picks are uniform over the n - k - 1 values above it and the upper middle is
    the least of them, k + ceil((n - k - 1) W) with W the least of n - m uniforms."""

    prob: np.ndarray
    alias: np.ndarray
    move: np.ndarray  # zeros for an odd n

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(n: int) -> MedianTable:
        m = n // 2
        j = m + 1 if n % 2 else m
        share = np.arange(n + 1) / n
        # (scipy.special's binomial tails: scipy.stats.binom's methods cost a millisecond a call in checks alone.)
        below = bdtrc(j - 1, n, share)  # P(K < k): the smaller of it and its complement is differenced
        above = bdtr(j - 1, n, share)
        p = np.clip(np.where(below[1:] < 0.5, below[1:] - below[:-1], above[:-1] - above[1:]), 0, None)
        p /= p.sum()
        prob, alias = np.ones(n), np.arange(n, dtype=np.int64)
        scaled = (p * n).tolist()
        small = [i for i in range(n) if scaled[i] < 1]
        large = [i for i in range(n) if scaled[i] >= 1]
        while small and large:
            lo, hi = small.pop(), large.pop()
            prob[lo], alias[lo] = scaled[lo], hi
            scaled[hi] += scaled[lo] - 1
            (small if scaled[hi] < 1 else large).append(hi)
        move = np.zeros(n)
        if n % 2 == 0:
            k = np.arange(1, n + 1)
            with np.errstate(divide="ignore", invalid="ignore"):  # log1p(-1) at k = 1: -inf, and (0/1)^m = 0
                at_m = np.exp(gammaln(n + 1) - gammaln(m + 1) - gammaln(n - m + 1) + m * np.log(k / n)
                              + (n - m) * np.log1p(-k / n))  # P(Binomial(n, k/n) = m)
                both = at_m * -np.expm1(m * np.log1p(-1 / k))
                move = np.where(p > 0, np.minimum(both / np.where(p > 0, p, 1.0), 1.0), 0.0)
        return MedianTable(prob, alias, move)


def row_medians(rows: np.ndarray) -> np.ndarray:
    """np.median(rows, axis=1), the same values, by one partition: the lower middle of an even row is the
    largest of the values before the upper middle. (np.median partitions at both middles, then checks for NaN:
    30 ns a value here, against 4.4 for this.)"""
    half = rows.shape[1] // 2
    part = np.partition(rows, half, axis=1)
    if rows.shape[1] % 2:
        return part[:, half].copy()
    return (part[:, :half].max(axis=1) + part[:, half]) / 2


class BootstrapSide:
    """One side's runs of cycles, laid out once for the hierarchical bootstrap: every cycle's values sorted, end to
    end, where each cycle starts and how long it is, each run's first cycle and how many it has.

    A draw resamples runs, then cycles within each, then values within each cycle, each with replacement, and
    takes each cycle's statistic, then the side's of those. The last level is drawn without drawing the values:
    of a cycle's n values resampled n times, the mean of 0s and 1s is Binomial(n, share) / n, and the median's
    place among the sorted values comes from the alias table of its distribution (``MedianTable``, one per size
    n, made once: exact, from one uniform, and for an even n a second for the upper middle value). So a draw
    costs a few array operations per cycle, whatever the cycles hold: the per-cycle loop it replaced took 2,000
    x 300 numpy calls (87 s of 131) to compare a 50,000-event run of 480 cycles, and the order statistics' Beta
    draw that came next cost 69-170 ns a drawn cycle by itself. Draws are taken a block at a time (``draws``:
    every drawn cycle of the block's draws end to end, about BLOCK_CYCLES of them, so memory stays flat);
    spark.comparison spreads a large comparison's bootstraps over Spark's tasks."""

    def __init__(self, runs: Runs) -> None:
        cycles = [np.sort(np.asarray(c, dtype=float)) for run in runs for c in run]
        # Callers drop empty cycles and runs; a draw from an empty cycle would read its neighbour's values.
        if any(c.size == 0 or np.isnan(c).any() for c in cycles) or any(len(run) == 0 for run in runs):
            raise ValueError("a bootstrap side with an empty run or cycle, or a NaN value")
        self.values = np.concatenate(cycles) if cycles else np.zeros(0)
        self.sizes = np.array([c.size for c in cycles], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.shares = np.array([c.mean() if c.size else 0.0 for c in cycles])
        self.run_cycles = np.array([len(run) for run in runs], dtype=np.int64)
        self.run_start = np.concatenate([[0], np.cumsum(self.run_cycles)[:-1]]).astype(np.int64)
        # Every size's MedianTable end to end, and where each cycle's starts.
        sizes = np.unique(self.sizes)
        made = [MedianTable.of(int(n)) for n in sizes]
        self.prob = np.concatenate([t.prob for t in made]) if made else np.zeros(0)
        self.alias = np.concatenate([t.alias for t in made]) if made else np.zeros(0, np.int64)
        self.move = np.concatenate([t.move for t in made]) if made else np.zeros(0)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.table_at = starts[np.searchsorted(sizes, self.sizes)] if sizes.size else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return self.run_cycles.size

    def draw_runs(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """The runs of ``count`` draws (a row each), with replacement: what a paired comparison draws once for
        both of its sides."""
        return rng.integers(0, len(self), (count, len(self)))

    def block(self) -> int:
        """How many draws ``draws`` takes at a time: about BLOCK_CYCLES cycles drawn, so memory stays flat
        however many cycles the side has."""
        return max(1, BLOCK_CYCLES // max(1, int(self.run_cycles.sum())))

    def draws(self, rng: np.random.Generator, count: int, statistic: str = MEDIAN,
              drawn: np.ndarray | None = None) -> np.ndarray:
        """``count`` draws of the side's level at once (``drawn``: their runs, a row a draw, drawn for both sides
        of a paired comparison), in blocks of ``block()`` draws."""
        runs_all = self.draw_runs(rng, count) if drawn is None else np.asarray(drawn)
        step = self.block()
        return np.concatenate([self._levels(rng, runs_all[i:i + step], statistic)
                               for i in range(0, count, step)]) if count else np.zeros(0)

    def draw(self, rng: np.random.Generator, statistic: str = MEDIAN, drawn: np.ndarray | None = None) -> float:
        """One draw of the side's level (``drawn``: its runs)."""
        return float(self.draws(rng, 1, statistic, None if drawn is None else np.asarray(drawn)[None, :])[0])

    def _levels(self, rng: np.random.Generator, runs: np.ndarray, statistic: str) -> np.ndarray:
        """The levels of the draws whose runs are ``runs`` (a row a draw): every drawn cycle's statistic end to
        end, then each draw's median or mean of its own."""
        counts = self.run_cycles[runs].ravel()
        per_draw = self.run_cycles[runs].sum(axis=1)
        # (A bound per value costs four times one bound for all: 42 against 11 ns a value here.)
        alike = (self.run_cycles == self.run_cycles[0]).all()
        picks = rng.integers(0, counts[0], counts.sum()) if alike else rng.integers(0, np.repeat(counts, counts))
        cycles = np.repeat(self.run_start[runs].ravel(), counts) + picks
        n = self.sizes[cycles]
        if AGGREGATE[statistic] == "mean":  # a share: each cycle's mean of 0s and 1s
            share = self.shares[cycles]
            stats = share.copy()
            # A cycle of all 0s or all 1s resamples to itself: only the others are drawn (a binomial of an array
            # costs about 130 ns a value here, and most cycles of a stall or loss share are all 0s).
            mixed = (share > 0) & (share < 1)
            stats[mixed] = rng.binomial(n[mixed], share[mixed]) / n[mixed]
        else:
            # The lower middle value's place (its cycle's alias table: one uniform, its whole part the column,
            # its fraction the coin), then for an even size the upper middle one's, above it or the same.
            at = self.table_at[cycles]
            u = rng.random(cycles.size) * n
            col = np.minimum(u.astype(np.int64), n - 1)
            low = np.where(u - col < self.prob[at + col], col, self.alias[at + col])
            first = self.offsets[cycles]
            stats = self.values[first + low]
            even = np.flatnonzero(n % 2 == 0)
            if even.size:
                up = even[rng.random(even.size) < self.move[at[even] + low[even]]]
                if up.size:
                    k, size = low[up], n[up]
                    # The least of n - m uniforms: 1 - V^(1/(n - m)), V uniform.
                    least = -np.expm1(np.log(rng.random(up.size)) / (size - size // 2))
                    high = np.minimum(k + np.ceil((size - k - 1) * least).astype(np.int64), size - 1)
                    stats[up] = (stats[up] + self.values[first[up] + high]) / 2
        which = np.repeat(np.arange(runs.shape[0]), per_draw)
        if AGGREGATE[statistic] == "mean":
            return np.bincount(which, stats, runs.shape[0]) / per_draw
        if (per_draw == per_draw[0]).all():  # every draw as many cycles (one run; runs alike): a row each
            return row_medians(stats.reshape(runs.shape[0], per_draw[0]))
        # Each draw's median: its cycles' statistics sorted within the draw, the middle one (or the mean of the
        # middle two). Every draw has a cycle at least (the caller drops empty runs).
        ordered = stats[np.lexsort((stats, which))]
        first = np.concatenate([[0], np.cumsum(per_draw)[:-1]])
        low, high = first + (per_draw - 1) // 2, first + per_draw // 2
        with np.errstate(invalid="ignore"):  # inf - inf cannot happen: (inf + inf) / 2 is inf
            return (ordered[low] + ordered[high]) / 2
