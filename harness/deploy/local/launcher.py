"""The local backend: per variant a name server, the brokers of the scenario's topology and a proxy, each
its own JVM (the first broker inside the proxy's when the proxy runs in local mode), with its own ports,
user.home, store and logs under one work directory.

A variant's directory holds ``state.json`` (ports, PIDs, command lines, owner token) while it is up, so a
later command (`brokers status`, `brokers down`) finds and stops exactly those processes, and a fault can
start a process again as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.client import remoting
from harness.contracts.endpoints import BrokerNode, Endpoints
from harness.contracts.modules import ModuleJar
from harness.core import process
from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import REPO_ROOT
from harness.core.process import find_java
from harness.core.waiting import Deadline, Pending, wait_until
from harness.deploy import readiness
from harness.deploy.base import Health, parse_properties
from harness.deploy.local import config
from harness.deploy.local.distribution import Distribution
from harness.deploy.local.jars import distribution_for
from harness.deploy.local.ports import SlotLocks, VariantPorts, allocate
from harness.inputs.scenario import SINGLE, Topology
from harness.inputs.variants import LOOPBACK_JAR, Variant, mounts_probe

STATE_FILE = "state.json"
# How long a run's (attached) servers get between SIGTERM and SIGKILL when the run throws them away with their
# stores: none. A 5.3.3 proxy's shutdown hooks are fixed waits of its service threads (NettyEventExecutor's
# 3 s queue polls, PopBufferMergeService's 2 s, the revive threads'): idle, it exited 9.5 s after SIGTERM, its
# hook "consuming total time(ms): 8370", so a 5 s grace always ran out and bought only the first half of
# its shutdown log; the name server took 2.4 s. The run's logs are complete before the stop (its last events
# were received seconds before); only the shutdown's own lines are not written.
DISCARD_GRACE_S = 0.0


def tcp_open(address: str, timeout_s: float = 0.5) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


@dataclass
class LocalVariant:
    """One variant on this machine: its settings, ports, directory and processes."""

    name: str
    version: str
    ports: VariantPorts
    dirs: config.VariantDirs
    token: str
    pids: dict[str, int]
    started_at: float
    probe: bool = False
    agents: list[str] = field(default_factory=list)  # the variant's agent jars, as the variant names them
    topology: Topology = SINGLE
    commands: dict[str, list[str]] = field(default_factory=dict)  # process -> its command line, as started

    @property
    def processes(self) -> tuple[str, ...]:
        return config.processes(self.topology)

    def node_address(self, node: str) -> str:
        return f"{config.LOOPBACK}:{self.ports.node(node).listen}"

    @property
    def endpoints(self) -> Endpoints:
        lo = config.LOOPBACK
        nodes = tuple(
            BrokerNode(n, self.node_address(n), f"http://{lo}:{self.ports.node(n).metrics}/metrics",
                       f"http://{lo}:{self.ports.node(n).probe}/metrics" if self.probe else "", master=n != "slave")
            for n in config.node_names(self.topology))
        return Endpoints(
            variant=self.name,
            version=self.version,
            grpc=f"{lo}:{self.ports.grpc}",
            remoting=f"{lo}:{self.ports.proxy_remoting}",
            broker=nodes[0].address,
            namesrv=f"{lo}:{self.ports.namesrv}",
            metrics=nodes[0].metrics,
            probe=nodes[0].probe,
            nodes=nodes if len(nodes) > 1 else (),
        )

    def save(self) -> None:
        state = {
            "name": self.name,
            "version": self.version,
            "ports": self.ports.as_dict(),
            "token": self.token,
            "pids": self.pids,
            "started_at": self.started_at,
            "probe": self.probe,
            "agents": self.agents,
            "topology": self.topology.model_dump(),
            "commands": self.commands,
        }
        tmp = self.dirs.root / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.dirs.root / STATE_FILE)

    @classmethod
    def load(cls, root: Path) -> LocalVariant:
        s = json.loads((root / STATE_FILE).read_text())
        return cls(
            name=s["name"],
            version=s["version"],
            ports=VariantPorts(**s["ports"]),
            dirs=config.VariantDirs(root),
            token=s["token"],
            pids={k: int(v) for k, v in s["pids"].items()},
            started_at=s["started_at"],
            probe=s.get("probe", False),
            agents=s.get("agents", []),
            topology=Topology.model_validate(s.get("topology", {})),
            commands=s.get("commands", {}),
        )

    def alive(self) -> dict[str, bool]:
        return {role: process.alive(pid, self.token) for role, pid in self.pids.items()}

    def log_tail(self, role: str) -> str:
        out = tail(self.dirs.stdout(role))
        name = {"namesrv": "namesrv.log", "proxy": "proxy.log"}.get(role, "broker.log")
        main_log = self.dirs.server_logs(role) / name
        errors = [ln for ln in tail(main_log, 400).splitlines() if "ERROR" in ln or "Exception" in ln]
        parts = [f"--- {self.dirs.stdout(role)} (last lines) ---\n{out}" if out else ""]
        if errors:
            parts.append(f"--- {main_log} (last errors) ---\n" + "\n".join(errors[-10:]))
        return "\n".join(p for p in parts if p)


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
        self._served: dict[tuple[str, str], float] = {}  # (variant, process) -> when it first served
        self._slots = SlotLocks()

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

    def collect(self, dest: Path) -> None:
        # From the directories, not the state files, so logs can be collected after `down` too.
        if not self.workdir.is_dir():
            return
        for root in sorted(d for d in self.workdir.iterdir() if (d / "conf").is_dir()):
            dirs = config.VariantDirs(root)
            target = dest / root.name
            shutil.copytree(dirs.conf, target / "conf", dirs_exist_ok=True)
            for out in sorted(root.glob("*.out")):
                role = out.stem
                shutil.copy2(out, target / out.name)
                logs = dirs.server_logs(role)
                if logs.is_dir():
                    shutil.copytree(logs, target / role, dirs_exist_ok=True)

    def agent_report(self, name: str) -> dict[str, list[str]]:
        """What each agent printed so far: read again now, so lines printed while the load ran (a planted
        failure, harness.inputs.scenario.Plant) are in the manifest too; the start's check where the output
        is gone."""
        root = self.workdir / name
        if not (root / STATE_FILE).is_file():
            return self._agents.get(name, {})
        lv = LocalVariant.load(root)
        report: dict[str, list[str]] = {}
        several = len(config.node_names(lv.topology)) > 1
        for role in lv.processes:
            nodes = self._brokers_in(lv, role)
            if not nodes or not lv.dirs.stdout(role).is_file():
                continue
            output = lv.dirs.stdout(role).read_bytes().decode(errors="replace")
            for jar, lines in readiness.agent_report(output, [LOOPBACK_JAR, *lv.agents]).items():
                report[f"{nodes[0]}/{jar}" if several else jar] = lines
        return report or self._agents.get(name, {})

    def modules(self, name: str) -> list[ModuleJar]:
        return self._modules.get(name, [])

    def process(self, name: str, target: str) -> LocalProcess:
        root = self.workdir / name
        if not (root / STATE_FILE).is_file():
            raise HarnessError(f"variant {name} is not up")
        lv = LocalVariant.load(root)
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
            if not tcp_open(ep.grpc):
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
        self._served = {k: t for k, t in self._served.items() if k[0] != v.name}
        for role in lv.processes:
            if role == "proxy" and topology.proxy == "cluster":
                break  # it creates its system topics on the cluster at start: after the brokers (_wait_ready)
            self._spawn(lv, role)
        pids = ", ".join(f"{role} {pid}" for role, pid in lv.pids.items())
        self.log(f"{v.name}: started RocketMQ {v.version}" + (f" ({dist.hybrid})" if dist.hybrid else "")
                 + f" ({pids})")
        return lv

    def _spawn(self, lv: LocalVariant, role: str) -> int:
        home = lv.dirs.home(role)
        # Some RocketMQ code reads $HOME rather than user.home (e.g. client-side logs).
        env = {**os.environ, "HOME": str(home), "ROCKETMQ_HOME": str(lv.dirs.rocketmq_home)}
        (lv.dirs.root / f"{role}.cmd").write_text(" ".join(lv.commands[role]) + "\n")
        lv.pids[role] = process.spawn(lv.commands[role], lv.dirs.stdout(role), cwd=home, env=env,
                                      die_with_parent=self.attached)
        lv.save()  # after each spawn, so a crash right here still leaves its PID findable
        return lv.pids[role]

    def _brokers_in(self, lv: LocalVariant, role: str) -> list[str]:
        """The broker nodes a process runs: itself, or the first broker inside a local-mode proxy."""
        if role in config.node_names(lv.topology):
            return [role]
        return ["broker"] if role == "proxy" and lv.topology.proxy == "local" else []

    def _wait_ready(self, lv: LocalVariant) -> None:
        ep = lv.endpoints
        deadline = Deadline(self.ready_timeout_s)
        for role in lv.processes:
            self._wait_process(lv, role, deadline)
        main = "proxy"
        alive = self._alive_check(lv, main, "a send/pop round trip")
        rt = readiness.wait_serving(ep, "grpc", deadline, alive=alive, detail=lambda: lv.log_tail(main), warn=self.log)
        report: dict[str, list[str]] = {}
        for role in lv.processes:
            report.update(self._check_agents(lv, role, offset=0))
        self._agents[lv.name] = report
        # Where start-up time goes: when each process served (since the first was started), then the round trip.
        marks = ", ".join(f"{r} {self._served[(lv.name, r)] - lv.started_at:.1f}" for r in lv.processes)
        total = time.time() - lv.started_at
        self.log(f"{lv.name}: ready in {total:.1f} s ({marks} s; round trip {rt.seconds * 1000:.0f} ms)")

    def _start_rest(self, lv: LocalVariant, deadline: Deadline) -> None:
        """Start the processes ``_start`` held back (a cluster-mode proxy) once those before them serve."""
        for role in lv.processes:
            if role not in lv.pids:
                self._spawn_when_ready(lv, role, deadline)
                self.log(f"{lv.name}: brokers registered; started the {role} (pid {lv.pids[role]})")

    def _spawn_when_ready(self, lv: LocalVariant, role: str, deadline: Deadline) -> int:
        """Start ``role``; a cluster-mode proxy only once every process before it serves: it creates its system
        topics on the cluster at start and exits when no broker is registered (after a name server restart,
        brokers register again only at their next heartbeat, up to 30 s later)."""
        if role == "proxy" and lv.topology.proxy == "cluster":
            for before in lv.processes[: lv.processes.index(role)]:
                self._wait_process(lv, before, deadline)
        return self._spawn(lv, role)

    def _alive_check(self, lv: LocalVariant, role: str, what: str) -> Callable[[], None]:
        def check() -> None:
            if not process.alive(lv.pids[role], lv.token):
                raise HarnessError(f"{lv.name}: the {role} process exited during start-up while waiting for {what}",
                                   detail=lv.log_tail(role))
        return check

    def _wait_process(self, lv: LocalVariant, role: str, deadline: Deadline) -> None:
        """Until ``role`` serves: the name server listens; a broker is registered with the name server; the
        proxy's gRPC port listens (with the broker inside, once that is registered)."""
        ep = lv.endpoints

        def registered(node: str) -> Callable[[], bool]:
            def check() -> bool:
                try:
                    return lv.node_address(node) in remoting.cluster_info(ep.namesrv)
                except remoting.RemotingError:
                    return False
            return check

        waits: list[tuple[str, Callable[[], bool]]] = []
        if role == "namesrv":
            waits.append((f"name server {ep.namesrv} to listen", lambda: tcp_open(ep.namesrv)))
        for node in self._brokers_in(lv, role):
            waits.append((f"{node} {lv.node_address(node)} to register with the name server", registered(node)))
        if role == "proxy":
            waits.append((f"gRPC {ep.grpc} to listen", lambda: tcp_open(ep.grpc)))
        for what, ready in waits:
            wait_until(f"{lv.name}'s {what}", lambda ready=ready: True if ready() else Pending(), deadline,
                       interval_s=0.2, alive=self._alive_check(lv, role, what), detail=lambda: lv.log_tail(role))
        self._served.setdefault((lv.name, role), time.time())

    def _check_agents(self, lv: LocalVariant, role: str, offset: int) -> dict[str, list[str]]:
        """A broker JVM's agents, from what it printed after ``offset`` bytes of its output: a patched variant
        whose agent did not install would run, and be measured, unpatched. Keyed by jar (and node, when the
        variant has several brokers)."""
        nodes = self._brokers_in(lv, role)
        if not nodes:
            return {}
        with open(lv.dirs.stdout(role), "rb") as f:
            f.seek(offset)
            output = f.read().decode(errors="replace")
        jars = [LOOPBACK_JAR, *lv.agents]
        problems = readiness.agent_problems(output, jars)
        if problems:
            raise HarnessError(f"{lv.name}: agents not active in {role}: {'; '.join(problems)}",
                               detail=lv.log_tail(role))
        several = len(config.node_names(lv.topology)) > 1
        return {(f"{nodes[0]}/{jar}" if several else jar): lines
                for jar, lines in readiness.agent_report(output, jars).items()}

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


