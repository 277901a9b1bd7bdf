"""What the processes a run started on this machine took of its CPU while the load ran.

A rate the producers did not reach, or latencies that grew with the load, are the brokers' doing only if the
load generator and the machine had CPU to spare. So while Locust runs, every second, the CPU time of each
process this one started (brokers, name servers, proxies, Locust masters and workers, Prometheus), and its own, is read
(psutil), grouped by kind and variant, and kept as running sums: memory stays flat however long the run.
A Locust process runs its users on one Python thread, so it has run out at one core, whatever the machine has.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.core.process import started_at
from harness.run.hooks import Hook, RunState

SAMPLE_S = 1.0
# Means over this many seconds; the busiest of them is the peak (a short burst of CPU is not a limit).
PEAK_WINDOW_S = 10.0
# At this share of what it can use (one core for a Locust process, all cores for the machine), on average over
# the load, it ran out. The mean, not the peak: the first seconds of load (JIT compilation, users spawning) are
# busier than the rest, and a limit that binds only then is not where a rate breaks.
RAN_OUT = 0.9
SERVERS, LOAD, PROMETHEUS, HARNESS, OTHER = "servers", "load generator", "prometheus", "harness", "other"
_LAUNCH = "harness.workload.launch"
# A RocketMQ server JVM runs org.apache.rocketmq.<module>.<Role>Startup (NamesrvStartup, BrokerStartup,
# ProxyStartup) whoever started it; its role is the class's name without "Startup".
_ROCKETMQ = "org.apache.rocketmq."


def classify(cmdline: Sequence[str], cwd: str, variants: Sequence[str]) -> tuple[str, str | None, str]:
    """(kind, variant or None, role) of one process from its command line and working directory: a RocketMQ
    JVM by its main class (its variant from its user.home, ``<variant>/<process>``), a Locust process by the
    harness's launcher (its variant from its working directory, ``locust/<variant>``)."""
    args = list(cmdline)
    main = next((a for a in args if a.startswith(_ROCKETMQ) and a.endswith("Startup")), None)
    if main is not None:
        home = next((a.split("=", 1)[1] for a in args if a.startswith("-Duser.home=")), "")
        owner = Path(home).parent.name if home else ""
        return SERVERS, owner if owner in variants else None, main.rsplit(".", 1)[1][: -len("Startup")].lower()
    if _LAUNCH in args:
        owner = Path(cwd).name if cwd else ""
        role = "worker" if "--worker" in args else "master"
        return LOAD, owner if owner in variants else None, role
    if args and Path(args[0]).name.startswith("prometheus"):
        return PROMETHEUS, None, "prometheus"
    return OTHER, None, Path(args[0]).name if args else "?"


@dataclass
class _GroupCpu:
    """Running CPU figures of one group: core-seconds in all, and the busiest PEAK_WINDOW_S mean."""

    core_s: float = 0.0
    window_core_s: float = 0.0
    window_wall_s: float = 0.0
    peak: float = 0.0

    def add(self, core_s: float, wall_s: float) -> None:
        self.core_s += core_s
        self.window_core_s += core_s
        self.window_wall_s += wall_s
        if self.window_wall_s >= PEAK_WINDOW_S:
            self.peak = max(self.peak, self.window_core_s / self.window_wall_s)
            self.window_core_s = self.window_wall_s = 0.0

    def figures(self, wall_s: float) -> dict[str, float]:
        peak = self.peak if self.peak else (self.window_core_s / self.window_wall_s if self.window_wall_s else 0.0)
        return {"mean_cores": round(self.core_s / wall_s, 3) if wall_s else 0.0, "peak_cores": round(peak, 3)}


