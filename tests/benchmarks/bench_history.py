"""How well `rmq-harness history` finds changes (spark/history.py: Apache Otava's E-divisive means), measured
on series built from real per-run levels: the calibration of November 2026 ran the patched 5.3.3 build 20
times beside an identical copy and beside itself plus 50 ms and plus 3 ms on every wakeup (the
pop-wakeup-delay agent), and recorded each run's level (median of its cycles' wakeup medians, ms).

- false alarms (A/A): series of N runs drawn from the 40 levels of the build and its copy: the share of
  series with any change point, and the share of runs added that would exit 3 (the newest run starting a
  regression), as CI adding one run at a time would see them;
- power: N - k runs of the build, then k runs of a shifted build (levels of the +50 ms or +3 ms runs): the
  share of series where the change point is found within one run of where it was planted, and the share
  where the first shifted run already exits 3.

Not a test: writes bench-results/history.json. `make bench` runs it.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import numpy as np

from harness.core.paths import REPO_ROOT
from spark import history

CALIBRATION = REPO_ROOT / "bench-results" / "calibration-20261123-060118.json"
OUT = REPO_ROOT / "bench-results" / "history.json"
SERIES = 400
LENGTHS = (20, 40)
TAILS = (1, 2, 3, 5)


def real_levels() -> dict[str, np.ndarray]:
    doc = json.loads(CALIBRATION.read_text())
    shifts = {s["delay_ms"]: s for s in doc["shifts"]}
    base = np.array([lv[0] for lv in shifts[50]["levels_ms"]])
    copy = base * np.array(doc["aa"]["ratios"])  # the copy's level: the base's times the A/A ratio of its run
    return {"build": np.concatenate([base, copy]),
            "+50 ms": np.array([lv[1] for lv in shifts[50]["levels_ms"]]),
            "+3 ms": np.array([lv[1] for lv in shifts[3]["levels_ms"]])}


def rate(k: int, n: int) -> dict:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(0.95)
    return {"k": k, "n": n, "rate": k / n, "ci95": [round(ci.low, 4), round(ci.high, 4)]}


def false_alarms(levels: np.ndarray, n: int, rng: np.random.Generator) -> dict:
    any_cp = 0
    exits, added = 0, 0
    for _ in range(SERIES):
        s = list(rng.choice(levels, n))
        any_cp += bool(history.change_points(s))
        # CI adds the last 5 runs one at a time: does any of them exit 3?
        for m in range(n - 4, n + 1):
            added += 1
            exits += history.newest_starts_regression(s[:m]) is not None
    return {"series_with_a_change_point": rate(any_cp, SERIES), "runs_exiting_3": rate(exits, added)}


def power(levels: np.ndarray, shifted: np.ndarray, n: int, k: int, rng: np.random.Generator) -> dict:
    found = flagged = 0
    for _ in range(SERIES):
        s = list(rng.choice(levels, n - k)) + list(rng.choice(shifted, k))
        found += any(abs(c.index - (n - k)) <= 1 and c.direction == "regression" for c in history.change_points(s))
        flagged += history.newest_starts_regression(s[:n - k + 1]) is not None
    return {"change_point_found": rate(found, SERIES), "first_shifted_run_exits_3": rate(flagged, SERIES)}


def main() -> None:
    rng = np.random.default_rng(20261124)
    lv = real_levels()
    started = time.monotonic()
    out: dict = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(), "source": str(CALIBRATION.relative_to(REPO_ROOT)),
        "method": {"window": history.WINDOW, "max_pvalue": history.MAX_PVALUE},
        "unit": "a run: its level, the median of its cycles' wakeup medians (ms); series drawn with replacement",
        "levels_ms": {k: {"n": int(v.size), "median": float(np.median(v)), "min": float(v.min()),
                          "max": float(v.max())} for k, v in lv.items()},
        "series_per_case": SERIES, "false_alarms": {}, "power": {},
    }
    for n in LENGTHS:
        out["false_alarms"][str(n)] = false_alarms(lv["build"], n, rng)
        for shift in ("+50 ms", "+3 ms"):
            for k in TAILS:
                out["power"][f"{shift}, {n} runs, last {k} shifted"] = power(lv["build"], lv[shift], n, k, rng)
    out["wall_s"] = round(time.monotonic() - started, 1)
    OUT.parent.mkdir(exist_ok=True)
    tmp = OUT.with_name(f".{OUT.name}.tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(OUT)
    print(json.dumps({"false_alarms": out["false_alarms"],
                      "power": {k: {m: r["rate"] for m, r in v.items()} for k, v in out["power"].items()}},
                     indent=1))
    print(f"wrote {OUT} in {out['wall_s']} s")


if __name__ == "__main__":
    main()
