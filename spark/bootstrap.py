"""One side of a comparison as the hierarchical bootstrap draws it (runs, then cycles, then values), at a cost
per cycle whatever the cycles hold. Pure numpy; spark.stats draws its intervals with it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.contracts.verdict import AGGREGATE, MEDIAN

Runs = Sequence[Sequence[np.ndarray]]  # runs -> cycles -> values


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
    (87 s of 131) to compare a 50,000-event run of 480 cycles."""

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

    def draw(self, rng: np.random.Generator, statistic: str = MEDIAN, drawn: np.ndarray | None = None) -> float:
        """One draw of the side's level (``drawn``: these runs, drawn for both sides of a paired comparison)."""
        runs = rng.integers(0, len(self), len(self)) if drawn is None else np.asarray(drawn)
        counts = self.run_cycles[runs]
        cycles = np.repeat(self.run_start[runs], counts) + rng.integers(0, np.repeat(counts, counts))
        n = self.sizes[cycles]
        if AGGREGATE[statistic] == "mean":  # a share: each cycle's mean of 0s and 1s
            stats = rng.binomial(n, self.shares[cycles]) / n
        else:
            m = n // 2
            odd = n % 2 == 1
            # Odd: U(m+1) ~ Beta(m + 1, m + 1). Even: U(m) ~ Beta(m, m + 1), then U(m+1) above it.
            lower = rng.beta(np.where(odd, m + 1, np.maximum(m, 1)), m + 1)
            upper = np.where(odd, lower, lower + (1 - lower) * rng.beta(1, np.maximum(n - m, 1)))
            stats = np.where(odd, self._pick(cycles, n, lower),
                             (self._pick(cycles, n, lower) + self._pick(cycles, n, upper)) / 2)
        return float(getattr(np, AGGREGATE[statistic])(stats))
