"""A local variant's state: its settings, ports, directory, owner token, processes and their command lines.

A variant's directory holds ``state.json`` while it is up, so a later command (`brokers status`, `brokers
down`) finds and stops exactly those processes, and a fault can start a process again as it was.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.contracts.endpoints import BrokerNode, Endpoints
from harness.core import process
from harness.deploy.local import config
from harness.deploy.local.ports import VariantPorts
from harness.inputs.brokers import SINGLE, Topology

STATE_FILE = "state.json"
# The faults of one variant run in threads of their own (harness.run.faults) and each start saves the state:
# one write at a time, so no save lands half of another's temporary file.
_SAVING = threading.Lock()


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
    # process -> when it first served, as this harness process saw it start (not saved: only the start-up's
    # log line reads it, harness.deploy.local.launcher)
    served: dict[str, float] = field(default_factory=dict)

    @property
    def processes(self) -> tuple[str, ...]:
        return config.processes(self.topology)

    def brokers_in(self, role: str) -> list[str]:
        """The broker nodes a process runs: itself, or the first broker inside a local-mode proxy."""
        if role in config.node_names(self.topology):
            return [role]
        return ["broker"] if role == "proxy" and self.topology.proxy == "local" else []

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
        with _SAVING:
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
