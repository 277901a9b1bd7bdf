import sys
import time
from pathlib import Path

from harness.core import process


def _sleeper(tmp_path: Path, token: str, die_with_parent: bool = False) -> int:
    # A real child process carrying the owner flag the way a JVM does (python ignores extra argv).
    argv = [sys.executable, "-c", "import time; time.sleep(60)", process.owner_flag(token)]
    pid = process.spawn(argv, tmp_path / "out.log", cwd=tmp_path, die_with_parent=die_with_parent)
    # Until the child has exec'd, its command line is still the forking parent's.
    deadline = time.monotonic() + 10
    while not process.alive(pid, token) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pid


def test_spawn_find_and_stop(tmp_path: Path):
    pid = _sleeper(tmp_path, "unit-test-prefix/a/1")
    assert process.alive(pid, "unit-test-prefix/a/1")
    assert not process.alive(pid, "someone-else")  # a PID is only ours with our token
    assert (pid, "unit-test-prefix/a/1") in process.find_owned("unit-test-prefix/")
    killed = process.stop([(pid, "unit-test-prefix/a/1")], timeout_s=10)
    assert killed == []  # SIGTERM was enough
    assert not process.alive(pid, "unit-test-prefix/a/1")
    assert process.find_owned("unit-test-prefix/") == []


def test_stop_kills_what_ignores_sigterm(tmp_path: Path):
    token = "unit-test-prefix/b/1"
    argv = [sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open('ready','w').close(); "
            "time.sleep(60)", process.owner_flag(token)]
    pid = process.spawn(argv, tmp_path / "out.log", cwd=tmp_path)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.stop([(pid, token)], timeout_s=0.5) == [pid]
    assert not process.alive(pid, token)


def test_stop_ignores_processes_without_our_token(tmp_path: Path):
    pid = _sleeper(tmp_path, "unit-test-prefix/c/1")
    try:
        assert process.stop([(pid, "not-the-token")], timeout_s=1) == []
        assert process.alive(pid, "unit-test-prefix/c/1")
    finally:
        process.stop([(pid, "unit-test-prefix/c/1")], timeout_s=5)


def test_attached_child_dies_with_the_harness(tmp_path: Path):
    """A server started attached gets SIGKILL when the harness is killed outright (kill -9)."""
    import subprocess

    token = "unit-test-prefix/d/1"
    parent_code = (
        "import sys, time; from pathlib import Path; from harness.core import process; "
        f"process.spawn([sys.executable, '-c', 'import time; time.sleep(60)', process.owner_flag({token!r})], "
        f"Path({str(tmp_path / 'child.log')!r}), cwd=Path({str(tmp_path)!r}), die_with_parent=True); "
        "print('spawned', flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "spawned"
        deadline = time.monotonic() + 10
        while not process.find_owned("unit-test-prefix/d/") and time.monotonic() < deadline:
            time.sleep(0.05)  # the child may still be between setpriv's exec and python's
        assert len(process.find_owned("unit-test-prefix/d/")) == 1
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while process.find_owned("unit-test-prefix/d/") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.find_owned("unit-test-prefix/d/") == []
    finally:
        parent.kill()
        process.stop(process.find_owned("unit-test-prefix/d/"), timeout_s=2)


def test_a_process_caught_mid_exec_is_looked_at_again(monkeypatch):
    import psutil

    from harness.core import process

    token = "tok-exec"
    calls = []

    class Execing:  # setpriv becoming java: an empty command line for a moment, then java's
        def __init__(self, pid):
            self.pid = pid

        def status(self):
            return psutil.STATUS_RUNNING

        def cmdline(self):
            calls.append(1)
            return [] if len(calls) < 3 else ["java", process.owner_flag(token)]

    monkeypatch.setattr(process.psutil, "Process", Execing)
    monkeypatch.setattr(process, "EXEC_RETRY_S", 0.0)
    assert process.alive(4242, token) and len(calls) == 3
    calls.clear()
    monkeypatch.setattr(Execing, "cmdline", lambda self: [])  # never shows one: not ours
    assert not process.alive(4242, token)


def test_a_child_started_from_a_thread_that_ends_lives_until_the_harness_dies(tmp_path: Path):
    """spawn forks such a child on a thread that lives as long as the process: the thread that asked may end
    (a fault's thread, a pool's) and the child lives on, until the harness is killed."""
    import subprocess

    token = "unit-test-prefix/f/1"
    parent_code = (
        "import sys, threading, time; from pathlib import Path; from harness.core import process; "
        "t = threading.Thread(target=lambda: [process.spawn([sys.executable, '-c', 'import time; time.sleep(60)', "
        f"process.owner_flag({token!r})], Path({str(tmp_path / 'child.log')!r}), cwd=Path({str(tmp_path)!r}), "
        "die_with_parent=True), time.sleep(0.5)]); t.start(); t.join(); print('spawned', flush=True); "
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        # The thread that asked lived on a moment (setpriv armed the signal meanwhile), then ended.
        assert parent.stdout.readline().strip() == "spawned"
        deadline = time.monotonic() + 10
        while not process.find_owned("unit-test-prefix/f/") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a death signal bound to the ended thread would have come by now
        assert len(process.find_owned("unit-test-prefix/f/")) == 1
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while process.find_owned("unit-test-prefix/f/") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.find_owned("unit-test-prefix/f/") == []
    finally:
        parent.kill()
        process.stop(process.find_owned("unit-test-prefix/f/"), timeout_s=2)


def test_the_parent_death_signal_follows_the_forking_thread(tmp_path: Path):
    """Why spawn forks on a thread of its own: PR_SET_PDEATHSIG fires when the thread that forked the child
    ends, while this process lives on."""
    import subprocess
    import threading

    import pytest

    if not process.pdeathsig_prefix():
        pytest.skip("no setpriv")
    token = "unit-test-prefix/e/1"
    children: list[subprocess.Popen] = []

    def start() -> None:
        children.append(subprocess.Popen(
            [*process.pdeathsig_prefix(), sys.executable, "-c", "import time; time.sleep(60)",
             process.owner_flag(token)], stdin=subprocess.DEVNULL, start_new_session=True))
        # Until setpriv has exec'd python it may not have set the signal yet: the thread ends after that.
        deadline = time.monotonic() + 10
        while process.psutil.Process(children[0].pid).cmdline()[:1] != [sys.executable] \
                and time.monotonic() < deadline:
            time.sleep(0.02)

    t = threading.Thread(target=start)
    t.start()
    t.join(10)
    try:
        assert children[0].wait(10) == -9  # the death signal, though the harness (this process) still runs
    finally:
        children[0].kill()
        children[0].wait(5)


def test_a_child_whose_harness_died_before_setpriv_armed_the_signal_does_not_run(tmp_path: Path):
    """The prefix runs the command only while the harness is still its parent: one that died between the fork
    and setpriv's prctl would never send the signal (here: a parent PID that is not ours)."""
    import subprocess

    import pytest

    if not process.pdeathsig_prefix():
        pytest.skip("no setpriv")
    ran = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(ran)!r}, 'w').close()"]
    assert subprocess.run([*process.pdeathsig_prefix(), *command], timeout=30).returncode == 0 and ran.exists()
    ran.unlink()
    gone = subprocess.run([*process.pdeathsig_prefix(parent=1), *command], timeout=30)
    assert gone.returncode == 1 and not ran.exists()