@dataclass
class CpuSampler:
    """Samples the CPU of this process and its descendants between ``start()`` and ``stop()``; ``result()`` then."""

    variants: Sequence[str]
    root: int = field(default_factory=os.getpid)
    interval_s: float = SAMPLE_S

    def __post_init__(self) -> None:
        self.cores = psutil.cpu_count() or 1
        self.groups: dict[tuple[str, str], _GroupCpu] = {}  # (kind, variant or "") -> use
        self.processes: dict[str, _GroupCpu] = {}  # "<variant> <role> <pid>" of each Locust process -> use
        self.machine = _GroupCpu()
        self.wall_s = 0.0
        self._seen: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds at the last sample
        self._labels: dict[tuple[int, float], tuple[str, str | None, str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False

    def start(self, skip_s: float = 0.0) -> None:
        """Sample from ``skip_s`` seconds on (e.g. once the producers start: what Locust's start-up takes is not
        the load's), in a thread, until ``stop()``."""
        self._thread = threading.Thread(target=self._loop, args=(skip_s,), name="cpu-sampler", daemon=True)
        self._thread.start()

    def _baseline(self) -> None:
        """Only CPU used from now on counts."""
        self._last_wall = time.monotonic()
        self._last_machine = self._machine_busy_s()
        self._seen = self._read()
        self._started = True

    def stop(self) -> dict:
        """Stop sampling (again, or before a start: nothing happens) and return ``result()``."""
        if self._thread is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=5 * self.interval_s)
            if self._started:
                self.sample()
        return self.result()

    def _loop(self, skip_s: float) -> None:
        if self._stop.wait(skip_s):
            return
        self._baseline()
        while not self._stop.wait(self.interval_s):
            self.sample()

    @staticmethod
    def _machine_busy_s() -> tuple[float, float]:
        """The machine's busy and all CPU-seconds since boot (every core): its busy share is the one's step over the
        other's, both read from one set of counters. Over the sampler's own clock it is not: the kernel's ticks and
        this process's wake-ups drift apart by a tick, and a saturated machine read 100.1 % busy (make test,
        2026-12-07)."""
        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0), sum(t)

    def _read(self) -> dict[tuple[int, float], float]:
        """CPU seconds of every live descendant now; new ones labelled (and counted from zero)."""
        try:
            me = psutil.Process(self.root)
            procs = [me, *me.children(recursive=True)]
        except psutil.Error:
            return {}
        now: dict[tuple[int, float], float] = {}
        for p in procs:
            try:
                with p.oneshot():
                    key = (p.pid, started_at(p.pid))  # since boot: a step of the clock moves psutil's
                    t = p.cpu_times()
                    # A child caught between fork and exec still shows its parent's command line: what is
                    # not known yet is asked again.
                    if p.pid == self.root:  # the run itself: progress, faults, merging events
                        self._labels[key] = (HARNESS, None, "harness")
                    elif self._labels.get(key, (OTHER,))[0] == OTHER:
                        self._labels[key] = classify(p.cmdline(), p.cwd(), self.variants)
                now[key] = t.user + t.system
            except psutil.Error:  # exited meanwhile: its last interval is lost, a second at most
                continue
        return now

    def sample(self) -> None:
        wall = time.monotonic()
        dt, self._last_wall = wall - self._last_wall, wall
        if dt <= 0:
            return
        busy, total = self._machine_busy_s()
        busy_then, total_then = self._last_machine
        share = max(0.0, busy - busy_then) / (total - total_then) if total > total_then else 0.0
        self.machine.add(share * self.cores * dt, dt)
        self._last_machine = (busy, total)
        self.wall_s += dt
        now = self._read()
        used: dict[tuple[str, str], float] = {}
        for key, cpu_s in now.items():
            kind, variant, role = self._labels[key]
            delta = max(0.0, cpu_s - self._seen.get(key, 0.0))
            used[(kind, variant or "")] = used.get((kind, variant or ""), 0.0) + delta
            if kind == LOAD:
                self.processes.setdefault(f"{variant or '?'} {role} {key[0]}", _GroupCpu()).add(delta, dt)
        for group in set(used) | set(self.groups):
            self.groups.setdefault(group, _GroupCpu()).add(used.get(group, 0.0), dt)
        # Gone processes are forgotten (a run's many short-lived children must not grow this).
        self._seen = now
        self._labels = {k: v for k, v in self._labels.items() if k in now}

    def result(self) -> dict:
        """The run's CPU: the machine's busy share, per kind (and per variant) mean and peak cores, the busiest
        Locust process, and which of them ran out (harness.run.cpu.ran_out)."""
        w = self.wall_s
        kinds: dict[str, _GroupCpu] = {}
        for (kind, _), use in self.groups.items():
            k = kinds.setdefault(kind, _GroupCpu())
            k.core_s += use.core_s
            k.peak += use.peak  # peaks of different variants need not coincide: an upper bound
        machine = self.machine.figures(w)
        out = {
            "cores": self.cores, "sampled_s": round(w, 1), "sample_s": self.interval_s,
            "machine": {"mean_busy": round(machine["mean_cores"] / self.cores, 3),
                        "peak_busy": round(machine["peak_cores"] / self.cores, 3)},
            "kinds": {k: u.figures(w) for k, u in sorted(kinds.items())},
            "variants": {},
            "busiest_locust_process": None,
        }
        for (kind, variant), use in sorted(self.groups.items()):
            if variant:
                out["variants"].setdefault(variant, {})[kind] = use.figures(w)
        if self.processes:
            name, use = max(self.processes.items(), key=lambda kv: kv[1].core_s)
            out["busiest_locust_process"] = {"process": name, **use.figures(w)}
        out["ran_out"] = ran_out(out)
        return out


