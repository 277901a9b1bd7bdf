"""A fault's target on this machine: one process of a local variant (harness.deploy.base.ServerProcess), signalled
by PID once its owner token is checked; started again with the command line it was started with, on the same
store, and waited for until it serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psutil

from harness.core import process
from harness.core.errors import HarnessError
from harness.core.waiting import Deadline
from harness.deploy.local import startup
from harness.deploy.local.state import LocalVariant

if TYPE_CHECKING:  # for the annotation only: the backend makes its processes (LocalBackend.process)
    from harness.deploy.local.launcher import LocalBackend


# A process a fault stopped may exit while it starts again for a reason of the machine's, not of the defect under
# test: a cluster-mode proxy creates its system topics on the brokers at start and exits when the request times out
# (sweep of 2026-11-29: four proxies started again at once on 2 cores, back after 82-95 s; 5.5.1's exited with
# "create system broadcast topic DefaultHeartBeatSyncerTopic failed"). It is started again, said in the log, within
# the same deadline.
START_TRIES = 3


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
        for attempt in range(1, START_TRIES + 1):
            startup.spawn_when_ready(self.lv, self.role, deadline, die_with_parent=self.backend.attached,
                                     again=True)
            try:
                startup.wait_process(self.lv, self.role, deadline)
                break
            except startup.ExitedDuringStartup as e:
                if attempt == START_TRIES or deadline.passed():
                    raise
                self.backend.log(f"{self.lv.name}: {self.role} exited while starting again after the fault ({e}); "
                                 f"started once more ({attempt + 1} of {START_TRIES})")
        startup.check_agents(self.lv, self.role, offset)
