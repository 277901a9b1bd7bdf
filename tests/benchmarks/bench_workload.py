"""Benchmark of the Locust workers against a real 5.3.3 broker, with the Apache RocketMQ Java clients as the
references on the same broker and machine, protocol for protocol. Run by `make bench`; writes
bench-results/workload.json. Asserts nothing.

- drain: a backlog drained by pop consumers that ack every delivery (tests/benchmarks/drain.yaml): over gRPC
  through the proxy, the harness's workers with each gRPC client (official, native) against
  rocketmq-client-java 5.0.8's SimpleConsumers (tests/benchmarks/java-client: 8 threads, batches of 32, an
  async ack per delivery); over remoting, the harness's remoting worker against rocketmq-client 5.3.3's push
  consumer in pop mode (java-client/remoting: 8 consume threads, batches of 32, an ack per message). One
  worker process a side. Every drain lasts at least MIN_DRAIN_S (the JIT's warm-up is in the Java side's
  first seconds; the counts are sized for it, and a shorter one ends the bench). Deliveries/s and
  deliveries per client CPU-second, both over the window from the first delivery to the last, the CPU read
  from /proc for every client process alike (the harness's side: its Locust master and worker; sampled,
  interpolated at those two instants). Each protocol's pair (the Java client and the harness's fastest client)
  is drained REPEATS times, the two sides alternating, and reported as the median with every run beside it:
  one drain of each side moved 15-35% between runs (docs/benchmarks.md), too much to rest a ratio on.
- mixed: steady sends with one message in ten nacked once (tests/benchmarks/mixed.yaml), two workers beside
  the broker, over each protocol (gRPC with the native client): first saturating (the rate asked is more
  than they can send), then at 90% of the rate that reached, to see whether it is sustained (everything
  delivered, every retry redelivered, no growing lag).
- codec: the remoting codec's frames/s and decoded messages/s on this CPU.
- parity: the official and the native gRPC client on the same brokers at once (client-parity.yaml, 20 cycles: V1 retries
  waiting for 5 s polls on 5.3.3, and the fix's millisecond wakeups), compared: both should measure the same.
"""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import yaml

from harness.cli.main import main as cli
from harness.client import remoting
from harness.client.remoting_messages import decode_batch
from harness.contracts.workers import DEFAULT_GRPC_CLIENT, GRPC_CLIENTS
from harness.deploy.local import LocalBackend
from harness.inputs.variants import load_variants
from tests.commitlog import stored

HERE = Path(__file__).parent
JAVA_CLIENT = HERE / "java-client"  # the gRPC reference; its remoting/ module the remoting one
OUT = Path("bench-results") / "workload.json"
MIN_DRAIN_S = 30
# Messages in each drain: enough for MIN_DRAIN_S at the rate each client drained here (2 cores, 2026-11-28:
# remoting 13,820/s, official 1,590/s, native 11,610/s; Java gRPC 9,030/s, Java remoting 12,290/s).
DRAIN_COUNT = {"remoting": 450_000, "official": 50_000, "native": 400_000, "java-grpc": 300_000,
               "java-remoting": 400_000}
# Drains of each protocol's pair (Java, harness), alternating; RMQ_HARNESS_BENCH_REPEATS overrides.
REPEATS = int(os.environ.get("RMQ_HARNESS_BENCH_REPEATS", "3"))
# The harness client each protocol's ratio is taken for: the fastest per CPU-second.
PAIRED = {"grpc": "native", "remoting": "remoting"}
# The gRPC client of the mixed runs over gRPC: the fastest per CPU-second (see the drains).
MIXED_GRPC_CLIENT = "native"
# A mixed rate counts as sustained only if the consumers' median lag behind the sends ends under this.
LAG_KEPT_UP_MS = 2000


