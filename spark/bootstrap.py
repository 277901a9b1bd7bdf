"""One side of a comparison as the hierarchical bootstrap draws it (runs, then cycles, then values), at a cost
per cycle whatever the cycles hold. Pure numpy; spark.stats draws its intervals with it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.contracts.verdict import AGGREGATE, MEDIAN

Runs = Sequence[Sequence[np.ndarray]]  # runs -> cycles -> values
# Cycles drawn at a time (a block of draws, ``BootstrapSide.block``): 2M values of 8 bytes in each of a few arrays.
BLOCK_CYCLES = 65_536


class BootstrapSide:
    """One side's runs of cycles, laid out once for the hierarchical bootstrap: every cycle's values sorted, end to
    end, where each cycle starts and how long it is, each run's first cycle and how many it has.

    A draw resamples runs, then cycles within each, then values within each cycle, each with replacement, and
    takes each cycle's statistic, then the side's of those. The last level is drawn without drawing the values:
    of a cycle's n values resampled n times, the mean of 0s and 1s is Binomial(n, share) / n, and the picks' order
    statistics are those of n uniforms, U(j) ~ Beta(j, n - j + 1), the pick ceil(n U(j)) of the sorted values. The
    median is the (m+1)-th of n = 2m + 1, or the mean of the m-th and (m+1)-th of n = 2m, where given U(m) = u,
    U(m+1) = u + (1 - u) Beta(1, n - m) (the least of the n - m uniforms above u). So a draw costs a few array
    operations per cycle, whatever the cycles hold: the per-cycle loop it replaced took 2,000 x 300 numpy calls
    (87 s of 131) to compare a 50,000-event run of 480 cycles. Draws are taken a block at a time (``draws``:
    every drawn cycle of the block's draws end to end, about BLOCK_CYCLES of them, so memory stays flat); what
    remains is about 180 ns a drawn cycle, most of it the Beta draw (measured: 2,000 draws of a side of 16,000
    cycles, 6 s), which is why spark.comparison spreads a large comparison's bootstraps over Spark's tasks."""

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

    def __len__(self) -> int:
        return self.run_cycles.size

    def _pick(self, cycles: np.ndarray, n: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The value at uniform order statistic ``u`` of each cycle's resample: its sorted values' ceil(n u)-th."""
        k = np.clip(np.ceil(n * u).astype(np.int64), 1, n)
        return self.values[self.offsets[cycles] + k - 1]

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
        cycles = np.repeat(self.run_start[runs].ravel(), counts) + rng.integers(0, np.repeat(counts, counts))
        n = self.sizes[cycles]
        if AGGREGATE[statistic] == "mean":  # a share: each cycle's mean of 0s and 1s
            share = self.shares[cycles]
            stats = share.copy()
            # A cycle of all 0s or all 1s resamples to itself: only the others are drawn (a binomial of an array
            # costs about 130 ns a value here, and most cycles of a stall or loss share are all 0s).
            mixed = (share > 0) & (share < 1)
            stats[mixed] = rng.binomial(n[mixed], share[mixed]) / n[mixed]
        else:
            m = n // 2
            odd = n % 2 == 1
            # Odd: U(m+1) ~ Beta(m + 1, m + 1). Even: U(m) ~ Beta(m, m + 1), then U(m+1) above it, by Beta(1, b)'s
            # inverse CDF, 1 - V^(1/b) for V uniform: exact, and a fraction of a Beta draw's cost.
            lower = rng.beta(np.where(odd, m + 1, np.maximum(m, 1)), m + 1)
            stats = self._pick(cycles, n, lower)
            even = ~odd
            if even.any():
                u, b = lower[even], np.maximum(n[even] - m[even], 1)
                upper = u + (1 - u) * -np.expm1(np.log(rng.random(b.size)) / b)
                stats[even] = (stats[even] + self._pick(cycles[even], n[even], upper)) / 2
        which = np.repeat(np.arange(runs.shape[0]), per_draw)
        if AGGREGATE[statistic] == "mean":
            return np.bincount(which, stats, runs.shape[0]) / per_draw
        if (per_draw == per_draw[0]).all():  # every draw as many cycles (one run; runs alike): a row each
            return np.median(stats.reshape(runs.shape[0], per_draw[0]), axis=1)
        # Each draw's median: its cycles' statistics sorted within the draw, the middle one (or the mean of the
        # middle two). Every draw has a cycle at least (the caller drops empty runs).
        ordered = stats[np.lexsort((stats, which))]
        first = np.concatenate([[0], np.cumsum(per_draw)[:-1]])
        low, high = first + (per_draw - 1) // 2, first + per_draw // 2
        with np.errstate(invalid="ignore"):  # inf - inf cannot happen: (inf + inf) / 2 is inf
            return (ordered[low] + ordered[high]) / 2
