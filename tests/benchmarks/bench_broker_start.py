"""What starting a variant costs: for `unpatched` (the loopback agent only) and `patched` (and the wakeup fix's
agent), each started alone through the local backend, the wall time until it serves and each JVM's CPU-seconds at
that moment (user + system, from /proc), the median of RMQ_HARNESS_BENCH_STARTS starts (default 5).

Most of a short run's CPU is its JVMs' start (docs/layout.md, "How long `make test` takes"), so this is the figure
to watch for what the harness adds to it (its agents, its JVM options). Not a test: it records what this machine
did, into bench-results/broker-start.json (another path with RMQ_HARNESS_BENCH_OUT, to keep a commit's figures
beside another's). `python -m tests.benchmarks.bench_broker_start` (about 5 minutes).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from harness.core.paths import REPO_ROOT
from harness.deploy.local import LocalBackend
from harness.inputs.variants import Variant, load_variants

OUT = Path(os.environ.get("RMQ_HARNESS_BENCH_OUT", REPO_ROOT / "bench-results" / "broker-start.json"))
STARTS = int(os.environ.get("RMQ_HARNESS_BENCH_STARTS", "5"))
VARIANTS = ("unpatched", "patched")


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def start_once(variant: Variant) -> dict:
    """One start of the variant alone: seconds until it serves, and each process's CPU-seconds then."""
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), attached=True, log=lambda s: None)
        t = time.monotonic()
        backend.up([variant])
        ready = time.monotonic() - t
        (lv,) = backend._states()
        cpu = {role: _cpu_s(pid) for role, pid in lv.pids.items()}
        backend.down()
    return {"ready_s": ready, "cpu_s": cpu}


def main() -> int:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    out: dict = {"bench": "broker-start", "commit": commit, "starts": STARTS, "cpus": os.cpu_count(),
                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "variants": {}}
    variants = dict(load_variants())
    for i in range(STARTS):  # the variants in turn, so a slow minute of the machine hits both
        for name in VARIANTS:
            one = start_once(variants[name])
            runs = out["variants"].setdefault(name, {"ready_s": [], "cpu_s": {}})
            runs["ready_s"].append(round(one["ready_s"], 2))
            for role, cpu in one["cpu_s"].items():
                runs["cpu_s"].setdefault(role, []).append(round(cpu, 2))
            print(f"start {i + 1}/{STARTS} {name}: ready in {one['ready_s']:.1f} s, CPU-s "
                  + ", ".join(f"{r} {c:.1f}" for r, c in one["cpu_s"].items()), flush=True)
    for runs in out["variants"].values():
        runs["median"] = {"ready_s": round(statistics.median(runs["ready_s"]), 2),
                          **{role: round(statistics.median(v), 2) for role, v in runs["cpu_s"].items()}}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    for name, runs in out["variants"].items():
        print(f"{name}: median " + ", ".join(f"{k} {v}" for k, v in runs["median"].items()))
    print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
