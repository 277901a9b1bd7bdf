"""The local backend: per variant a name server, the brokers of the scenario's topology and a proxy, each
its own JVM (the first broker inside the proxy's when the proxy runs in local mode), with its own ports,
user.home, store and logs under one work directory.

A variant's directory holds ``state.json`` (ports, PIDs, command lines, owner token: harness.deploy.local.state)
while it is up, so a later command (`brokers status`, `brokers down`) finds and stops exactly those processes,
and a fault can start a process again as it was (harness.deploy.local.faults).
"""

from __future__ import annotations

import hashlib
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.client import remoting
from harness.contracts.endpoints import Endpoints
from harness.contracts.modules import ModuleJar
from harness.core import process
from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import REPO_ROOT
from harness.core.process import find_java
from harness.core.waiting import Deadline
from harness.deploy import readiness
from harness.deploy.agents import LOOPBACK_JAR, mounts_probe
from harness.deploy.base import Health, parse_properties
from harness.deploy.local import config, startup
from harness.deploy.local.distribution import Distribution
from harness.deploy.local.faults import LocalProcess
from harness.deploy.local.jars import distribution_for
from harness.deploy.local.ports import SlotLocks, VariantPorts, allocate
from harness.deploy.local.state import STATE_FILE, LocalVariant
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Variant

# How long a run's (attached) servers get between SIGTERM and SIGKILL when the run throws them away with their
# stores: none. A 5.3.3 proxy's shutdown hooks are fixed waits of its service threads (NettyEventExecutor's
# 3 s queue polls, PopBufferMergeService's 2 s, the revive threads'): idle, it exited 9.5 s after SIGTERM, its
# hook "consuming total time(ms): 8370", so a 5 s grace always ran out and bought only the first half of
# its shutdown log; the name server took 2.4 s. The run's logs are complete before the stop (its last events
# were received seconds before); only the shutdown's own lines are not written.
DISCARD_GRACE_S = 0.0


