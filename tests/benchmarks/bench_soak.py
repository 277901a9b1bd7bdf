"""Soak (issue 18): a long steady run at the highest mixed rate this machine sustained (bench-results/workload.json:
remoting, one message in ten nacked once, two workers beside the broker), the memory of every process of the
run sampled every 10 s, and every event the workers recorded checked into the archive (the manifest's
events_check). Not a test: it asserts nothing and writes bench-results/soak.json.

RMQ_HARNESS_SOAK_RATE (sends/s, default 4800) and RMQ_HARNESS_SOAK_S (the load's length, default 1800) set it.
Run by `make bench-soak`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import yaml

from harness.core.paths import REPO_ROOT
from harness.core.process import OWNER_PROPERTY

OUT = REPO_ROOT / "bench-results" / "soak.json"
SAMPLE_S = 10.0
PRODUCERS = 4


def role(proc: psutil.Process, harness: int) -> str | None:
    """What a process of the run is, by its command line (None: not one of the run's)."""
    try:
        argv = proc.cmdline()
    except psutil.Error:
        return None
    if proc.pid == harness:
        return "harness"
    line = " ".join(argv)
    if "harness.workload.launch" in line:
        return "locust master" if "--master" in argv else f"locust worker {proc.pid}"
    if f"-D{OWNER_PROPERTY}=" in line:
        main = next((a.rsplit(".", 1)[-1] for a in argv if a.startswith("org.apache.rocketmq.")), "java")
        return {"NamesrvStartup": "name server", "ProxyStartup": "broker (proxy)"}.get(main, main)
    if "prometheus" in line:
        return "prometheus"
    return None


def sample(harness: psutil.Process) -> dict[str, float]:
    """RSS (MiB) of the harness and every process it started (their children included)."""
    out: dict[str, float] = {}
    for p in [harness, *harness.children(recursive=True)]:
        r = role(p, harness.pid)
        if r is not None:
            try:
                out[r] = round(p.memory_info().rss / 2**20, 1)
            except psutil.Error:
                pass
    return out


def flatness(points: list[tuple[float, float]], load: tuple[float, float]) -> dict[str, float | None]:
    """Over the second half of the load: the RSS at its start and end (MiB) and the least-squares slope
    (MiB per 10 minutes)."""
    lo, hi = load
    mid = (lo + hi) / 2
    half = [(t, v) for t, v in points if mid <= t <= hi]
    if len(half) < 3:
        return {"rss_mid_mib": None, "rss_end_mib": None, "slope_mib_per_10min": None}
    t, v = np.array(half).T
    slope = np.polyfit(t, v, 1)[0] * 600
    return {"rss_mid_mib": float(v[0]), "rss_end_mib": float(v[-1]), "slope_mib_per_10min": round(float(slope), 2)}


def main() -> None:
    rate = float(os.environ.get("RMQ_HARNESS_SOAK_RATE", "4800"))
    length = float(os.environ.get("RMQ_HARNESS_SOAK_S", "1800"))
    stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    runs = REPO_ROOT / "runs" / f"soak-{stamp}"
    scenario = yaml.safe_load((REPO_ROOT / "tests" / "benchmarks" / "mixed.yaml").read_text())
    scenario.update(name="soak", duration_s=length,
                    description=f"Soak: {rate:g} sends/s for {length:g} s, one in ten nacked once (remoting)")
    scenario["produce"]["rate"] = round(rate / PRODUCERS, 1)
    scenario["cycles"]["drain_timeout_s"] = 120
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soak.yaml"
        path.write_text(yaml.safe_dump(scenario))
        argv = [sys.executable, "-m", "harness.cli.main", "run", "--variant", "unpatched", "--scenario", str(path),
                "--runs-dir", str(runs)]
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        marks: dict[str, float] = {}
        tail: list[str] = []

        def read() -> None:
            for line in proc.stdout:
                tail.append(line.rstrip())
                del tail[:-40]
                for key, needle in (("load", "Locust master"), ("load_end", "Locust finished")):
                    if needle in line and key not in marks:
                        marks[key] = time.monotonic() - started

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        harness = psutil.Process(proc.pid)
        series: dict[str, list[tuple[float, float]]] = {}
        while proc.poll() is None:
            now = time.monotonic() - started
            for r, rss in sample(harness).items():
                series.setdefault(r, []).append((round(now, 1), rss))
            time.sleep(SAMPLE_S if "load_end" not in marks else 1.0)
        reader.join(timeout=10)
    wall = time.monotonic() - started
    load = (marks.get("load", 0.0), marks.get("load_end", wall))
    archives = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.exists() else []
    manifest = json.loads((archives[0] / "manifest.json").read_text()) if archives else {}
    summary = (manifest.get("summary") or [{}])[0]
    after = [v for t, v in series.get("harness", []) if t >= load[1]]
    doc = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(), "host_cpus": os.cpu_count(),
        "rate_asked": rate, "load_s": length, "exit_code": proc.returncode, "wall_s": round(wall, 1),
        "load_window_s": [round(x, 1) for x in load], "archive": str(archives[0]) if archives else None,
        "sent": summary.get("sent"), "deliveries": summary.get("deliveries"), "acks": summary.get("acks"),
        "nacks": summary.get("nacks"), "errors": summary.get("errors"),
        "sent_per_s": round(summary["sent"] / length, 1) if summary.get("sent") else None,
        "ledger": summary.get("ledger"), "events_check": (manifest.get("events_check") or {}).get("problems"),
        "events_recorded": {v: {w: sum((c["counted"] or {}).values()) for w, c in ws.items()}
                            for v, ws in ((manifest.get("events_check") or {}).get("workers") or {}).items()},
        "memory": {r: flatness(pts, load) for r, pts in sorted(series.items())},
        "harness_peak_after_load_mib": max(after) if after else None,
        "series": {r: pts for r, pts in sorted(series.items())}, "output_tail": tail,
    }
    OUT.parent.mkdir(exist_ok=True)
    out = OUT if not OUT.exists() else OUT.with_name(f"soak-{stamp}.json")
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("exit_code", "sent", "sent_per_s", "events_check", "memory",
                                           "harness_peak_after_load_mib")}, indent=2))
    print(f"soak: {out}")


if __name__ == "__main__":
    main()
