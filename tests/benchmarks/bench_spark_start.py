"""What Spark's start costs with the JVM options of spark.jvm and without: a local[2] session and its first job
(spark.jvm.TRAIN's work), in a fresh process each, as Spark starts by default, with C1 only, and with C1 and the
class archive; then the committed golden comparison (`spark.jobs.compare`) with the harness's options. Wall time
and the machine's busy CPU-seconds over each (read from /proc/stat: run it on a quiet machine).

Not a test: it writes bench-results/spark-start.json. `python -m tests.benchmarks.bench_spark_start` (about two
minutes; RMQ_HARNESS_BENCH_START_RUNS runs of each, default 3, the median kept).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.paths import REPO_ROOT
from spark import jvm
from tests.benchmarks import write_result

RUNS = int(os.environ.get("RMQ_HARNESS_BENCH_START_RUNS", "3"))
OUT = REPO_ROOT / "bench-results" / "spark-start.json"
QUIET = " ".join(jvm.QUIET)
CASES = {"as Spark starts by default": "-Drmq.harness.bench=default",  # (a property: the JVM as without options)
         "C1 only": jvm.JIT,
         "C1 and the class archive": f"{jvm.JIT} -XX:SharedArchiveFile={jvm.archive()} {QUIET}"}


def _busy_cpu_s() -> float:
    """Seconds of CPU the machine spent busy since boot (all cores; /proc/stat's user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _, _, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _timed(argv: list[str]) -> dict:
    cpu, t = _busy_cpu_s(), time.monotonic()
    got = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if got.returncode:
        raise SystemExit(f"{' '.join(argv[:4])} exited {got.returncode}: {got.stderr[-2000:]}")
    return {"wall_s": round(time.monotonic() - t, 1), "busy_cpu_s": round(_busy_cpu_s() - cpu, 1)}


def _median(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "busy_cpu_s")} | {"runs": runs}


def main() -> int:
    if not jvm.archive().is_file():
        raise SystemExit("no class archive: build it first (`python -m spark.jvm`, or `make setup`)")
    out: dict = {"bench": "spark-start", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": RUNS,
                 "session_and_first_job": {}}
    for name, options in CASES.items():
        runs = [_timed([sys.executable, "-c", jvm.TRAIN, options]) for _ in range(RUNS)]
        out["session_and_first_job"][name] = _median(runs)
        time.sleep(3)  # the last JVM's exit
        print(f"{name:28} {out['session_and_first_job'][name]['wall_s']:6.1f} s "
              f"{out['session_and_first_job'][name]['busy_cpu_s']:6.1f} CPU-s", flush=True)
    golden = next(p for p in (REPO_ROOT / "tests" / "resources" / "archives" / "burst").iterdir()
                  if (p / "manifest.json").exists())
    runs = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as d:
            runs.append(_timed([sys.executable, "-m", "spark.jobs.compare", str(golden), "--baseline", "unpatched",
                                "--candidate", "patched", "--master", "local[2]", "--out", f"{d}/r"]))
    out["golden_comparison"] = _median(runs)
    print(f"{'golden comparison':28} {out['golden_comparison']['wall_s']:6.1f} s "
          f"{out['golden_comparison']['busy_cpu_s']:6.1f} CPU-s")
    write_result(out, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
