"""An external cluster measured as a variant (issue 32), against the same build and against the fix.

`rmq-harness brokers up` starts unpatched 5.3.3 detached under a state directory of its own, as an operator's
cluster would run: the harness's runs do not own it. One run of `burst` then drives three variants side by
side: `outside` (that cluster, named by its endpoints), `unpatched` (the same build under the run's own
backend) and `patched` (the run's own, with the wakeup fix). Three comparisons follow, each on the same run:
outside against unpatched (the same build: no verdict of a difference), outside against patched and unpatched
against patched (the fix found from either baseline, with similar ratios).

Not a test: it records into bench-results/external-<time>.json the verdicts, ratios, intervals, cycles, the
wall time, and whether the cluster was left as found (its processes, and none of the run's topics or groups).
Run by `make bench-external` (about 8 minutes).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from harness.cli.main import main as cli
from harness.client import remoting
from harness.contracts.verdict import CHANGED, IMPROVEMENT
from harness.core.paths import REPO_ROOT
from harness.deploy.local import LocalBackend

SCENARIO = "burst"
PAIRS = [("outside", "unpatched"), ("outside", "patched"), ("unpatched", "patched")]


def _primary(summary_path: Path) -> dict:
    s = json.loads(summary_path.read_text())
    [x] = [c for c in s["comparisons"] if c["primary"]]
    return {"verdict": x["verdict"], "reason": x["reason"], "ratio": x["ratio_of_medians"], "ci": x["ci"],
            "p": x["p_adjusted"], "cycles": [x["n_baseline"], x["n_candidate"]], "overall": s["verdict"]}


def main() -> int:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    runs, reports = REPO_ROOT / "runs" / f"external-{stamp}", REPO_ROOT / "reports" / f"external-{stamp}"
    with tempfile.TemporaryDirectory(prefix="rmq-outside-") as home:
        work = Path(home) / "brokers"
        if cli(["brokers", "up", "--variant", "unpatched", "--workdir", str(work)]) != 0:
            return 1
        try:
            backend = LocalBackend(work, log=lambda _s: None)
            [ep] = backend.endpoints()
            before = {h.endpoints.variant: h.detail for h in backend.status()}
            variants = Path(home) / "variants.yaml"
            # The cluster by its endpoints; unpatched and patched are the built-in ones (a file adds to them).
            variants.write_text(yaml.safe_dump({"variants": {
                "outside": {"endpoints": {"namesrv": ep.namesrv, "proxy": ep.grpc}}}}))
            started = time.monotonic()
            code = cli(["--variants", str(variants), "run", "--scenario", SCENARIO, "--runs-dir", str(runs),
                        *[x for v in ("outside", "unpatched", "patched") for x in ("--variant", v)]])
            run_s = time.monotonic() - started
            if code != 0:
                return 1
            [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
            m = json.loads((archive / "manifest.json").read_text())
            ext = next(v for v in m["variants"] if v["name"] == "outside")["external"]
            left_as_found = ({h.endpoints.variant: h.detail for h in backend.status()} == before
                             and not any(ext["suffix"] in t for t in remoting.topics(ep.broker))
                             and not any(ext["suffix"] in g for g in remoting.groups(ep.broker)))
            verdicts = {}
            for base, cand in PAIRS:
                out = reports / f"{cand}-vs-{base}"
                if cli(["compare", str(archive), "--baseline", base, "--candidate", cand, "--out", str(out)]) != 0:
                    return 1
                verdicts[f"{cand} vs {base}"] = _primary(out / "summary.json")
        finally:
            cli(["brokers", "down", "--workdir", str(work)])
    same, fix_ext, fix_own = (verdicts[f"{c} vs {b}"] for b, c in PAIRS)
    targets = {
        "the same build, outside and own, is not called different": same["verdict"] not in CHANGED,
        "the fix is an improvement against the outside cluster": fix_ext["verdict"] == IMPROVEMENT,
        "and against the same build under the run's own backend": fix_own["verdict"] == IMPROVEMENT,
        "the cluster was left as found": left_as_found,
    }
    outside = {"namesrv": ep.namesrv, "proxy": ep.grpc, "version": ext.get("version"), "metrics": ext.get("metrics")}
    out = {"bench": "external", "at": stamp, "scenario": SCENARIO, "run_s": round(run_s, 1),
           "archive": str(archive.relative_to(REPO_ROOT)), "outside": outside, "comparisons": verdicts,
           "targets": targets}
    path = REPO_ROOT / "bench-results" / f"external-{stamp}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    for k, v in verdicts.items():
        ci = "-" if v["ci"] is None else f"{v['ci'][0]:.3g}-{v['ci'][1]:.3g}"
        print(f"{k:24} {v['verdict']:16} ratio {v['ratio']} ({ci}) cycles {v['cycles']}")
    print(f"run {run_s / 60:.1f} min; " + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in targets.items()))
    print(f"written to {path.relative_to(REPO_ROOT)}")
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