class LocalProcess:
    """One process of a local variant, for a fault: signals by PID after checking the owner token; a start
    runs the command line it was started with, on the same store, and waits until it serves again."""

    holds_down = True

    def __init__(self, backend: LocalBackend, lv: LocalVariant, target: str, role: str) -> None:
        self.backend = backend
        self.lv = lv
        self.target = target
        self.role = role

    def describe(self) -> str:
        where = "" if self.target == self.role else f" (in the {self.role} JVM)"
        return f"{self.target}{where} pid {self.lv.pids[self.role]}"

    def _proc(self) -> psutil.Process:
        proc = process.owned(self.lv.pids[self.role], self.lv.token)
        if proc is None:
            raise HarnessError(f"{self.lv.name}: {self.describe()} is not running")
        return proc

    def kill(self) -> None:
        proc = self._proc()
        proc.kill()
        proc.wait(timeout=30)
        process.exit_code(proc.pid)  # reap it

    def pause(self) -> None:
        self._proc().suspend()

    def resume(self) -> None:
        self._proc().resume()

    def terminate(self) -> None:
        pid = self.lv.pids[self.role]
        killed = process.stop([(pid, self.lv.token)], self.backend.stop_timeout_s)
        if killed:
            self.backend.log(f"{self.lv.name}: killed {self.describe()}: no exit within "
                             f"{self.backend.stop_timeout_s:.0f} s of SIGTERM")
        process.exit_code(pid)

    def start(self) -> None:
        if process.alive(self.lv.pids[self.role], self.lv.token):
            raise HarnessError(f"{self.lv.name}: {self.describe()} is still running")
        offset = self.lv.dirs.stdout(self.role).stat().st_size if self.lv.dirs.stdout(self.role).exists() else 0
        deadline = Deadline(self.backend.ready_timeout_s)
        self.backend._spawn_when_ready(self.lv, self.role, deadline)
        self.backend._wait_process(self.lv, self.role, deadline)
        self.backend._check_agents(self.lv, self.role, offset)
