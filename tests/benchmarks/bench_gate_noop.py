"""A no-op change through the gate: each round of a gate calibration's A/A runs (the build beside its identical copy,
every scenario of the gate set once; harness.campaigns.calibrate) judged as a pull request's gate judges, `compare
--fail-on-regression`, and its exit code recorded. Not a test: it reads a calibration's archives from this machine
(`python -m tests.benchmarks.bench_gate_noop runs/calibration-gate`) and writes bench-results/gate-noop-<time>.json;
it says whether every round exited 0 (no false regression)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.core.paths import REPO_ROOT

BASE, COPY = "patched", "patched-copy"


def rounds(runs_dir: Path) -> list[list[Path]]:
    """The A/A archives (those with the copy), in time order, a round being one of each scenario in turn."""
    aa = [d for d in sorted(runs_dir.glob("2*"))
          if COPY in json.loads((d / "manifest.json").read_text()).get("variant_order", {}).get("names", [])]
    names = [json.loads((d / "manifest.json").read_text())["scenario"]["name"] for d in aa]
    per_round = len(set(names))
    out = [aa[i:i + per_round] for i in range(0, len(aa) - per_round + 1, per_round)]
    for r in out:  # a round holds each scenario once, or the calibration was cut short in a way this cannot pair
        if len({json.loads((d / "manifest.json").read_text())["scenario"]["name"] for d in r}) != per_round:
            raise SystemExit(f"round starting {r[0].name} does not hold each scenario once")
    return out


def main(runs_dir: str) -> int:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(rounds(Path(runs_dir)), 1):
            out = Path(tmp) / f"round-{i}"
            done = subprocess.run([sys.executable, "-m", "harness.cli.main", "compare", "--fail-on-regression",
                                   "--baseline", BASE, "--candidate", COPY, "--out", str(out), *map(str, r)],
                                  cwd=REPO_ROOT, capture_output=True, text=True)
            verdict = json.loads((out / "summary.json").read_text())["verdict"] if done.returncode in (0, 3) else None
            results.append({"round": i, "archives": [d.name for d in r], "exit_code": done.returncode,
                            "verdict": verdict})
            print(f"round {i}: exit {done.returncode}, {verdict}", flush=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    path = REPO_ROOT / "bench-results" / f"gate-noop-{stamp}.json"
    path.write_text(json.dumps({"bench": "gate-noop", "at": stamp, "runs_dir": runs_dir, "rounds": results,
                                "every_round_exit_0": all(x["exit_code"] == 0 for x in results)}, indent=2) + "\n")
    print(f"written to {path.relative_to(REPO_ROOT)}")
    return 0 if all(x["exit_code"] == 0 for x in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "runs/calibration-gate"))
