"""Starting and stopping the processes the harness runs (brokers, Locust, Prometheus), always by PID,
never by name; and the two things every starter needs: a free loopback port and a Java binary.

Every JVM the harness starts carries ``-Drmq.harness.owner=<token>`` on its command line; a PID is only
signalled after its command line shows that token, so a recycled PID is never hit.
"""

from __future__ import annotations

import os
import queue
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

import psutil

from harness.core.errors import HarnessError

OWNER_PROPERTY = "rmq.harness.owner"
STOP_TIMEOUT_S = 30.0
# Children started by this process, kept so their exit status is collected (no zombies).
_children: dict[int, subprocess.Popen] = {}


# Ports handed out by free_port: above the run slots' (harness.deploy.local.ports, up to 31999) and below the
# kernel's ephemeral range, so no bind to port 0 (a JVM's, Spark's executors') takes one between free_port
# choosing it and its user binding it. Seen: a worker's metrics port taken by a Spark process meanwhile.
OWN_PORTS = (32000, 32768)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# A port handed out is reserved, across processes, for this long (a file per port): another run on the machine
# (two test workers start runs side by side) cannot be handed it while its user has not bound it yet. Seen: a
# Locust worker's metrics port handed to two runs within a second.
RESERVATIONS = Path(tempfile.gettempdir()) / "rmq-harness-ports"
RESERVED_S = 300.0


def _reserve(port: int) -> bool:
    """Take ``port`` for RESERVED_S unless another process holds it (a reservation older than that is void)."""
    RESERVATIONS.mkdir(exist_ok=True)
    mark = RESERVATIONS / str(port)
    for _ in range(2):
        try:
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            try:
                if time.time() - mark.stat().st_mtime < RESERVED_S:
                    return False
                mark.unlink()
            except FileNotFoundError:
                pass
    return False


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now and reserved for this process's user (RESERVED_S): from OWN_PORTS
    when the ephemeral range lies above them, else whatever the kernel gives."""
    low, high = OWN_PORTS[0], min(OWN_PORTS[1], _ephemeral_low())
    for port in random.sample(range(low, high), max(0, high - low)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _reserve(port):
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise HarnessError(
            "java not found (JAVA_HOME unset and no java on PATH): install JDK 17 "
            "(apt-get install openjdk-17-jre-headless) or run make setup"
        )
    return java


def owner_flag(token: str) -> str:
    return f"-D{OWNER_PROPERTY}={token}"


# Run by the child after setpriv set its death signal: a harness that died before that (between the fork and
# setpriv's prctl) sends none, and the child, already handed to another parent, would never get it. So the
# child goes on only while the harness is still its parent.
_PARENT_CHECK = '[ "$PPID" = "$1" ] || exit 1; shift; exec "$@"'


def pdeathsig_prefix(parent: int | None = None) -> list[str]:
    """A command prefix that makes the child get SIGKILL when the harness dies, however it dies.

    SIGKILL, not SIGTERM: once the harness is gone nobody collects what such a child would write on its way
    out, and RocketMQ's shutdown hooks kept a proxy alive 23 s after its harness was killed (a loaded
    2-core machine). A harness that ends normally or on Ctrl-C stops its children itself, gracefully.

    util-linux's setpriv sets PR_SET_PDEATHSIG and then execs, so the JVM keeps it; this avoids a
    preexec_fn, which is unsafe in a process that already runs threads (the gRPC client does). A shell
    between them checks the harness (``parent``, default this process) is still alive, then becomes the
    command (same PID).

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: hence ``spawn``
    forks such children on the main thread or on a thread of its own that lives as long as the process.
    """
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return []
    return [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", _PARENT_CHECK, "rmq-harness-child",
            str(os.getpid() if parent is None else parent)]


class _Spawner:
    """A thread that lives as long as the process and forks, for other threads, the children that must die
    with the harness: PR_SET_PDEATHSIG fires when the thread that forked a child ends, so a child forked by a
    short-lived thread (a fault's, a pool's) would be killed while the harness runs on."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="rmq-harness-spawner", daemon=True)
                self._thread.start()
        done: Future[subprocess.Popen] = Future()
        self._jobs.put((start, done))
        return done.result()

    def _serve(self) -> None:
        while True:  # never returns: its children's death signal is this thread's end, i.e. the process's
            start, done = self._jobs.get()
            try:
                done.set_result(start())
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                done.set_exception(e)


_spawner = _Spawner()