def _three_free_ports_outside_own_ports() -> int:
    """The first of three consecutive ports free now, below OWN_PORTS: the harness's runs in parallel tests take
    OWN_PORTS with reservations this test does not see (its own are in tmp_path), and the kernel hands out
    only the ephemeral range, so nothing else takes these meanwhile."""
    import socket

    for base in range(23100, 24000, 3):
        try:
            for port in range(base, base + 3):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no three consecutive free ports in 23100-24000")


def test_a_port_handed_out_is_not_handed_out_again_while_reserved(tmp_path: Path, monkeypatch):
    import os

    from harness.core import process

    base = _three_free_ports_outside_own_ports()
    own = [base, base + 1, base + 2]
    monkeypatch.setattr(process, "RESERVATIONS", tmp_path / "ports")
    monkeypatch.setattr(process, "OWN_PORTS", (base, base + 3))
    monkeypatch.setattr(process, "_ephemeral_low", lambda: 32768)
    ports = [process.free_port() for _ in range(3)]
    assert sorted(ports) == own
    assert process.free_port() not in own  # the range is reserved: the kernel's choice
    # (another process's reservations are files: the same holds across processes)
    assert sorted(int(p.name) for p in (tmp_path / "ports").iterdir()) == own
    old = tmp_path / "ports" / str(base + 1)
    os.utime(old, (0, 0))  # a reservation past RESERVED_S is void
    assert process.free_port() == base + 1


def test_a_recorded_process_is_still_known_after_the_clock_is_set(monkeypatch):
    """A process is named by its PID and start time; the start time is kept in seconds since boot, so setting the
    wall clock (which moves the boot time the kernel reports in whole seconds) does not make a recorded process
    look gone (a cluster's down once stopped none of its processes so). A record in seconds since the epoch, as
    older harnesses wrote, is still recognised; another process's is not."""
    import psutil
    import psutil._pslinux as pslinux

    from harness.core import process

    me = psutil.Process()
    started = process.started_at(me.pid)
    epoch_record = me.create_time()
    real_boot = pslinux.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: real_boot + 3.0)  # the clock set 3 s forward
    assert process.started_at(me.pid) == started
    assert process.is_started(me, started)
    monkeypatch.setattr(pslinux, "boot_time", lambda: real_boot)
    assert process.is_started(me, epoch_record)
    assert not process.is_started(me, started + 1.0) and not process.is_started(psutil.Process(1), started)
