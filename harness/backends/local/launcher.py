"""The local backend: per variant a name server and a proxy in local mode (the broker inside it),
each its own JVM, with its own ports, user.home, store and logs under one work directory.

A variant's directory holds ``state.json`` (ports, PIDs, owner token) while it is up, so a later
command (`brokers status`, `brokers down`) finds and stops exactly those processes.
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

from harness import process, readiness
from harness.backends.base import Health, parse_properties
from harness.backends.local import config
from harness.backends.local.jars import Distribution, distribution_for
from harness.backends.local.ports import VariantPorts, allocate
from harness.client import remoting
from harness.endpoints import Endpoints
from harness.errors import ConfigError, HarnessError
from harness.paths import REPO_ROOT
from harness.process import find_java
from harness.variants import LOOPBACK_JAR, Variant, mounts_probe

STATE_FILE = "state.json"
ROLES = ("namesrv", "proxy")  # start order; stop order is the reverse


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

    @property
    def endpoints(self) -> Endpoints:
        lo = config.LOOPBACK
        return Endpoints(
            variant=self.name,
            version=self.version,
            grpc=f"{lo}:{self.ports.grpc}",
            remoting=f"{lo}:{self.ports.proxy_remoting}",
            broker=f"{lo}:{self.ports.broker}",
            namesrv=f"{lo}:{self.ports.namesrv}",
            metrics=f"http://{lo}:{self.ports.metrics}/metrics",
            probe=f"http://{lo}:{self.ports.probe}/metrics" if self.probe else "",
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
        )

    def alive(self) -> dict[str, bool]:
        return {role: process.alive(pid, self.token) for role, pid in self.pids.items()}

    def log_tail(self, role: str) -> str:
        out = tail(self.dirs.stdout(role))
        main_log = self.dirs.server_logs(role) / ("namesrv.log" if role == "namesrv" else "proxy.log")
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
    ) -> None:
        self.workdir = workdir.expanduser().resolve()
        # RocketMQ's shutdown hooks take 15-20 s; a run's brokers are thrown away, so it may cut them short.
        self.stop_timeout_s = stop_timeout_s
        self.attached = attached
        self.ready_timeout_s = ready_timeout_s
        self.log = log
        # Owner tokens start with a digest of the work directory, so strays of this workdir can be
        # found from the process table even if their state file was lost.
        self.token_prefix = hashlib.sha1(str(self.workdir).encode()).hexdigest()[:12] + "/"
        self._agents: dict[str, dict[str, list[str]]] = {}

    # --- the Backend interface -------------------------------------------------------------

    def up(self, variants: Sequence[Variant]) -> list[Endpoints]:
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
        taken = [lv.ports.slot for lv in self._running()]
        slots = allocate(len(variants), taken_slots=taken)
        started: list[LocalVariant] = []
        try:
            for v, ports in zip(variants, slots, strict=True):
                started.append(self._start(java, v, dists[v.name], ports))
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
            for role in ROLES:
                if dirs.stdout(role).exists():
                    shutil.copy2(dirs.stdout(role), target / f"{role}.out")
                logs = dirs.server_logs(role)
                if logs.is_dir():
                    shutil.copytree(logs, target / role, dirs_exist_ok=True)

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return self._agents.get(name, {})

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
                if ep.broker not in remoting.cluster_info(ep.namesrv):
                    problems.append("broker not registered with the name server")
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

    def _start(self, java: str, v: Variant, dist: Distribution, ports: VariantPorts) -> LocalVariant:
        dirs = config.VariantDirs(self.workdir / v.name)
        files = config.write_configs(v, ports, dirs)
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
        )
        commands = {
            "namesrv": config.namesrv_command(java, dist, dirs, files["namesrv"], lv.token),
            "proxy": config.proxy_command(java, dist, v, ports, dirs, files, lv.token),
        }
        home_env = {**os.environ}
        for role in ROLES:
            home = dirs.namesrv_home if role == "namesrv" else dirs.proxy_home
            # Some RocketMQ code reads $HOME rather than user.home (e.g. client-side logs).
            env = {**home_env, "HOME": str(home), "ROCKETMQ_HOME": str(dirs.rocketmq_home)}
            (dirs.root / f"{role}.cmd").write_text(" ".join(commands[role]) + "\n")
            lv.pids[role] = process.spawn(
                commands[role], dirs.stdout(role), cwd=home, env=env, die_with_parent=self.attached
            )
            lv.save()  # after each spawn, so a crash right here still leaves its PID findable
        self.log(f"{v.name}: started RocketMQ {v.version} (name server {lv.pids['namesrv']}, proxy {lv.pids['proxy']})")
        return lv

    def _wait_ready(self, lv: LocalVariant) -> None:
        ep = lv.endpoints
        deadline = time.monotonic() + self.ready_timeout_s

        def alive(role: str, what: str) -> Callable[[], None]:
            def check() -> None:
                if not process.alive(lv.pids[role], lv.token):
                    raise HarnessError(f"{lv.name}: the {role} process exited during start-up while waiting for {what}",
                                       detail=lv.log_tail(role))
            return check

        def wait(what: str, role: str, ready: Callable[[], bool]) -> None:
            while not ready():
                alive(role, what)()
                if time.monotonic() > deadline:
                    raise HarnessError(f"{lv.name}: not ready after {self.ready_timeout_s:.0f} s: waiting for {what}",
                                       detail=lv.log_tail(role))
                time.sleep(0.2)

        def registered() -> bool:
            try:
                return ep.broker in remoting.cluster_info(ep.namesrv)
            except remoting.RemotingError:
                return False

        t0 = time.monotonic()
        steps = []
        for what, role, check in (
            (f"name server {ep.namesrv}", "namesrv", lambda: tcp_open(ep.namesrv)),
            (f"broker {ep.broker} to register with the name server", "proxy", registered),
            (f"gRPC {ep.grpc}", "proxy", lambda: tcp_open(ep.grpc)),
        ):
            wait(what, role, check)
            steps.append(time.monotonic() - t0)
        rt = readiness.wait_serving(ep, "grpc", deadline, alive=alive("proxy", "a send/pop round trip"),
                                    detail=lambda: lv.log_tail("proxy"))
        # A patched variant whose agent did not install would run, and be measured, unpatched.
        output = lv.dirs.stdout("proxy").read_text(errors="replace")
        jars = [LOOPBACK_JAR, *lv.agents]
        problems = readiness.agent_problems(output, jars)
        if problems:
            raise HarnessError(f"{lv.name}: agents not active: {'; '.join(problems)}", detail=lv.log_tail("proxy"))
        self._agents[lv.name] = readiness.agent_report(output, jars)
        # Where start-up time goes: name server up, broker registered, gRPC open, admin + round trip.
        marks = ", ".join(f"{s:.1f}" for s in steps)
        total = time.monotonic() - t0
        self.log(f"{lv.name}: ready in {total:.1f} s (steps at {marks} s; round trip {rt.seconds * 1000:.0f} ms)")

    def _stop(self, variants: Sequence[LocalVariant]) -> None:
        # Proxies (brokers) first, all at once, so a broker never loses its name server mid-shutdown.
        for role in reversed(ROLES):
            targets = [(lv.pids[role], lv.token) for lv in variants if role in lv.pids]
            killed = process.stop(targets, self.stop_timeout_s)
            if killed:
                self.log(f"killed {role} {killed}: no exit within {self.stop_timeout_s:.0f} s of SIGTERM")
        for lv in variants:
            (lv.dirs.root / STATE_FILE).unlink(missing_ok=True)
