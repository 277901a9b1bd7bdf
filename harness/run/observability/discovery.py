"""A Prometheus the harness did not start (the Helm chart's), told about a run's targets through its
HTTP service discovery: the run serves the target list, Prometheus polls it.

The targets and their labels (job, variant, run) are exactly those a local run writes into its own
Prometheus config, so dashboards and the archive's exports are the same on both backends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.error import URLError

from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until
from harness.run.observability.prometheus import Prometheus, ScrapeTarget

SD_PATH = "/targets"


def sd_groups(targets: Sequence[ScrapeTarget]) -> list[dict]:
    """The http_sd answer: one group per target, the same labels a local run's static config gives."""
    return [
        {"targets": [t.address], "labels": {"job": t.job, "variant": t.variant, **({"run": t.run} if t.run else {})}}
        for t in targets
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _SDServer

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        if self.path.split("?")[0] != SD_PATH:
            self.send_error(404)
            return
        body = json.dumps(self.server.groups).encode()
        self.server.fetches, self.server.last_fetch = self.server.fetches + 1, time.monotonic()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
        pass  # Prometheus polls every few seconds; one line each would bury the run's log


class _SDServer(ThreadingHTTPServer):
    groups: list[dict]
    # How often Prometheus fetched the list, and when last (monotonic): a wait that times out says so.
    fetches: int
    last_fetch: float


class DiscoveredPrometheus(Prometheus):
    """Serves the run's targets on ``sd_host:sd_port`` for an external Prometheus at ``url`` and waits
    until that Prometheus scrapes them; queries and exports work as for a Prometheus of our own."""

    def __init__(self, url: str, sd_host: str, sd_port: int, workdir: Path,
                 log: Callable[[str], None] = print) -> None:
        super().__init__(workdir, 0)
        self.url = url.rstrip("/")
        self.sd_address = (sd_host, sd_port)
        self._server: _SDServer | None = None
        self.log = log

    def start(self, targets: Sequence[ScrapeTarget], interval_s: float = 1.0, timeout_s: float = 90.0) -> None:
        # An external cluster's exporter serves every tenant's topics and groups; the run's own Prometheus keeps
        # only this run's series (metric_relabel_configs per job), but service discovery cannot give the
        # release's Prometheus such rules per target, so it is not scraped from the cluster, and that is said.
        for t in {t.variant: t for t in targets if t.suffix}.values():
            self.log(f"{t.variant}: its brokers' exporter ({t.address}) serves every tenant's series, and the "
                     "release's Prometheus cannot keep only this run's: not scraped from the cluster (a run from "
                     "a machine, `rmq-harness run`, scrapes it)")
        targets = [t for t in targets if not t.suffix]
        self._server = _SDServer(self.sd_address, _Handler)
        self._server.groups, self._server.fetches, self._server.last_fetch = sd_groups(targets), 0, 0.0
        served_since = time.monotonic()
        threading.Thread(target=self._server.serve_forever, name="http-sd", daemon=True).start()
        wanted = {t.address for t in targets}
        run = targets[0].run if targets else ""

        def picked_up() -> bool | Pending:
            try:
                active = self._get("/api/v1/targets?state=active")["data"]["activeTargets"]
                seen = {t["labels"].get("instance", "") for t in active if t["labels"].get("run") == run}
            except (OSError, URLError, KeyError, ValueError) as e:
                return Pending(f"Prometheus does not answer ({e})")
            return True if wanted <= seen else Pending(f"missing {', '.join(sorted(wanted - seen))}")

        wait_until(f"Prometheus at {self.url} to pick up this run's targets (are its http_sd_configs pointing at "
                   f"this pod's port {self.sd_address[1]}?)", picked_up, timeout_s,
                   detail=lambda: self._why_not(served_since))

    def _why_not(self, since: float) -> str:
        """What a wait for the targets that timed out saw: whether Prometheus fetched the list at all (a
        Service without this pod as endpoint, a DNS name that does not resolve there), and what its own
        discovery and scrape pools say (a failing http_sd request, targets dropped by relabelling)."""
        fetches, last = (self._server.fetches, self._server.last_fetch) if self._server else (0, 0.0)
        lines = [f"Prometheus fetched the target list {fetches} times in {time.monotonic() - since:.0f} s"
                 + (f", last {time.monotonic() - last:.0f} s ago" if fetches else "")]
        # Its own metrics (it does not scrape itself): the http_sd requests that failed, what discovery found.
        own = ("prometheus_sd_http_failures_total", "prometheus_sd_discovered_targets",
               "prometheus_target_sync_failed_total")
        try:
            with self._opener.open(f"{self.url}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            found = [line for line in text.splitlines() if line.startswith(own)]
            # A shared Prometheus (kube-prometheus-stack) has a line per scrape config: the first ones do.
            lines += found[:12] + ([f"({len(found) - 12} more)"] if len(found) > 12 else []) or [
                f"none of {', '.join(own)}"]
        except (OSError, URLError, ValueError) as e:
            lines.append(f"its /metrics not read ({e})")
        try:
            # Only what came from this run's list (http_sd labels each target with the list's URL).
            ours = f":{self.sd_address[1]}{SD_PATH}"
            dropped = [t for t in self._get("/api/v1/targets?state=dropped")["data"]["droppedTargets"]
                       if t.get("discoveredLabels", {}).get("__meta_url", "").endswith(ours)]
            lines.append(f"this run's targets dropped by relabelling: {len(dropped)}"
                         + "".join(f"\n  {t.get('discoveredLabels', {})}" for t in dropped[:10]))
        except (OSError, URLError, KeyError, ValueError) as e:
            lines.append(f"dropped targets: not read ({e})")
        return "\n".join(lines)

    def _get(self, path: str) -> dict:
        with self._opener.open(f"{self.url}{path}", timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, drain_s: float = 20.0) -> None:
        """Withdraw the targets first: Prometheus keeps the last list it got when the endpoint goes away,
        and would go on scraping (and labelling) the next run's brokers under this run's name."""
        if self._server is not None:
            run = {g["labels"].get("run") for g in self._server.groups}
            self._server.groups = []

            def dropped() -> bool | Pending:
                try:
                    active = self._get("/api/v1/targets?state=active")["data"]["activeTargets"]
                except (OSError, URLError, KeyError, ValueError):
                    return True  # gone: it scrapes nothing
                still = [t["labels"].get("instance", "") for t in active if t["labels"].get("run") in run]
                return Pending(f"still scraping {', '.join(still)}") if still else True

            try:
                wait_until("Prometheus to drop this run's targets", dropped, drain_s)
            except HarnessError:
                pass  # its next run's targets get their own labels; stopping goes on
            self._server.shutdown()
            self._server.server_close()
            self._server = None
