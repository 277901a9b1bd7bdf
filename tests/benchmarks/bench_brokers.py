"""Benchmark of the local backend: fetch, start-up, memory and disk. Run by `make bench`.

Not a test: it asserts nothing and only records what this machine did, into bench-results/brokers.json.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from harness.deploy.local import LocalBackend
from harness.deploy.local.jars import ensure_version
from harness.inputs.variants import load_variants, parse_variants

OUT = Path("bench-results") / "brokers.json"


def _du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", "--apparent-size", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0]), int(
        subprocess.run(["du", "-sB1", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def bench_fetch(version: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        os.environ["RMQ_HARNESS_CACHE"] = f"{tmp}/cache"
        # A Maven repository of its own: cold means nothing downloaded before, not even Maven plugins.
        os.environ["MAVEN_OPTS"] = f"-Dmaven.repo.local={tmp}/m2"
        try:
            t = time.monotonic()
            dist = ensure_version(version, log=lambda s: None)
            cold = time.monotonic() - t
            t = time.monotonic()
            ensure_version(version, log=lambda s: None)
            warm = time.monotonic() - t
            size = sum(j.stat().st_size for j in dist.lib.glob("*.jar"))
            jars = len(list(dist.lib.glob("*.jar")))
        finally:
            os.environ.clear()
            os.environ.update(env)
    return {"version": version, "cold_s": round(cold, 1), "warm_s": round(warm, 3), "jars": jars,
            "mb": round(size / 1e6, 1)}


def bench_up(names: list[str], variants: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), log=lambda s: None)
        t = time.monotonic()
        backend.up([variants[n] for n in names])
        ready = time.monotonic() - t
        rss = {}
        for lv in backend._states():
            for role, pid in lv.pids.items():
                rss[f"{lv.name}/{role}"] = round(psutil.Process(pid).memory_info().rss / 2**20)
        disk = {lv.name: _du(lv.dirs.root) for lv in backend._states()}
        t = time.monotonic()
        backend.down()
        down = time.monotonic() - t
    return {
        "variants": names,
        "up_to_ready_s": round(ready, 1),
        "down_s": round(down, 1),
        "rss_mib": rss,
        "disk_per_variant": {k: {"apparent_mb": round(a / 1e6, 1), "allocated_mb": round(b / 1e6, 1)}
                             for k, (a, b) in disk.items()},
    }


def main() -> None:
    variants = dict(load_variants())
    variants.update(parse_variants({"variants": {"unpatched-v2": {
        "version": "5.3.3", "broker": {"enableRetryTopicV2": True}}}}))
    results = {
        "host": {"cpus": os.cpu_count(), "mem_gib": round(psutil.virtual_memory().total / 2**30),
                 "python": platform.python_version(), "java": shutil.which("java")},
        "fetch": [bench_fetch("5.3.3")],
        "up": [bench_up(["unpatched"], variants),
               bench_up(["unpatched", "upstream-5.4.0", "unpatched-v2"], variants)],
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    json.dump(results, sys.stdout, indent=2)
    print(f"\nwritten to {OUT}")


if __name__ == "__main__":
    main()