def ran_out(cpu: dict) -> dict[str, object]:
    """Whose CPU ran out in a run (``CpuSampler.result()``): the load generator (its busiest Locust process at
    RAN_OUT of a core), the machine (RAN_OUT of its cores busy; then who took the most), or none; and one line."""
    if not cpu.get("sampled_s"):
        return {"load_generator": None, "machine": None, "line": "CPU not measured"}
    busiest = cpu.get("busiest_locust_process") or {}
    load = busiest.get("mean_cores", 0.0) >= RAN_OUT
    machine = cpu["machine"]["mean_busy"] >= RAN_OUT
    kinds = cpu.get("kinds", {})
    by_use = sorted(kinds.items(), key=lambda kv: -kv[1]["mean_cores"])
    shares = ", ".join(f"{k} {v['mean_cores']:.2f}" for k, v in by_use)
    parts = []
    if load:
        parts.append(f"the load generator ran out of CPU (Locust {busiest['process']} at {busiest['mean_cores']:.2f} "
                     "of its one core)")
    if machine:
        top = max(kinds.items(), key=lambda kv: kv[1]["mean_cores"])[0] if kinds else "?"
        parts.append(f"the machine ran out of CPU ({cpu['machine']['mean_busy']:.0%} of {cpu['cores']} cores busy; "
                     f"{top} took the most)")
    if not parts:
        parts.append(f"no CPU ran out (machine {cpu['machine']['mean_busy']:.0%} busy, the busiest Locust process "
                     f"{busiest.get('mean_cores', 0.0):.2f} of a core)")
    return {"load_generator": load, "machine": machine,
            "line": "; ".join(parts) + f"; mean cores: {shares or 'none sampled'} (peak machine "
                    f"{cpu['machine']['peak_busy']:.0%} over {PEAK_WINDOW_S:g} s)"}


class CpuSampling(Hook):
    """The CPU of the run's processes while the load runs, from the producers' start (what Locust's start-up takes
    is not the load's): resources/cpu.json in the archive, one line in the log, ``run.cpu`` for campaigns."""

    def __init__(self, variants: Sequence[str]) -> None:
        self.sampler = CpuSampler(variants)

    def load_started(self, run: RunState) -> None:
        self.sampler.start(skip_s=run.scenario.produce.delay_s)

    def load_ended(self, run: RunState) -> None:
        run.cpu = self.sampler.stop()
        (run.staging.dir("resources") / "cpu.json").write_text(json.dumps(run.cpu, indent=2) + "\n")
        run.log(f"CPU while the load ran: {run.cpu['ran_out']['line']}")

    def failed(self, run: RunState, error: BaseException) -> None:
        self.sampler.stop()
