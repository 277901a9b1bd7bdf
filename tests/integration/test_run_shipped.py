"""A real run whose workers keep their files to themselves, as worker pods do: each writes its events and
client log into a directory of its own and, when the master stops, sends them over Locust's channel.
Brokers are local and the workers are processes (there is no cluster here); the stopping, flushing,
sending and checking are the code worker pods run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.contracts.workers import Placement
from harness.core.process import free_port
from harness.deploy.local import LocalBackend
from harness.inputs.scenario import load_scenario
from harness.inputs.variants import load_variants, select
from harness.run.observability.prometheus import Prometheus
from harness.run.sequence import Run
from harness.run.site import Site
from harness.workload.fleet import ProcessWorkers

SCENARIO = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"  # 2 workers, 16 messages


class SendingProcesses(ProcessWorkers):
    ship_files = True

    def __init__(self, root: Path) -> None:
        super().__init__("127.0.0.1", "127.0.0.1", lambda _n: free_port())
        self.root = root

    def placement(self, n: int) -> Placement:
        own = self.root / f"worker-{n + 1}"
        return Placement("127.0.0.1", self.worker_port(n), own / "events", own / "client")


def test_every_workers_events_come_back_over_locust(tmp_path: Path):
    own = tmp_path / "workers"

    def site(work: Path, log: Callable[[str], None]) -> Site:
        return Site(backend=LocalBackend(work / "brokers", attached=True, log=log),
                    prometheus=Prometheus(work / "prometheus", free_port()), bind_host="127.0.0.1",
                    advertise_host="127.0.0.1", worker_port=lambda _n: free_port(), workers=SendingProcesses(own))

    result = Run(select(load_variants(), ["unpatched"]), load_scenario(str(SCENARIO)), tmp_path / "runs", site=site,
                 run_id="shipped-run-1").execute()
    # What each worker wrote on its own side ...
    written = {w: pd.concat([pd.read_parquet(p) for p in sorted((own / w / "events").glob("*.parquet"))])
               for w in ("worker-1", "worker-2")}
    assert all(len(df) for df in written.values())
    # ... is in the archive, every row of it, and nothing else.
    ev = pd.read_parquet(result.archive / "events" / "unpatched.parquet")
    assert ev.groupby("worker").size().to_dict() == {w: len(df) for w, df in written.items()}
    assert set(ev.loc[ev.kind == "sent", "ledger_id"]) <= set(ev.loc[ev.kind == "acked", "ledger_id"])
    assert len(set(ev.loc[ev.kind == "sent", "ledger_id"])) == 16
    for w in written:
        sent = (own / w / "client" / f"{w}.log").read_bytes()
        assert (result.archive / "logs" / "unpatched" / "client" / f"{w}.log").read_bytes() == sent
