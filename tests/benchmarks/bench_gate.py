"""The gate set as a pull request runs it (issue 31): `matrix --scenario gate` on three variants side by side,
the baseline `patched`, a real candidate (`patched-retry-read`) and a planted regression (`patched-slow`:
every pop wakeup 50 ms late), with --fail-on-regression.

Not a test: it records what this machine did into bench-results/gate-<time>.json (the wall time, the exit
code, each scenario's primary verdict and cycles per candidate) and says whether the issue's targets held:
no scenario ends "not enough data", the whole takes at most 25 minutes, and the planted regression exits 3.
Run by `make bench-gate` (about 20 minutes); `python -m tests.benchmarks.bench_gate --keep-brokers` runs each
scenario on the brokers of the one before where they start alike (harness.run.kept), and the JSON says so.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time

from harness.contracts.verdict import EXIT_REGRESSION, NOT_ENOUGH, REGRESSION
from harness.core.paths import REPO_ROOT

VARIANTS = ["patched", "patched-retry-read", "patched-slow"]
PLANTED = "patched-slow"
TARGET_S = 25 * 60


def main(args: list[str] | None = None) -> int:
    keep = "--keep-brokers" in (sys.argv[1:] if args is None else args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    runs, report = REPO_ROOT / "runs" / f"gate-{stamp}", REPO_ROOT / "reports" / f"gate-{stamp}"
    argv = [sys.executable, "-m", "harness.cli.main", "matrix", "--scenario", "gate", "--fail-on-regression",
            "--runs-dir", str(runs), "--out", str(report), *[x for v in VARIANTS for x in ("--variant", v)],
            *(["--keep-brokers"] if keep else [])]
    started = time.monotonic()
    code = subprocess.run(argv, cwd=REPO_ROOT, check=False).returncode
    wall = time.monotonic() - started
    summary = json.loads((report / "summary.json").read_text())
    cells = [{"scenario": x["scenario"], "candidate": cand, "metric": x["metric"], "verdict": x["verdict"],
              "cycles": [x["n_baseline"], x["n_candidate"]], "ratio": x["ratio_of_medians"],
              "difference": x["difference"], "ci": x["ci"], "p": x["p_adjusted"], "reason": x["reason"]}
             for cand, res in summary["against_baseline"].items() for x in res["comparisons"] if x["primary"]]
    targets = {
        "every scenario has a verdict other than not enough data": all(c["verdict"] != NOT_ENOUGH for c in cells),
        f"at most {TARGET_S // 60} minutes": wall <= TARGET_S,
        f"exit {EXIT_REGRESSION} with the planted regression among the variants": code == EXIT_REGRESSION,
        f"{PLANTED} a regression overall": summary["against_baseline"][PLANTED]["verdict"] == REGRESSION,
    }
    out = {"bench": "gate", "at": stamp, "variants": VARIANTS, "command": " ".join(argv[2:]), "keep_brokers": keep,
           "wall_s": round(wall, 1), "exit_code": code, "report": str(report.relative_to(REPO_ROOT)),
           "overall": {cand: res["verdict"] for cand, res in summary["against_baseline"].items()},
           "primary": cells, "targets": targets}
    path = REPO_ROOT / "bench-results" / f"gate-{stamp}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    for c in cells:
        print(f"{c['scenario']:24} {c['candidate']:20} {c['metric']:10} cycles {c['cycles'][0]}/{c['cycles'][1]:<4} "
              f"{c['verdict']}")
    print(f"wall {wall / 60:.1f} min, exit {code}; " + "; ".join(f"{k}: {'yes' if v else 'NO'}"
                                                              for k, v in targets.items()))
    print(f"written to {path.relative_to(REPO_ROOT)}")
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
