"""Benchmark of the Locust workload's own ceiling: sends/s and deliveries/s per worker against a
real 5.3.3 broker. Run by `make bench`; writes bench-results/workload.json. Asserts nothing."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from harness.cli import main as cli

SCENARIO = Path(__file__).parent / "throughput.yaml"
OUT = Path("bench-results") / "workload.json"


def main() -> None:
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        if cli(["run", "--variant", "unpatched", "--scenario", str(SCENARIO), "--runs-dir", tmp]) != 0:
            sys.exit("benchmark run failed")
        [archive] = [p for p in Path(tmp).iterdir() if not p.name.startswith(".")]
        ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    out = {"scenario": "throughput", "per_worker": {}}
    for (worker, kind), part in ev[ev.kind.isin(["sent", "received"])].groupby(["worker", "kind"]):
        span_s = (part.t_client_ns.max() - part.t_client_ns.min()) / 1e9
        out["per_worker"].setdefault(worker, {})[f"{kind}_per_s"] = round(len(part) / span_s, 1) if span_s else None
        out["per_worker"][worker][f"{kind}_n"] = len(part)
    sent = ev[ev.kind == "sent"]
    recv = ev[ev.kind == "received"]
    out["total_sent"], out["total_received"] = len(sent), len(recv)
    out["never_received"] = len(set(sent.ledger_id) - set(recv.ledger_id))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
