"""A real Prometheus (Debian's package) per run: generated config, start and stop by PID, and the
export of the run window into the archive.

Everything listens on 127.0.0.1; storage lives in the run's work directory and is discarded after the
export, which keeps every raw series the harness cares about at a fixed step.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.core import process
from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until

# Raw series exported after a run: ours, the probe's, and the broker's pop / consumer families
# (metric name patterns; the run's own label is added, since a shared Prometheus holds other runs).
EXPORTS = {
    "harness": "rmq_harness_.+",
    "probe": "rmq_probe_.+",
    "broker_pop": "rocketmq_pop_.+",
    "broker_consumer": "rocketmq_consumer_.+|rocketmq_send_to_dlq_messages_total",
}


def selector(name_pattern: str, run: str = "") -> str:
    return "{" + f'__name__=~"{name_pattern}"' + (f', run="{run}"' if run else "") + "}"
MAX_POINTS = 10_000  # Prometheus refuses query_range answers above 11,000 points per series


@dataclass(frozen=True)
class ScrapeTarget:
    job: str  # workers | broker | probe
    address: str  # host:port
    variant: str
    run: str = ""
    path: str = "/metrics"
    # An external cluster's exporter (Endpoints.suffix): it serves every tenant's topics and groups. Only series
    # of none, or of this run's (named with the suffix), are kept, and the suffix is stripped from their labels
    # so they read as the scenario's names, like a broker the harness started.
    suffix: str = ""


# The labels of a broker series that carry a topic or a group name.
NAME_LABELS = ("topic", "consumer_group")


def _tenant_rules(suffix: str) -> list[dict]:
    """metric_relabel_configs keeping a shared exporter's series of no topic/group or of ``suffix``'s, then
    stripping ``suffix`` from their names (a %RETRY% topic has the group's suffix and the topic's)."""
    mine = re.escape(suffix)
    rules: list[dict] = [{"source_labels": list(NAME_LABELS), "separator": ";", "action": "keep",
                          "regex": f"(|.*{mine}.*);(|.*{mine}.*)"}]
    for label in NAME_LABELS:
        rules += [{"source_labels": [label], "regex": f"(.*){mine}(.*){mine}(.*)", "target_label": label,
                   "replacement": "${1}${2}${3}"},
                  {"source_labels": [label], "regex": f"(.*){mine}(.*)", "target_label": label,
                   "replacement": "${1}${2}"}]
    return rules


def render_config(targets: Sequence[ScrapeTarget], interval_s: float = 1.0, rules: Sequence[Path] = ()) -> str:
    """Prometheus's configuration: every target scraped every ``interval_s``, and ``rules`` (rule files, e.g.
    the chart's alerts) evaluated as often."""
    jobs: dict[str, list[dict]] = {}
    suffixes: dict[str, str] = {}
    for t in targets:
        labels = {"variant": t.variant, **({"run": t.run} if t.run else {})}
        job = f"{t.job}-{t.variant}" if t.suffix else t.job  # the rules are per suffix, so per variant
        suffixes[job] = t.suffix
        jobs.setdefault(job, []).append({"targets": [t.address], "labels": labels})
    interval = f"{int(interval_s * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        **({"rule_files": [str(r) for r in rules]} if rules else {}),
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": groups, "honor_labels": True,
             **({"metric_relabel_configs": _tenant_rules(suffixes[job])} if suffixes[job] else {})}
            for job, groups in sorted(jobs.items())
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def binary() -> str:
    prom = shutil.which("prometheus")
    if not prom:
        raise HarnessError("prometheus not found on PATH: run `make setup` (apt-get install prometheus)")
    return prom


class Prometheus:
    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.pid: int | None = None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def start(self, targets: Sequence[ScrapeTarget], interval_s: float = 1.0, timeout_s: float = 60.0,
              rules: Sequence[Path] = ()) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(render_config(targets, interval_s, rules))
        self.pid = process.spawn(
            [binary(), f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d",
             "--log.level=warn"],
            self.workdir / "prometheus.log", cwd=self.workdir, die_with_parent=True,
        )
        log = self.workdir / "prometheus.log"

        def alive() -> None:
            if process.exit_code(self.pid) is not None:
                raise HarnessError(f"prometheus exited at start-up; see {log}")

        def ready() -> bool | Pending:
            try:
                status = self._opener.open(f"{self.url}/-/ready", timeout=1).status
            except OSError as e:
                return Pending(str(e))
            return True if status == 200 else Pending(f"/-/ready answers {status}")

        wait_until(f"prometheus to be ready (see {log})", ready, timeout_s, interval_s=0.2, alive=alive)

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> dict:
        params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                         "step": f"{step_s:g}s"})
        with self._opener.open(f"{self.url}/api/v1/query_range?{params}", timeout=60) as resp:
            return json.loads(resp.read())

    def alerts(self) -> dict[str, set[str]]:
        """The alerts its rules hold now: alert name -> the states (pending, firing) of its instances."""
        with self._opener.open(f"{self.url}/api/v1/alerts", timeout=30) as resp:
            found = json.loads(resp.read())["data"]["alerts"]
        out: dict[str, set[str]] = {}
        for a in found:
            out.setdefault(a["labels"]["alertname"], set()).add(a["state"])
        return out

    def query(self, expr: str) -> dict:
        params = urllib.parse.urlencode({"query": expr})
        with self._opener.open(f"{self.url}/api/v1/query?{params}", timeout=30) as resp:
            return json.loads(resp.read())

    def export(self, dest: Path, start: float, end: float, run: str = "",
               patterns: Mapping[str, str] = EXPORTS) -> dict[str, int]:
        """Write query_range answers of the run window (the run's series only, when ``run`` is given) to
        ``dest/<name>.json``; return series per export."""
        dest.mkdir(parents=True, exist_ok=True)
        step = max(1.0, (end - start) / MAX_POINTS)
        counts = {}
        for name, pattern in patterns.items():
            expr = selector(pattern, run)
            answer = self.query_range(expr, start, end, step)
            (dest / f"{name}.json").write_text(json.dumps({"query": expr, "start": start, "end": end,
                                                           "step_s": step, **answer}))
            counts[name] = len(answer.get("data", {}).get("result", []))
        return counts

    def export_panels(self, path: Path, queries: Sequence[tuple[str, str]], start: float, end: float) -> int:
        """Run every dashboard panel's query over the run window; save the answers; return how many
        queries returned at least one series."""
        step = max(1.0, (end - start) / MAX_POINTS)
        out, with_data = [], 0
        for title, expr in queries:
            answer = self.query_range(expr, start, end, step)
            series = len(answer.get("data", {}).get("result", []))
            with_data += series > 0
            out.append({"panel": title, "expr": expr, "series": series, "answer": answer})
        path.write_text(json.dumps({"start": start, "end": end, "step_s": step, "panels": out}))
        return with_data

    def stop(self) -> None:
        if self.pid is not None:
            process.stop_children([self.pid], timeout_s=15)
            self.pid = None
