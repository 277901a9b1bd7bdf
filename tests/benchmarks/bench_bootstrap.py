"""What the comparison's bootstrap costs per drawn cycle (spark.bootstrap.BootstrapSide.draws): one side of one run
of 60,000 cycles (about what each side of a 10M-event real-shape comparison has), each of 1 to 63 values, 200 draws,
the best of three; for the median and for a share. Pure numpy: run it on a quiet machine.

Not a test: it writes bench-results/bootstrap.json (another path with RMQ_HARNESS_BENCH_OUT, to keep a commit's
figures beside another's). `python -m tests.benchmarks.bench_bootstrap` (under a minute).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from harness.core.paths import REPO_ROOT
from spark.bootstrap import BootstrapSide

OUT = Path(os.environ.get("RMQ_HARNESS_BENCH_OUT", REPO_ROOT / "bench-results" / "bootstrap.json"))
CYCLES, DRAWS, TRIES = 60_000, 200, 3


def main() -> int:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 64, CYCLES)
    runs = {"median": [[rng.lognormal(3, 1, n) for n in sizes]],
            "share": [[(rng.random(n) < 0.1).astype(float) for n in sizes]]}
    out: dict = {"bench": "bootstrap", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cycles": CYCLES,
                 "draws": DRAWS, "ns_per_drawn_cycle": {}, "side_s": {}}
    for statistic, side_runs in runs.items():
        t = time.perf_counter()
        side = BootstrapSide(side_runs)
        out["side_s"][statistic] = round(time.perf_counter() - t, 2)
        best = min(_timed(side, statistic, seed) for seed in range(TRIES))
        out["ns_per_drawn_cycle"][statistic] = round(best / (DRAWS * CYCLES) * 1e9, 1)
        print(f"{statistic:7} {out['ns_per_drawn_cycle'][statistic]:6.1f} ns a drawn cycle "
              f"(the side laid out in {out['side_s'][statistic]} s)")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {OUT}")
    return 0


def _timed(side: BootstrapSide, statistic: str, seed: int) -> float:
    t = time.perf_counter()
    side.draws(np.random.default_rng(seed), DRAWS, statistic)
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