def spawn(
    argv: Sequence[str],
    log_path: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = False,
) -> int:
    """Start a server process in its own session (a terminal's Ctrl-C reaches the harness only,
    which then stops its servers in order) with stdout and stderr going to ``log_path``.

    ``die_with_parent``: the child gets SIGKILL when the harness dies, even by SIGKILL, from whichever
    thread it is started (forked on the main thread, or on a spawner thread that lives as long as the
    process)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    prefix = pdeathsig_prefix() if die_with_parent else []
    with open(log_path, "ab") as out:
        def start() -> subprocess.Popen:
            return subprocess.Popen(
                [*prefix, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )

        on_main = threading.current_thread() is threading.main_thread()
        proc = _spawner.run(start) if die_with_parent and not on_main else start()
    _children[proc.pid] = proc
    return proc.pid


# A process in the middle of exec (setpriv becoming java) shows an empty command line for a moment: looked at
# again this often before it counts as not ours. Seen once: a broker declared dead 10 ms after its spawn.
EXEC_RETRIES = 20
EXEC_RETRY_S = 0.05


def owned(pid: int, token: str) -> psutil.Process | None:
    """The live process ``pid`` if its command line carries our owner token, else None."""
    try:
        proc = psutil.Process(pid)
        for _ in range(EXEC_RETRIES):
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cmdline = proc.cmdline()
            if cmdline:
                return proc if owner_flag(token) in cmdline else None
            time.sleep(EXEC_RETRY_S)
        return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def alive(pid: int, token: str) -> bool:
    return owned(pid, token) is not None


def terminate(procs: list[psutil.Process], timeout_s: float) -> list[int]:
    """SIGTERM all at once, wait, SIGKILL what is left (the pids returned); collect the exit status of our
    own children."""
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(procs, timeout=timeout_s)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    for p in procs:
        child = _children.pop(p.pid, None)
        if child is not None:
            child.poll()
    return [p.pid for p in left]


def stop(targets: Iterable[tuple[int, str]], timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """Stop each owned (pid, token) at once; return the PIDs that had to be killed."""
    return terminate([p for p in (owned(pid, token) for pid, token in targets) if p is not None], timeout_s)


# A start time above this is an older record's, in seconds since the epoch (no machine is up for 30 years).
_EPOCH_RECORD = 1e9


def started_at(pid: int) -> float:
    """The start time of ``pid``, in seconds since the machine booted: with the PID it names one process for good
    (PIDs are reused, start times not). Not psutil's time since the epoch: that adds the boot time the kernel
    derives from the wall clock (/proc/stat btime, whole seconds), which moves whenever the clock is set, and a
    recorded process is then taken for gone (seen here: a cluster layer's down found none of its 8 processes
    running after 12 minutes and stopped none; they ran on)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        raise psutil.NoSuchProcess(pid) from None
    # Field 22, starttime, in clock ticks since boot; the command (field 2) may hold spaces and parentheses.
    return int(stat[stat.rfind(")") + 2:].split()[19]) / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def is_started(proc: psutil.Process, started: float) -> bool:
    """Whether ``proc`` is the live process that ``started_at`` gave ``started`` for (a record an older harness
    wrote, in seconds since the epoch, is compared as such, with a second's leeway for the clock)."""
    try:
        if started > _EPOCH_RECORD:
            same = abs(proc.create_time() - started) < 1.0
        else:
            same = abs(started_at(proc.pid) - started) < 0.01
        return same and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_started(targets: Iterable[tuple[int, float]], timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """Stop each (pid, start time) still running at once; return the PIDs that had to be killed. For
    programs that take no owner flag (the cluster's Go programs)."""
    procs = []
    for pid, started in targets:
        try:
            p = psutil.Process(pid)
        except psutil.NoSuchProcess:
            continue
        if is_started(p, started):
            procs.append(p)
    return terminate(procs, timeout_s)


def find_owned(token_prefix: str) -> list[tuple[int, str]]:
    """(pid, token) of every live process whose owner token starts with ``token_prefix``."""
    needle = f"-D{OWNER_PROPERTY}={token_prefix}"
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        for arg in proc.info.get("cmdline") or ():
            if arg.startswith(needle):
                found.append((proc.info["pid"], arg.split("=", 1)[1]))
                break
    return found


def stop_children(pids: Iterable[int], timeout_s: float = 15.0) -> list[int]:
    """Stop processes this process spawned and has not reaped: their PIDs cannot have been reused,
    so no owner token is needed (used for Locust processes, which take no -D flag)."""
    procs = []
    for pid in pids:
        child = _children.get(pid)
        if child is not None and child.poll() is None:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
    return terminate(procs, timeout_s)


def exit_code(pid: int) -> int | None:
    """The exit code of a child this process spawned, or None while it runs."""
    child = _children.get(pid)
    return child.poll() if child is not None else None
