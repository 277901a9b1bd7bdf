"""A Prometheus the harness did not start (the Helm chart's), told about a run's targets through its
HTTP service discovery: the run serves the target list, Prometheus polls it.

The targets and their labels (job, variant, run) are exactly those a local run writes into its own
Prometheus config, so dashboards and the archive's exports are the same on both backends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.error import URLError

from harness.core.errors import HarnessError
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
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
        pass  # Prometheus polls every few seconds; one line each would bury the run's log


class _SDServer(ThreadingHTTPServer):
    groups: list[dict]


class DiscoveredPrometheus(Prometheus):
    """Serves the run's targets on ``sd_host:sd_port`` for an external Prometheus at ``url`` and waits
    until that Prometheus scrapes them; queries and exports work as for a Prometheus of our own."""

    def __init__(self, url: str, sd_host: str, sd_port: int, workdir: Path) -> None:
        super().__init__(workdir, 0)
        self.url = url.rstrip("/")
        self.sd_address = (sd_host, sd_port)
        self._server: _SDServer | None = None

    def start(self, targets: Sequence[ScrapeTarget], interval_s: float = 1.0, timeout_s: float = 90.0) -> None:
        self._server = _SDServer(self.sd_address, _Handler)
        self._server.groups = sd_groups(targets)
        threading.Thread(target=self._server.serve_forever, name="http-sd", daemon=True).start()
        wanted = {t.address for t in targets}
        run = targets[0].run if targets else ""
        deadline = time.monotonic() + timeout_s
        seen: set[str] = set()
        while time.monotonic() < deadline:
            try:
                active = self._get("/api/v1/targets?state=active")["data"]["activeTargets"]
                seen = {t["labels"].get("instance", "") for t in active if t["labels"].get("run") == run}
            except (OSError, URLError, KeyError, ValueError):
                seen = set()
            if wanted <= seen:
                return
            time.sleep(1.0)
        missing = ", ".join(sorted(wanted - seen))
        raise HarnessError(
            f"Prometheus at {self.url} did not pick up this run's targets within {timeout_s:.0f} s "
            f"(missing: {missing}); check its http_sd_configs point at this pod's port {self.sd_address[1]}"
        )

    def _get(self, path: str) -> dict:
        with self._opener.open(f"{self.url}{path}", timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, drain_s: float = 20.0) -> None:
        """Withdraw the targets first: Prometheus keeps the last list it got when the endpoint goes away,
        and would go on scraping (and labelling) the next run's brokers under this run's name."""
        if self._server is not None:
            run = {g["labels"].get("run") for g in self._server.groups}
            self._server.groups = []
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline:
                try:
                    active = self._get("/api/v1/targets?state=active")["data"]["activeTargets"]
                except (OSError, URLError, KeyError, ValueError):
                    break
                if not any(t["labels"].get("run") in run for t in active):
                    break
                time.sleep(1.0)
            self._server.shutdown()
            self._server.server_close()
            self._server = None
