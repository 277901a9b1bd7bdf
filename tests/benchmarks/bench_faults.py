"""The scripted fault runs (issue 18): every action on every process of the `faults` scenario, unpatched and
patched side by side, then the topologies' own cases (CASES); one Spark matrix report over all their archives.

Not a test: it records what this machine did into bench-results/faults.json (one row per fault and variant:
messages in flight, lost, duplicated, the longest wait, how long sends and deliveries stopped) and prints the
table. Run by `make bench-faults` (about an hour); RMQ_HARNESS_BENCH_ONLY=kill9-broker,... runs some.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.paths import REPO_ROOT

OUT = REPO_ROOT / "bench-results" / "faults.json"
VARIANTS = ["unpatched", "patched"]
# (name, scenario, faults; [] runs the scenario's own): each process of the cluster-mode deployment, each
# action, 30 s into 90 s of load; then the topologies: the second of two masters killed, two masters without
# faults (apache/rocketmq#9145), and a master with an acting slave killed for 90 s (seed 003).
CASES = [
    *[(f"{action}-{target}", "faults", [f"{action}:{target}@30" + ("+10" if action != "restart" else "")])
      for target in ("broker", "proxy", "namesrv") for action in ("kill9", "sigstop", "restart")],
    ("kill9-broker-b", "two-masters", ["kill9:broker-b@30+10"]),
    ("two-masters", "two-masters", []),
    ("slave-acting-master", "slave-acting-master", []),
]


def run_case(name: str, scenario: str, faults: list[str], runs: Path) -> dict:
    argv = [sys.executable, "-m", "harness.cli", "run", "--scenario", scenario, "--runs-dir", str(runs),
            *[x for v in VARIANTS for x in ("--variant", v)], *[x for f in faults for x in ("--fault", f)]]
    before = {p.name for p in runs.iterdir()} if runs.exists() else set()
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    made = [p for p in runs.iterdir() if p.name not in before and not p.name.startswith(".")]
    out = {"case": name, "scenario": scenario, "faults": faults, "exit_code": proc.returncode,
           "wall_s": round(wall, 1), "archive": str(made[0]) if made else None}
    if not made:
        out["error"] = (proc.stderr.strip().splitlines() or ["no archive and no error output"])[-1]
        return out
    manifest = json.loads((made[0] / "manifest.json").read_text())
    out["rows"] = [{"variant": s["variant"], "sent": s["sent"], "errors": s["errors"], "lost": s["ledger"]["lost"],
                    "duplicated": s["ledger"]["duplicated"], "faults": s.get("faults") or []}
                   for s in manifest["summary"]]
    if proc.returncode != 0:
        out["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return out


def table(results: list[dict]) -> str:
    head = ("| fault | target | variant | away | in flight | lost | duplicated | longest wait | sends stopped "
            "| deliveries stopped |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]

    def ms(v: float | None, open_: bool | None) -> str:
        return "-" if v is None else f"{'>= ' if open_ else ''}{v / 1000:.1f} s"

    for r in results:
        for row in r.get("rows", []):
            for f in row["faults"]:
                away = "-" if f["window_s"] is None else f"{f['window_s']:.1f} s"
                lines.append(f"| {f['label']} | {f['target']} | {row['variant']} | {away} | {f['exposed']} | "
                             f"{f['lost']} | {f['duplicated']} | {ms(f['longest_wait_ms'], f['longest_wait_open'])} | "
                             f"{ms(f['send_gap_ms'], f['send_gap_open'])} | "
                             f"{ms(f['delivery_gap_ms'], f['delivery_gap_open'])} |")
        if r.get("error"):
            lines.append(f"| {r['case']} | | | error: {r['error']} | | | | | | |")
    return "\n".join(lines)


def main() -> None:
    only = {s for s in os.environ.get("RMQ_HARNESS_BENCH_ONLY", "").split(",") if s}
    cases = [c for c in CASES if not only or c[0] in only]
    stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    runs = REPO_ROOT / "runs" / f"faults-{stamp}"
    runs.mkdir(parents=True)
    started = time.monotonic()
    results = []
    for name, scenario, faults in cases:
        print(f"== {name}: {scenario} with {' '.join(faults)}", flush=True)
        results.append(run_case(name, scenario, faults, runs))
        print(table(results[-1:]), flush=True)
    archives = [r["archive"] for r in results if r.get("archive")]
    report = None
    if archives:
        out = REPO_ROOT / "reports" / f"{stamp}-faults"
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "matrix", "--archives", *archives,
                               *[x for v in VARIANTS for x in ("--variant", v)], "--out", str(out)],
                              cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        report = str(out / "report.html") if proc.returncode == 0 else f"matrix failed: {proc.stderr[-500:]}"
    doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "host_cpus": os.cpu_count(),
           "wall_s": round(time.monotonic() - started, 1), "runs_dir": str(runs), "report": report,
           "results": results, "table": table(results)}
    OUT.parent.mkdir(exist_ok=True)
    path = OUT if not OUT.exists() else OUT.with_name(f"faults-{stamp}.json")
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(doc["table"])
    print(f"wall {doc['wall_s']} s; results in {path}; report {report}")


if __name__ == "__main__":
    main()
