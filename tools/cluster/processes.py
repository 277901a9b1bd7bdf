"""The cluster's components as processes: each recorded by PID and start time in the state directory, which of
them still run, starting one with its own log, and waiting for one to be ready (its log's tail when it dies or
times out)."""

from __future__ import annotations

import json
from collections.abc import Callable

from harness.core import process
from harness.core.errors import HarnessError
from harness.core.waiting import Pending, wait_until
from tools.cluster.layout import Layout


def read_pids(lay: Layout) -> dict[str, dict]:
    return json.loads(lay.pids.read_text()) if lay.pids.is_file() else {}


def _record(lay: Layout, name: str, pid: int) -> None:
    pids = read_pids(lay)
    pids[name] = {"pid": pid, "started": process.started_at(pid)}
    tmp = lay.pids.with_suffix(".tmp")
    tmp.write_text(json.dumps(pids, indent=1))
    tmp.replace(lay.pids)


def running(lay: Layout) -> dict[str, int]:
    """The recorded components still running, by name."""
    import psutil

    out = {}
    for name, rec in read_pids(lay).items():
        try:
            if process.is_started(psutil.Process(rec["pid"]), rec["started"]):
                out[name] = rec["pid"]
        except Exception:  # noqa: BLE001 - gone or unreadable: not running
            pass
    return out


def start(lay: Layout, name: str, argv: list[str], log: Callable[[str], None]) -> int:
    pid = process.spawn(argv, lay.logs / f"{name}.log", cwd=lay.root)
    _record(lay, name, pid)
    log(f"{name}: started (pid {pid})")
    return pid


def wait_up(what: str, ok: Callable[[], bool], lay: Layout, name: str, timeout_s: float) -> None:
    def alive() -> None:
        if name not in running(lay):
            raise HarnessError(f"{name} exited while starting", detail=_tail(lay, name))

    def up() -> bool | Pending:
        try:
            return True if ok() else Pending()
        except Exception as e:  # noqa: BLE001 - not up yet
            return Pending(str(e))

    wait_until(what, up, timeout_s, interval_s=0.5, alive=alive, detail=lambda: _tail(lay, name))


def _tail(lay: Layout, name: str, lines: int = 25) -> str:
    path = lay.logs / f"{name}.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.is_file() else ""
