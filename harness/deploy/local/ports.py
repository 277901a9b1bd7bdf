"""Port allocation for local variants.

Each variant gets a slot of 100 ports and keeps RocketMQ's familiar last digits inside it
(name server ..76, broker ..11 with ..09 and ..12 beside it, proxy remoting ..80, gRPC ..81, broker
metrics ..57, wakeup probe ..58), so `ss -ltnp` output reads at a glance. The other brokers of a topology
keep the pattern one decade away: the slave ..21 (metrics ..47, probe ..48), the second master ..31
(metrics ..37, probe ..38). Slots sit below the kernel's ephemeral range so outgoing connections never
take them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.core.errors import HarnessError

BASE_PORT = 20000
SLOT_SIZE = 100
MAX_SLOTS = 120  # up to port 31999, under the default ephemeral range (32768+)


@dataclass(frozen=True)
class NodePorts:
    """The ports of one broker process: its listen port (also listen - 2, fast remoting, and listen + 1, HA),
    its metrics exporter and its wakeup probe."""

    listen: int
    metrics: int
    probe: int

    @property
    def ha(self) -> int:
        return self.listen + 1


# Broker node -> offsets of (listen, metrics, probe) within a slot.
NODE_OFFSETS = {"broker": (11, 57, 58), "slave": (21, 47, 48), "broker-b": (31, 37, 38)}


@dataclass(frozen=True)
class VariantPorts:
    slot: int
    namesrv: int
    broker: int  # listenPort; the broker also opens broker-2 (fast remoting) and broker+1 (HA)
    proxy_remoting: int
    grpc: int
    metrics: int
    probe: int = 0  # the pop-wakeup-probe agent's exporter, when a variant mounts it

    @classmethod
    def for_slot(cls, slot: int, base: int = BASE_PORT) -> VariantPorts:
        if not 0 <= slot < MAX_SLOTS:
            raise ValueError(f"slot {slot} out of range 0..{MAX_SLOTS - 1}")
        b = base + slot * SLOT_SIZE
        return cls(slot, namesrv=b + 76, broker=b + 11, proxy_remoting=b + 80, grpc=b + 81, metrics=b + 57,
                   probe=b + 58)

    def node(self, name: str) -> NodePorts:
        """The ports of a broker node (broker, broker-b, slave) of this slot."""
        if name == "broker":
            return NodePorts(self.broker, self.metrics, self.probe)
        base = self.broker - NODE_OFFSETS["broker"][0]
        listen, metrics, probe = NODE_OFFSETS[name]
        return NodePorts(base + listen, base + metrics, base + probe)

    def all(self) -> dict[str, int]:
        """Every port the variant's processes may listen on, by role (every topology's)."""
        out = {"namesrv": self.namesrv, "proxy remoting": self.proxy_remoting, "gRPC": self.grpc}
        for name in NODE_OFFSETS:
            n = self.node(name)
            out.update({name: n.listen, f"{name} fast remoting": n.listen - 2, f"{name} HA": n.ha,
                        f"{name} metrics": n.metrics, f"{name} wakeup probe": n.probe})
        return out

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def port_free(port: int) -> bool:
    """True when nothing listens on the port on any address.

    Binds the wildcard address because some RocketMQ listeners (gRPC, HA) bind it; a wildcard bind
    also fails when something holds the port on 127.0.0.1 alone.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Match the servers: they set SO_REUSEADDR, so a port in TIME_WAIT is usable by them too.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _lock_dir() -> Path:
    return Path(os.environ.get("RMQ_HARNESS_PORT_LOCKS") or Path(tempfile.gettempdir()) / "rmq-harness-port-slots")


class SlotLocks:
    """The slots this process has taken, machine-wide: a lock (flock) on one file per slot, held until released
    or until the process ends, however it ends (the kernel drops it). Two harnesses starting brokers at once
    never pick the same slot, although neither's brokers listen yet when the other looks at the ports."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or _lock_dir()
        self._held: dict[int, int] = {}  # slot -> open file descriptor holding its lock

    def take(self, slot: int) -> bool:
        if slot in self._held:
            return True
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._held[slot] = fd
        return True

    def release(self, slot: int) -> None:
        fd = self._held.pop(slot, None)
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the lock

    def held(self) -> list[int]:
        return sorted(self._held)


def allocate(
    count: int,
    taken_slots: Iterable[int] = (),
    is_free: Callable[[int], bool] = port_free,
    base: int = BASE_PORT,
    take: Callable[[int], bool] = lambda _slot: True,
) -> list[VariantPorts]:
    """Choose ``count`` slots whose ports are all free, skipping slots already in use here (``taken_slots``) or
    by another harness (``take`` refuses: SlotLocks.take)."""
    taken = set(taken_slots)
    chosen: list[VariantPorts] = []
    busy: list[str] = []
    for slot in range(MAX_SLOTS):
        if len(chosen) == count:
            break
        if slot in taken:
            continue
        ports = VariantPorts.for_slot(slot, base)
        in_use = [f"{role} {p}" for role, p in ports.all().items() if not is_free(p)]
        if in_use:
            busy.append(f"slot {slot}: {in_use[0]} in use")
            continue
        if not take(slot):
            busy.append(f"slot {slot}: taken by another harness starting its brokers")
            continue
        chosen.append(ports)
    if len(chosen) < count:
        raise HarnessError(
            f"no free port slot for {count - len(chosen)} more variant(s) between {base} and "
            f"{base + MAX_SLOTS * SLOT_SIZE - 1} ({busy[-1] if busy else 'all slots taken'}); "
            "stop other brokers with `rmq-harness brokers down`"
        )
    return chosen
