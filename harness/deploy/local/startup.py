"""Starting one process of a local variant and waiting until it serves (the launcher's start of a variant, and
a fault's start of a process again): the name server listens; a broker is registered with the name server; the
proxy's gRPC port listens. A broker JVM's agents are then checked in what it printed.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from harness.client import remoting
from harness.core import process
from harness.core.errors import HarnessError
from harness.core.waiting import Deadline, Pending, wait_until
from harness.deploy import readiness
from harness.deploy.agents import LOOPBACK_JAR
from harness.deploy.local import config
from harness.deploy.local.state import LocalVariant


def tcp_open(address: str, timeout_s: float = 0.5) -> bool:
    """Whether ``host:port`` accepts a TCP connection now."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def spawn(lv: LocalVariant, role: str, die_with_parent: bool) -> int:
    """Start ``role`` with its command line (``die_with_parent``: it dies with the harness, as a run's servers do)
    and record its PID in the variant's state file."""
    home = lv.dirs.home(role)
    # Some RocketMQ code reads $HOME rather than user.home (e.g. client-side logs).
    env = {**os.environ, "HOME": str(home), "ROCKETMQ_HOME": str(lv.dirs.rocketmq_home)}
    (lv.dirs.root / f"{role}.cmd").write_text(" ".join(lv.commands[role]) + "\n")
    lv.pids[role] = process.spawn(lv.commands[role], lv.dirs.stdout(role), cwd=home, env=env,
                                  die_with_parent=die_with_parent)
    lv.save()  # after each spawn, so a crash right here still leaves its PID findable
    return lv.pids[role]


def spawn_when_ready(lv: LocalVariant, role: str, deadline: Deadline, die_with_parent: bool,
                     again: bool = False) -> int:
    """Start ``role``; a cluster-mode proxy only once every process before it serves: it creates its system
    topics on the cluster at start and exits when no broker is registered (after a name server restart,
    brokers register again only at their next heartbeat, up to 30 s later). ``again``: a fault's start, while
    another fault may be starting one of those processes again (a name server killed while the proxy restarts),
    so their being down is waited out until the deadline, not an error."""
    if role == "proxy" and lv.topology.proxy == "cluster":
        for before in lv.processes[: lv.processes.index(role)]:
            wait_process(lv, before, deadline, own=not again)
    return spawn(lv, role, die_with_parent)


class ExitedDuringStartup(HarnessError):
    """The process being waited for exited before it served."""


def alive_check(lv: LocalVariant, role: str, what: str) -> Callable[[], None]:
    """A check that raises, with the process's last output, once ``role`` has exited while waiting for ``what``."""
    def check() -> None:
        if not process.alive(lv.pids[role], lv.token):
            raise ExitedDuringStartup(f"{lv.name}: the {role} process exited during start-up while waiting for "
                                      f"{what}", detail=lv.log_tail(role))
    return check


def wait_process(lv: LocalVariant, role: str, deadline: Deadline, own: bool = True) -> None:
    """Until ``role`` serves: the name server listens; a broker is registered with the name server; the
    proxy's gRPC port listens (with the broker inside, once that is registered). ``own``: the caller started it,
    so its exit ends the wait at once; otherwise it is waited for until the deadline, whoever starts it."""
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
    for node in lv.brokers_in(role):
        waits.append((f"{node} {lv.node_address(node)} to register with the name server", registered(node)))
    if role == "proxy":
        waits.append((f"gRPC {ep.grpc} to listen", lambda: tcp_open(ep.grpc)))
    for what, ready in waits:
        wait_until(f"{lv.name}'s {what}", lambda ready=ready: True if ready() else Pending(), deadline,
                   interval_s=0.2, alive=alive_check(lv, role, what) if own else None,
                   detail=lambda: lv.log_tail(role))
    if own:
        lv.served.setdefault(role, time.time())


def check_agents(lv: LocalVariant, role: str, offset: int) -> dict[str, list[str]]:
    """A broker JVM's agents, from what it printed after ``offset`` bytes of its output: a patched variant
    whose agent did not install would run, and be measured, unpatched. Keyed by jar (and node, when the
    variant has several brokers)."""
    nodes = lv.brokers_in(role)
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
