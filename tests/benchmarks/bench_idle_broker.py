"""What an idle broker costs, thread by thread: `unpatched` (a 5.3.3 name server and the proxy hosting its broker,
the harness's broker defaults) started alone through the local backend, left alone for RMQ_HARNESS_BENCH_IDLE_S
seconds (default 30) after it serves, and each JVM thread's CPU over that time read from /proc (threads named
alike summed: "NettyServerCodecThread_1" and "_2" as "NettyServerCodecThread_"); then the same with the broker's
timer wheel flushed every 10 s (`timerFlushIntervalMs: 10000`) in place of every second, the setting the largest
share of it follows (docs/findings/idle-broker-timer-flush.md).

Not a test: it writes bench-results/idle-broker.json (another path with RMQ_HARNESS_BENCH_OUT).
`python -m tests.benchmarks.bench_idle_broker` (about two minutes). Run it on a quiet machine: a thread's
CPU-seconds do not depend much on what else runs, but its wake-ups do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.paths import REPO_ROOT
from harness.deploy.local import LocalBackend
from harness.inputs.variants import load_variants
from tests.benchmarks import write_result

OUT = Path(os.environ.get("RMQ_HARNESS_BENCH_OUT", REPO_ROOT / "bench-results" / "idle-broker.json"))
IDLE_S = float(os.environ.get("RMQ_HARNESS_BENCH_IDLE_S", "30"))
SETTLE_S = 10.0  # after it serves: the start's own compilation and first flushes out of the way
CASES = {"harness defaults": {}, "timerFlushIntervalMs 10000": {"timerFlushIntervalMs": 10000}}


def _threads(pid: int) -> dict[str, float]:
    """CPU-seconds of each thread name of ``pid`` (digits at the end dropped, so a pool is one row)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = re.sub(r"\d+$", "", (task / "comm").read_text().strip())
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def idle_once(broker: dict) -> dict:
    """One start of unpatched with ``broker`` settings on top; each JVM's threads' CPU over IDLE_S idle seconds."""
    variant = load_variants()["unpatched"].model_copy(update={"broker": broker})
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), attached=True, log=lambda s: None)
        backend.up([variant])
        try:
            (lv,) = backend._states()
            time.sleep(SETTLE_S)
            before = {role: _threads(pid) for role, pid in lv.pids.items()}
            time.sleep(IDLE_S)
            after = {role: _threads(pid) for role, pid in lv.pids.items()}
        finally:
            backend.down()
    out = {}
    for role, threads in after.items():
        used = {n: round(s - before[role].get(n, 0.0), 2) for n, s in threads.items()}
        used = {n: s for n, s in sorted(used.items(), key=lambda x: -x[1]) if s > 0}
        out[role] = {"cores": round(sum(used.values()) / IDLE_S, 4), "threads_cpu_s": used}
    return out


def main() -> int:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    out: dict = {"bench": "idle-broker", "commit": commit, "cpus": os.cpu_count(), "idle_s": IDLE_S,
                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": {}}
    for name, broker in CASES.items():
        out["cases"][name] = one = idle_once(broker)
        for role, got in one.items():
            top = ", ".join(f"{n} {s:.2f}" for n, s in list(got["threads_cpu_s"].items())[:4])
            print(f"{name}: {role} {got['cores']:.3f} cores idle ({top} CPU-s)", flush=True)
    write_result(out, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
