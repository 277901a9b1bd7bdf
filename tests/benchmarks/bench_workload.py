"""Benchmark of the Locust workload's own ceiling against a real 5.3.3 broker, over each protocol: sends/s,
deliveries/s, and deliveries per worker CPU-second (the workers' own CPU, sampled from /proc while they run),
plus the remoting codec's frames/s and messages decoded/s on this CPU. Run by `make bench`; writes
bench-results/workload.json. Asserts nothing."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from harness.cli import main as cli
from harness.client import remoting
from harness.client.remoting_messages import decode_batch
from tests.unit.test_remoting_messages import stored

SCENARIO = Path(__file__).parent / "throughput.yaml"
OUT = Path("bench-results") / "workload.json"


class WorkerCpu:
    """The CPU seconds of every Locust worker process started while it watches (the last sample of each)."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.seconds: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(interval_s,), daemon=True)

    def _watch(self, interval_s: float) -> None:
        me = psutil.Process()
        while not self._stop.wait(interval_s):
            for p in me.children(recursive=True):
                try:
                    if "--worker" in p.cmdline():
                        t = p.cpu_times()
                        self.seconds[p.pid] = t.user + t.system
                except psutil.Error:
                    continue

    def __enter__(self) -> WorkerCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def workload(protocol: str) -> dict:
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp, WorkerCpu() as cpu:
        argv = ["run", "--variant", "unpatched", "--scenario", str(SCENARIO), "--protocol", protocol,
                "--runs-dir", tmp]
        if cli(argv) != 0:
            sys.exit(f"benchmark run over {protocol} failed")
        [archive] = [p for p in Path(tmp).iterdir() if not p.name.startswith(".")]
        ev = pd.read_parquet(archive / "events" / "unpatched.parquet")
    out: dict = {"protocol": protocol, "per_worker": {}}
    for (worker, kind), part in ev[ev.kind.isin(["sent", "received"])].groupby(["worker", "kind"]):
        span_s = (part.t_client_ns.max() - part.t_client_ns.min()) / 1e9
        out["per_worker"].setdefault(worker, {})[f"{kind}_per_s"] = round(len(part) / span_s, 1) if span_s else None
        out["per_worker"][worker][f"{kind}_n"] = len(part)
    sent, recv = ev[ev.kind == "sent"], ev[ev.kind == "received"]
    out["total_sent"], out["total_received"] = len(sent), len(recv)
    out["never_received"] = len(set(sent.ledger_id) - set(recv.ledger_id))
    span_s = (recv.t_client_ns.max() - recv.t_client_ns.min()) / 1e9
    out["deliveries_per_s"] = round(len(recv) / span_s, 1)
    # The workers both send and receive: the CPU figure is for the whole workload, per delivery.
    out["worker_cpu_s"] = round(sum(cpu.seconds.values()), 2)
    out["worker_processes"] = len(cpu.seconds)
    out["deliveries_per_worker_cpu_s"] = round(len(recv) / out["worker_cpu_s"], 1) if out["worker_cpu_s"] else None
    return out


def _timed(fn: object, seconds: float = 2.0) -> float:
    """Calls of ``fn`` per second over about ``seconds``."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            fn()
        n += 100
    return n / (time.perf_counter() - t0)


def codec() -> dict:
    """Frames/s for a pop response's header (encode + decode) and stored messages/s decoded from a batch of
    32, one CPU, no network: the codec's own ceiling."""
    header = remoting.Command(code=0, flag=1, opaque=7, ext_fields={
        "popTime": "1795000000123", "invisibleTime": "60000", "reviveQid": "3", "restNum": "0",
        "startOffsetInfo": "0 1 10;0 2 11", "msgOffsetInfo": "0 1 10;0 2 11", "orderCountInfo": ""})
    record = stored("ThroughputTopic", b"x" * 100, {"UNIQ_KEY": "AC1100010000" * 2, "TAGS": "TagA", "KEYS": "k"})
    batch = record * 32
    frame = remoting.encode(remoting.Command(**{**header.__dict__, "body": batch}))[4:]
    return {
        "frames_encoded_decoded_per_s": round(_timed(lambda: remoting.decode(remoting.encode(header)[4:]))),
        "pop_responses_of_32_decoded_per_s": round(_timed(lambda: decode_batch(remoting.decode(frame).body))),
        "messages_decoded_per_s": round(32 * _timed(lambda: decode_batch(batch))),
    }


def main() -> None:
    out = {"scenario": "throughput", "codec": codec(), "protocols": {p: workload(p) for p in ("grpc", "remoting")}}
    g, r = (out["protocols"][p]["deliveries_per_worker_cpu_s"] for p in ("grpc", "remoting"))
    out["remoting_over_grpc_per_cpu_s"] = round(r / g, 2) if g and r else None
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
