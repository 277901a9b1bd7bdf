"""The scripted fault runs (issue 18): every action on every process of the `faults` scenario, unpatched and
patched side by side, then the topologies' own cases (CASES); one Spark matrix report over all their archives.

Not a test: it records what this machine did into bench-results/faults.json (one row per fault and variant:
messages in flight, lost, duplicated, the longest wait, how long sends and deliveries stopped) and prints the
table. Run by `make bench-faults` (about an hour); RMQ_HARNESS_BENCH_ONLY=kill9-broker,... runs some;
`python -m tests.benchmarks.bench_faults --tabulate ARCHIVE...` only tabulates archives of earlier runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.core.paths import REPO_ROOT

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
    argv = [sys.executable, "-m", "harness.cli.main", "run", "--scenario", scenario, "--runs-dir", str(runs),
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
    out["rows"] = manifest["summary"]
    if proc.returncode != 0:
        out["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return out


def ms(v: float | str | None, open_: bool | None) -> str:
    return "-" if v is None else f"{'>= ' if open_ else ''}{float(v) / 1000:.1f} s"


def table(rows: list[dict]) -> str:
    """The fault rows (a summary's per_variant faults, with their variant) as a Markdown table."""
    lines = ["| fault | target | variant | away | in flight | lost | duplicated | longest wait | sends stopped "
             "| deliveries stopped | error |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in rows:
        away = "-" if f["window_s"] is None else f"{f['window_s']:.1f} s"
        lines.append(f"| {f['label']} | {f['target']} | {f['variant']} | {away} | {f['exposed']} | {f['lost']} | "
                     f"{f['duplicated']} | {ms(f['longest_wait_ms'], f['longest_wait_open'])} | "
                     f"{ms(f['send_gap_ms'], f['send_gap_open'])} | "
                     f"{ms(f['delivery_gap_ms'], f['delivery_gap_open'])} | {f['error'] or ''} |")
    return "\n".join(lines)


def rows_of(summaries: list[dict]) -> list[dict]:
    return [{**f, "variant": s["variant"]} for s in summaries for f in s.get("faults") or []]


def tabulate(archives: list[str], out: Path) -> tuple[str | None, list[dict]]:
    """One Spark matrix report over ``archives`` (the one definition, recomputed from their events): its
    report and the fault rows of its summary."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "matrix", "--archives", *archives,
                           *[x for v in VARIANTS for x in ("--variant", v)], "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"matrix failed: {proc.stderr[-500:]}", []
    summary = json.loads((out / "summary.json").read_text())
    rows = sorted(rows_of(summary["per_variant"]), key=lambda f: (f["scenario"], f["variant"]))
    return str(out / "report.html"), rows


def main() -> None:
    if sys.argv[1:2] == ["--tabulate"]:
        # Archives of earlier runs (e.g. of several invocations): the matrix report and the table only.
        stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
        report, rows = tabulate(sys.argv[2:], REPO_ROOT / "reports" / f"{stamp}-faults")
        doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "archives": sys.argv[2:], "report": report,
               "faults": rows, "table": table(rows)}
        path = OUT if not OUT.exists() else OUT.with_name(f"faults-{stamp}.json")
        path.write_text(json.dumps(doc, indent=2) + "\n")
        print(doc["table"])
        print(f"results in {path}; report {report}")
        return
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
        print(table(rows_of(results[-1].get("rows", []))), flush=True)
        if results[-1].get("error"):
            print(f"error: {results[-1]['error']}", flush=True)
    wall = time.monotonic() - started
    archives = [r["archive"] for r in results if r.get("archive")]
    report, rows = tabulate(archives, REPO_ROOT / "reports" / f"{stamp}-faults") if archives else (None, [])
    doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "host_cpus": os.cpu_count(),
           "runs_wall_s": round(wall, 1), "runs_dir": str(runs), "report": report, "results": results,
           "faults": rows, "table": table(rows)}
    OUT.parent.mkdir(exist_ok=True)
    path = OUT if not OUT.exists() else OUT.with_name(f"faults-{stamp}.json")
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(doc["table"])
    print(f"runs took {doc['runs_wall_s']} s; results in {path}; report {report}")


if __name__ == "__main__":
    main()