class CpuSeries:
    """Samples the CPU seconds (user + system, from /proc) of every process below this one that ``watched``
    accepts (by default the harness's client side: the Locust master and its workers, whose CPU is the
    harness's cost of the load): pid -> [(wall time ns, cpu s)], so the CPU spent between two instants can be
    read off."""

    def __init__(self, watched: Callable[[list[str]], bool] = lambda argv: "--worker" in argv or "--master" in argv,
                 interval_s: float = 0.2) -> None:
        self.samples: dict[int, list[tuple[int, float]]] = {}
        self._watched = watched
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(interval_s,), daemon=True)

    def _watch(self, interval_s: float) -> None:
        me = psutil.Process()
        while not self._stop.wait(interval_s):
            for p in me.children(recursive=True):
                try:
                    if self._watched(p.cmdline()):
                        t = p.cpu_times()
                        self.samples.setdefault(p.pid, []).append((time.time_ns(), t.user + t.system))
                except psutil.Error:
                    continue

    def between(self, start_ns: int, end_ns: int) -> float:
        """CPU seconds the watched processes spent from ``start_ns`` to ``end_ns`` (linear between samples)."""
        total = 0.0
        for series in self.samples.values():
            total += _at(series, end_ns) - _at(series, start_ns)
        return total

    def __enter__(self) -> CpuSeries:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _at(series: list[tuple[int, float]], t_ns: int) -> float:
    times = [t for t, _ in series]
    i = bisect.bisect_left(times, t_ns)
    if i == 0:
        return series[0][1]
    if i >= len(series):
        return series[-1][1]
    (t0, c0), (t1, c1) = series[i - 1], series[i]
    return c0 + (c1 - c0) * (t_ns - t0) / (t1 - t0)


def _rates(out: dict) -> dict:
    """The figures every drain gives, from its deliveries, seconds and CPU seconds. A drain that is not one (its
    sends still going when it began, or shorter than MIN_DRAIN_S) ends the bench: its ratio would claim what it
    did not measure (issue 51: a fresh machine's fill overlapped the drain and read 0.46x with only a flag)."""
    if out.get("sends_overlap_drain"):
        sys.exit(f"bench: the {out['client']} drain began before its burst was stored (sends overlapped it): not a "
                 "drain; nothing written")
    if out["seconds"] < MIN_DRAIN_S:
        sys.exit(f"bench: the {out['client']} drain lasted {out['seconds']} s, under {MIN_DRAIN_S} s (the JIT's "
                 "warm-up would weigh on it): raise its DRAIN_COUNT; nothing written")
    return {**out, "deliveries_per_s": round(out["deliveries"] / out["seconds"], 1),
            "deliveries_per_cpu_s": round(out["deliveries"] / out["cpu_s"], 1)}