class LocalBackend:
    """Brokers as local processes. ``attached`` servers die with the harness process (used by runs);
    detached ones outlive it (`rmq-harness brokers up`) and are stopped by `down`."""

    def __init__(
        self,
        workdir: Path,
        attached: bool = False,
        ready_timeout_s: float = 180.0,
        log: Callable[[str], None] = print,
        stop_timeout_s: float = process.STOP_TIMEOUT_S,
        discard_grace_s: float = DISCARD_GRACE_S,
    ) -> None:
        self.workdir = workdir.expanduser().resolve()
        # RocketMQ's shutdown hooks take 10-20 s. ``stop_timeout_s``: the grace of a process that is kept (brokers
        # started by hand) or started again (a fault's restart); a run may cut it short.
        self.stop_timeout_s = stop_timeout_s
        # ``discard_grace_s``: the grace of attached servers thrown away with their stores (DISCARD_GRACE_S).
        self.discard_grace_s = discard_grace_s
        self.attached = attached
        self.ready_timeout_s = ready_timeout_s
        self.log = log
        # Owner tokens start with a digest of the work directory, so strays of this workdir can be
        # found from the process table even if their state file was lost.
        self.token_prefix = hashlib.sha1(str(self.workdir).encode()).hexdigest()[:12] + "/"
        self._agents: dict[str, dict[str, list[str]]] = {}
        self._modules: dict[str, list[ModuleJar]] = {}
        self._slots = SlotLocks()
        self._targets: dict[str, LocalVariant] = {}  # variant -> the state its fault targets share (process)

    # --- the Backend interface -------------------------------------------------------------

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        java = find_java()
        if not (REPO_ROOT / LOOPBACK_JAR).is_file():
            raise HarnessError(f"{LOOPBACK_JAR} not built: run `make setup` (builds broker-patches/)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        for v in variants:
            self._refuse_if_running(v.name)
            for agent in v.agents:
                if not agent.path().is_file():
                    raise ConfigError(
                        f"variant {v.name}: agent jar {agent.path()} not found; "
                        "build it (make setup) or fix agents[].jar"
                    )
        dists = {v.name: distribution_for(v.version, v.jars, self.log) for v in variants}
        for v in variants:  # a hybrid whose unlinked code a variant's setting would run: refused before any start
            dists[v.name].refuse_guarded(v.name, v.broker)
        self._modules.update({name: list(d.modules) for name, d in dists.items()})
        taken = [lv.ports.slot for lv in self._running()]
        slots = allocate(len(variants), taken_slots=taken, take=self._slots.take)
        started: list[LocalVariant] = []
        try:
            for v, ports in zip(variants, slots, strict=True):
                started.append(self._start(java, v, dists[v.name], ports, topology))
            deadline = Deadline(self.ready_timeout_s)
            for lv in started:
                self._start_rest(lv, deadline)
            for lv in started:
                self._wait_ready(lv)
        except BaseException:
            # Ctrl-C, a failed start or a crash: nothing half-started is left running.
            self._stop(started)
            raise
        return [lv.endpoints for lv in started]

    def endpoints(self) -> list[Endpoints]:
        return [lv.endpoints for lv in self._running()]

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        chosen = [lv for lv in self._states() if names is None or lv.name in names]
        self._stop(chosen)
        stopped = [lv.name for lv in chosen]
        # Processes of these variants whose state file is gone (e.g. the harness was killed mid-up).
        prefixes = [self.token_prefix] if names is None else [f"{self.token_prefix}{n}/" for n in names]
        strays = [t for prefix in prefixes for t in process.find_owned(prefix)]
        if strays:
            process.stop(strays)
            stopped.append(f"{len(strays)} stray process(es)")
        return stopped

    def collect(self, dest: Path, since: dict[Path, int] | None = None) -> None:
        """``since``: where each server output or log file began for this run (log_sizes when a campaign kept
        the brokers from an earlier run: harness.run.kept); only what was written after is copied."""
        # From the directories, not the state files, so logs can be collected after `down` too.
        if not self.workdir.is_dir():
            return
        since = since or {}

        def copy(src: str | Path, dst: str | Path) -> None:
            _copy_from(Path(src), Path(dst), since.get(Path(src), 0))

        for root in sorted(d for d in self.workdir.iterdir() if (d / "conf").is_dir()):
            dirs = config.VariantDirs(root)
            target = dest / root.name
            shutil.copytree(dirs.conf, target / "conf", dirs_exist_ok=True)
            for out in sorted(root.glob("*.out")):
                role = out.stem
                target.mkdir(parents=True, exist_ok=True)
                copy(out, target / out.name)
                logs = dirs.server_logs(role)
                if logs.is_dir():
                    shutil.copytree(logs, target / role, dirs_exist_ok=True, copy_function=copy)

    def log_sizes(self, name: str) -> dict[Path, int]:
        """The size now of every server output and log file of a variant (what collect's ``since`` takes)."""
        root = self.workdir / name
        dirs = config.VariantDirs(root)
        files = list(root.glob("*.out"))
        for logs in [dirs.server_logs(out.stem) for out in files]:
            if logs.is_dir():
                files += [f for f in logs.rglob("*") if f.is_file()]
        return {f: f.stat().st_size for f in files}

    def agent_report(self, name: str) -> dict[str, list[str]]:
        """What each agent printed so far: read again now, so lines printed while the load ran (a planted
        failure, harness.inputs.brokers.Plant) are in the manifest too; the start's check where the output
        is gone."""
        root = self.workdir / name
        if not (root / STATE_FILE).is_file():
            return self._agents.get(name, {})
        lv = LocalVariant.load(root)
        report: dict[str, list[str]] = {}
        several = len(config.node_names(lv.topology)) > 1
        for role in lv.processes:
            nodes = lv.brokers_in(role)
            if not nodes or not lv.dirs.stdout(role).is_file():
                continue
            output = lv.dirs.stdout(role).read_bytes().decode(errors="replace")
            for jar, lines in readiness.agent_report(output, [LOOPBACK_JAR, *lv.agents]).items():
                report[f"{nodes[0]}/{jar}" if several else jar] = lines
        return report or self._agents.get(name, {})

    def modules(self, name: str) -> list[ModuleJar]:
        return self._modules.get(name, [])

    def arm_plants(self, name: str) -> None:
        config.VariantDirs(self.workdir / name).plants_armed.touch()

    def process(self, name: str, target: str) -> LocalProcess:
        root = self.workdir / name
        if not (root / STATE_FILE).is_file():
            raise HarnessError(f"variant {name} is not up")
        # One state per variant for all its fault targets: a start records its new PID where the others' starts
        # read it (a proxy restarting waits for the name server another fault is starting again) and save it.
        lv = self._targets.get(name)
        if lv is None or lv.token != LocalVariant.load(root).token:
            lv = self._targets[name] = LocalVariant.load(root)
        proc = config.host_process(target, lv.topology)
        if proc not in lv.pids:
            raise ConfigError(f"variant {name} has no {target} (its processes: {', '.join(lv.pids)})")
        return LocalProcess(self, lv, target, proc)

    def broker_config(self, name: str) -> dict[str, str]:
        conf = config.VariantDirs(self.workdir / name).conf / "broker.conf"
        return parse_properties(conf.read_text()) if conf.is_file() else {}

    # --- status ----------------------------------------------------------------------------

    def status(self) -> list[Health]:
        out = []
        for lv in self._states():
            alive = lv.alive()
            ep = lv.endpoints
            if not all(alive.values()):
                dead = ", ".join(r for r, ok in alive.items() if not ok)
                out.append(Health(ep, False, f"{dead} not running"))
                continue
            problems = []
            try:
                info = remoting.cluster_info(ep.namesrv)
                problems += [f"{n.name} {n.address} not registered with the name server" for n in ep.brokers
                             if n.address not in info]
            except remoting.RemotingError as e:
                problems.append(f"name server: {e}")
            if not startup.tcp_open(ep.grpc):
                problems.append(f"gRPC {ep.grpc} not accepting connections")
            pids = " ".join(f"{r}={p}" for r, p in lv.pids.items())
            out.append(Health(ep, not problems, "; ".join(problems) or f"pids {pids}"))
        return out

    # --- internals -------------------------------------------------------------------------

    def _states(self) -> list[LocalVariant]:
        if not self.workdir.is_dir():
            return []
        return [LocalVariant.load(d) for d in sorted(self.workdir.iterdir()) if (d / STATE_FILE).is_file()]

    def _running(self) -> list[LocalVariant]:
        return [lv for lv in self._states() if any(lv.alive().values())]

    def _refuse_if_running(self, name: str) -> None:
        root = self.workdir / name
        if (root / STATE_FILE).is_file():
            lv = LocalVariant.load(root)
            if any(lv.alive().values()):
                raise HarnessError(
                    f"variant {name} is already up (gRPC {lv.endpoints.grpc}); "
                    f"run `rmq-harness brokers down --variant {name}` first"
                )
        if root.exists():
            # A stopped variant's directory (old store and logs) is scratch: start clean.
            shutil.rmtree(root)

    def _start(self, java: str, v: Variant, dist: Distribution, ports: VariantPorts,
               topology: Topology) -> LocalVariant:
        dirs = config.VariantDirs(self.workdir / v.name)
        files = config.write_configs(v, ports, dirs, topology)
        lv = LocalVariant(
            name=v.name,
            version=v.version,
            ports=ports,
            dirs=dirs,
            token=f"{self.token_prefix}{v.name}/{uuid.uuid4().hex[:8]}",
            pids={},
            started_at=time.time(),
            probe=mounts_probe(v),
            agents=[a.jar for a in v.agents],
            topology=topology,
        )
        lv.commands = config.commands(java, dist, v, ports, dirs, files, lv.token, topology)
        for role in lv.processes:
            if role == "proxy" and topology.proxy == "cluster":
                break  # it creates its system topics on the cluster at start: after the brokers (_wait_ready)
            startup.spawn(lv, role, die_with_parent=self.attached)
        pids = ", ".join(f"{role} {pid}" for role, pid in lv.pids.items())
        self.log(f"{v.name}: started RocketMQ {v.version}" + (f" ({dist.hybrid})" if dist.hybrid else "")
                 + f" ({pids})")
        return lv

    def _wait_ready(self, lv: LocalVariant) -> None:
        ep = lv.endpoints
        deadline = Deadline(self.ready_timeout_s)
        for role in lv.processes:
            startup.wait_process(lv, role, deadline)
        main = "proxy"
        alive = startup.alive_check(lv, main, "a send/pop round trip")
        rt = readiness.wait_serving(ep, "grpc", deadline, alive=alive, detail=lambda: lv.log_tail(main), warn=self.log)
        report: dict[str, list[str]] = {}
        for role in lv.processes:
            report.update(startup.check_agents(lv, role, offset=0))
        self._agents[lv.name] = report
        # Where start-up time goes: when each process served (since the first was started), then the round trip.
        marks = ", ".join(f"{r} {lv.served[r] - lv.started_at:.1f}" for r in lv.processes)
        total = time.time() - lv.started_at
        self.log(f"{lv.name}: ready in {total:.1f} s ({marks} s; round trip {rt.seconds * 1000:.0f} ms)")

    def _start_rest(self, lv: LocalVariant, deadline: Deadline) -> None:
        """Start the processes ``_start`` held back (a cluster-mode proxy) once those before them serve."""
        for role in lv.processes:
            if role not in lv.pids:
                startup.spawn_when_ready(lv, role, deadline, die_with_parent=self.attached)
                self.log(f"{lv.name}: brokers registered; started the {role} (pid {lv.pids[role]})")

    def _stop(self, variants: Sequence[LocalVariant]) -> None:
        if self.attached:
            # A run's servers are thrown away with their stores: every process of every variant at once.
            waves = [[r for lv in variants for r in lv.processes]]
        else:
            # Brokers someone started by hand: proxies first, then brokers, then name servers (all variants at
            # once), so a broker never loses its name server mid-shutdown.
            order = list(dict.fromkeys(r for lv in variants for r in reversed(lv.processes)))
            order.sort(key=lambda r: {"proxy": 0, "namesrv": 2}.get(r, 1))
            waves = [[r] for r in order]
        # A run's servers are thrown away with their stores: killed at once (DISCARD_GRACE_S), the plan, not news.
        # Brokers started by hand keep their stores: their shutdown hooks get the whole grace.
        grace = self.discard_grace_s if self.attached else self.stop_timeout_s
        for roles in waves:
            targets = [(lv.pids[r], lv.token) for lv in variants for r in dict.fromkeys(roles) if r in lv.pids]
            killed = process.stop(targets, grace)
            if killed and not self.attached:
                self.log(f"killed {'/'.join(dict.fromkeys(roles))} {killed}: no exit within "
                         f"{self.stop_timeout_s:.0f} s of SIGTERM")
        for lv in variants:
            (lv.dirs.root / STATE_FILE).unlink(missing_ok=True)
            self._slots.release(lv.ports.slot)


def _copy_from(src: Path, dst: Path, offset: int) -> None:
    """``src`` from byte ``offset`` on (all of it when it is shorter now: a rolled log file)."""
    if offset <= 0 or src.stat().st_size < offset:
        shutil.copy2(src, dst)
        return
    with src.open("rb") as fin, dst.open("wb") as fout:
        fin.seek(offset)
        shutil.copyfileobj(fin, fout)