def _scenario(base: str, tmp: Path, **changes: object) -> Path:
    data = yaml.safe_load((HERE / base).read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp / base
    path.write_text(yaml.safe_dump(data))
    return path


def _run(scenario: Path, runs: Path, grpc_client: str = DEFAULT_GRPC_CLIENT) -> tuple[object, CpuSeries]:
    """One harness run of ``scenario`` on unpatched 5.3.3: its events and the workers' CPU."""
    import pandas as pd

    with CpuSeries() as cpu:
        if cli(["run", "--variant", "unpatched", "--scenario", str(scenario), "--runs-dir", str(runs),
                "--grpc-client", grpc_client]) != 0:
            sys.exit(f"benchmark run of {scenario.name} failed")
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return pd.read_parquet(archive / "events" / "unpatched.parquet"), cpu


def harness_drain(client: str) -> dict:
    """One harness worker drains DRAIN_COUNT[client] messages on unpatched 5.3.3 (``client``: remoting, or a
    gRPC client), the burst stored before its consumers start."""
    count = DRAIN_COUNT[client]
    protocol, grpc_client = ("remoting", DEFAULT_GRPC_CLIENT) if client == "remoting" else ("grpc", client)
    with tempfile.TemporaryDirectory() as tmp:
        # The consumers start once the burst is stored (drain.yaml: consume.after_sends), however fast it fills.
        path = _scenario("drain.yaml", Path(tmp), protocol=protocol, workers=1, produce__count=count,
                         cycles__drain_timeout_s=round(count / 500 + 120))
        ev, cpu = _run(path, Path(tmp) / "runs", grpc_client)
    sent, recv, acked = (ev[ev.kind == k] for k in ("sent", "received", "acked"))
    first, last = int(recv.t_client_ns.min()), int(recv.t_client_ns.max())
    return _rates({
        "client": f"harness {protocol}" + (f" ({client})" if protocol == "grpc" else ""), "protocol": protocol,
        "worker_processes": 1, "messages": count, "deliveries": len(recv), "acked": len(acked),
        "never_received": len(set(sent.ledger_id) - set(recv.ledger_id)),
        "fill_per_s": round(len(sent) / ((sent.t_client_ns.max() - sent.t_client_ns.min()) / 1e9), 1),
        "sends_overlap_drain": bool(sent.t_client_ns.max() > first), "seconds": round((last - first) / 1e9, 2),
        # Messages per receive that returned any: per-call costs spread over fewer messages when it falls short.
        "batch_mean": round(len(recv) / recv.groupby(["consumer", "poll_started_ns"]).ngroups, 1),
        "cpu_s": round(cpu.between(first, last), 2)})  # the master's and the worker's


def _java(module: Path, main_class: str, *args: str) -> dict:
    """One run of a Java reference (its last stdout line, JSON), with its CPU from /proc between the first and
    the last delivery it reports (``first_epoch_ns``, ``last_epoch_ns``) as ``cpu_s``; its own reading of the
    JVM's CPU over the same window stays as ``jvm_cpu_s``."""
    cp = f"{module / 'target' / 'classes'}:{(module / 'target' / 'classpath.txt').read_text().strip()}"
    with tempfile.TemporaryDirectory() as logs, CpuSeries(lambda argv: main_class in argv) as cpu:
        out = subprocess.run(["java", "-Xmx1g", f"-Drocketmq.log.root={logs}", "-cp", cp, main_class, *args],
                             capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if "first_epoch_ns" in got:
        got["jvm_cpu_s"] = got.pop("cpu_s")
        got["cpu_s"] = round(cpu.between(got["first_epoch_ns"], got["last_epoch_ns"]), 2)
    return got


def java_drain(protocol: str) -> dict:
    """The Java client of ``protocol`` fills a topic and drains it on unpatched 5.3.3, started on its own."""
    module, main_class = {"grpc": (JAVA_CLIENT, "dev.rmqharness.bench.PopBench"),
                          "remoting": (JAVA_CLIENT / "remoting", "dev.rmqharness.bench.RemotingPopBench")}[protocol]
    subprocess.run(["mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(module / "pom.xml"), "package"], check=True,
                   env={**os.environ, "MAVEN_OPTS": "-Djansi.noreset=true"})  # no stray ANSI resets
    count = DRAIN_COUNT[f"java-{protocol}"]
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp), log=lambda s: None)
        [ep] = backend.up([dict(load_variants())["unpatched"]])
        try:
            remoting.create_topic(ep.broker, "JavaDrainTopic", queues=8)
            remoting.create_group(ep.broker, "JavaDrainGroup")
            at = ep.grpc if protocol == "grpc" else ep.namesrv
            fill = _java(module, main_class, "fill", at, "JavaDrainTopic", str(count))
            d = _java(module, main_class, "drain", at, "JavaDrainTopic", "JavaDrainGroup", str(count), "8", "32")
        finally:
            backend.down()
    client = {"grpc": "rocketmq-client-java 5.0.8 (gRPC, SimpleConsumer)",
              "remoting": "rocketmq-client 5.3.3 (remoting, push consumer in pop mode)"}[protocol]
    return _rates({"client": client, "protocol": protocol, "messages": count, "fill": fill, **d})


def mixed(rate: float, protocol: str) -> dict:
    """Two workers at ``rate`` sends/s with one message in ten nacked once: what was sent, delivered and
    redelivered, per second of the sending window, and the first deliveries' lag behind their sends."""
    producers = yaml.safe_load((HERE / "mixed.yaml").read_text())["produce"]["producers"]
    with tempfile.TemporaryDirectory() as tmp:
        # The scenario's rate is each producer's.
        path = _scenario("mixed.yaml", Path(tmp), protocol=protocol, produce__rate=round(rate / producers, 1))
        ev, cpu = _run(path, Path(tmp) / "runs", MIXED_GRPC_CLIENT if protocol == "grpc" else DEFAULT_GRPC_CLIENT)
    sent, recv = ev[ev.kind == "sent"], ev[ev.kind == "received"]
    nacked, acked = ev[ev.kind == "nacked"], ev[ev.kind == "acked"]
    t0, t1 = int(sent.t_client_ns.min()), int(sent.t_client_ns.max())
    window_s = (t1 - t0) / 1e9
    firsts = recv[recv.delivery_attempt == 1].merge(sent[["ledger_id", "t_client_ns"]], on="ledger_id",
                                                     suffixes=("", "_sent"))
    lag_ms = (firsts.t_client_ns - firsts.t_client_ns_sent) / 1e6
    fifth = ((firsts.t_client_ns_sent - t0) * 5 // (t1 - t0 + 1)).clip(0, 4)
    lag_by_fifth = [round(float(lag_ms[fifth == k].median()), 1) for k in range(5)]
    retried = set(recv[recv.delivery_attempt > 1].ledger_id)
    out = {
        "rate_asked": rate, "sent": len(sent), "sent_per_s": round(len(sent) / window_s, 1),
        "deliveries": len(recv), "acked": len(acked), "nacked": len(nacked),
        "never_received": len(set(sent.ledger_id) - set(recv.ledger_id)),
        "nacked_never_redelivered": len(set(nacked.ledger_id) - retried),
        "deliveries_per_s": round(len(recv) / window_s, 1),
        "lag_ms_p50_by_fifth_of_the_sends": lag_by_fifth,
        "worker_cpu_s": round(cpu.between(t0, t1), 2),
    }
    # Sustained: it sent what was asked, delivered everything, and the consumers kept up: their lag behind
    # the sends did not grow over the second half and stood under LAG_KEPT_UP_MS at the end.
    out["sustained"] = bool(out["sent_per_s"] >= 0.95 * rate and out["never_received"] == 0
                            and out["nacked_never_redelivered"] == 0
                            and lag_by_fifth[4] <= lag_by_fifth[2] + 1000 and lag_by_fifth[4] < LAG_KEPT_UP_MS)
    return out


def mixed_ceiling(protocol: str) -> dict:
    """The saturating run, then rates from 90% of what it sent down by a quarter each time until one is
    sustained (at most five tries)."""
    saturating = mixed(20_000, protocol)
    tries = []
    rate = round(0.9 * saturating["sent_per_s"], -1)
    for _ in range(5):
        tries.append(mixed(rate, protocol))
        if tries[-1]["sustained"]:
            break
        rate = round(0.75 * rate, -1)
    best = next((t["rate_asked"] for t in tries if t["sustained"]), None)
    return {"protocol": protocol, "grpc_client": MIXED_GRPC_CLIENT if protocol == "grpc" else None,
            "saturating": saturating, "tries": tries, "sustained_rate": best}


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


# The two scales a gRPC client must measure alike: 5.3.3's V1 stall (a retry waits for a 5 s poll to run out:
# seconds) and the fix's wakeup (milliseconds).
PARITY_VARIANTS = ("unpatched", "patched")


def parity() -> dict:
    """Per PARITY_VARIANTS, the official and the native gRPC client measure one cluster at once (two runs of
    client-parity.yaml, each a variant naming the same brokers as an external cluster), then the comparison between
    them: its verdict and interval, and each side's cycle levels."""
    return {v: _parity_on(v) for v in PARITY_VARIANTS}


def _parity_on(variant: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        backend = LocalBackend(work / "brokers", log=lambda s: None)
        [ep] = backend.up([dict(load_variants())[variant]])
        try:
            cluster = f"{{endpoints: {{namesrv: '{ep.namesrv}', proxy: '{ep.grpc}'}}}}"
            variants = work / "variants.yaml"
            variants.write_text(f"variants:\n  via-official: {cluster}\n  via-native: {cluster}\n")
            runs = {c: work / c for c in ("official", "native")}
            procs = [subprocess.Popen([sys.executable, "-m", "harness.cli.main", "--variants", str(variants), "run",
                                       "--variant", f"via-{c}", "--grpc-client", c, "--runs-dir", str(runs[c]),
                                       "--scenario", str(HERE / "client-parity.yaml")], stdout=subprocess.DEVNULL)
                     for c in runs]
            if any(p.wait() != 0 for p in procs):
                sys.exit(f"a parity run on {variant} failed")
        finally:
            backend.down()
        archives = [next(p for p in runs[c].iterdir() if not p.name.startswith(".")) for c in runs]
        out = work / "report"
        if cli(["compare", *map(str, archives), "--baseline", "via-official", "--candidate", "via-native",
                "--out", str(out)]) != 0:
            sys.exit(f"the parity comparison on {variant} failed")
        summary = json.loads((out / "summary.json").read_text())
    return {"verdict": summary["verdict"], "comparisons": [
        {k: c.get(k) for k in ("metric", "n_baseline", "n_candidate", "median_baseline", "median_candidate", "ci",
                               "detectable", "verdict")} for c in summary["comparisons"]]}


def ratios(java: dict, harness: list[dict]) -> dict:
    """Per protocol, each harness client's deliveries per CPU-second over the Java client's of that protocol
    (medians of their repeated drains)."""
    return {proto: {d["client"]: round(d["deliveries_per_cpu_s"] / java[proto]["deliveries_per_cpu_s"], 3)
                    for d in harness if d["protocol"] == proto} for proto in java}


def median_of(runs: list[dict]) -> dict:
    """Repeated drains of one client as one: the median's rates, with each run's beside them (``runs``)."""
    import statistics

    if len(runs) == 1:
        return runs[0]
    keys = ("deliveries_per_s", "deliveries_per_cpu_s")
    return {**runs[0], **{k: round(statistics.median(r[k] for r in runs), 1) for k in keys},
            "repeats": len(runs),
            "runs": [{k: r[k] for k in ("deliveries", "seconds", "cpu_s", *keys) if k in r} for r in runs]}


def paired_drains(protocol: str, repeats: int) -> tuple[dict, dict]:
    """The Java client of ``protocol`` and the harness's PAIRED client, ``repeats`` drains each, alternating
    (Java first): (Java's, the harness's), each as median_of its runs, with the ratio of each pair run
    back to back in the harness's (``pair_ratios``)."""
    java, harness = [], []
    for _ in range(repeats):
        java.append(java_drain(protocol))
        harness.append(harness_drain(PAIRED[protocol]))
    out = median_of(harness)
    out["pair_ratios"] = [round(h["deliveries_per_cpu_s"] / j["deliveries_per_cpu_s"], 3)
                          for j, h in zip(java, harness, strict=True)]
    return median_of(java), out


def main() -> None:
    # RMQ_HARNESS_BENCH_ONLY=drain,java re-measures some parts and keeps the rest of the last results (parts:
    # codec, java, drain, mixed, mixed-grpc, parity).
    parts = os.environ.get("RMQ_HARNESS_BENCH_ONLY")
    only = set((parts or "codec,java,drain,mixed,mixed-grpc,parity").split(","))
    out: dict = json.loads(OUT.read_text()) if parts and OUT.exists() else {}
    out["cpus"] = os.cpu_count()
    if "codec" in only:
        out["codec"] = codec()
    if "java" in only and "drain" in only:
        pairs = {p: paired_drains(p, REPEATS) for p in ("grpc", "remoting")}
        out["java_drain"] = {p: java for p, (java, _) in pairs.items()}
        out["drain"] = [pairs["remoting"][1], *(pairs["grpc"][1] if c == PAIRED["grpc"] else harness_drain(c)
                                                 for c in GRPC_CLIENTS)]
    elif "java" in only:
        out["java_drain"] = {p: java_drain(p) for p in ("grpc", "remoting")}
    elif "drain" in only:
        out["drain"] = [harness_drain(c) for c in ("remoting", *GRPC_CLIENTS)]
    if "mixed" in only:
        out["mixed"] = mixed_ceiling("remoting")
    if "mixed-grpc" in only:
        out["mixed_grpc"] = mixed_ceiling("grpc")
    if "parity" in only:
        out["grpc_client_parity"] = parity()
    if isinstance(out.get("java_drain"), dict) and "grpc" in out["java_drain"] and "drain" in out:
        out["harness_over_java_per_cpu_s"] = ratios(out["java_drain"], out["drain"])
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
