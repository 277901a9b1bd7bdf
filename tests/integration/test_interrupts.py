"""Ctrl-C and SIGKILL of the real CLI at every phase of a run and of a comparison: whatever the harness
started goes away (brokers, Prometheus, Locust, Spark), a Ctrl-C exits 130, and nothing half-written looks
complete (no runs/<run-id> without its manifest, no report directory; a staging directory says INCOMPLETE).

Each case starts `rmq-harness` in a session of its own, as a terminal would, and signals it from the thread
that reads its output, the moment the line that opens the phase appears: a Ctrl-C goes to the harness's
process group (what a terminal sends; its servers run in sessions of their own), SIGKILL to the harness
alone. Every process of the case is remembered (the harness's descendants, processes with the run's owner
token, processes naming the case's directory) and killed by PID when the test ends, however it ends.

To keep wall time down, the SIGINT and SIGKILL cases of a phase run side by side (each harness locks the port
slots it takes, so the two never pick the same ones), and so do the comparison's two cases. One phase runs a
fault: a name server SIGKILLed and started again by the fault's thread, so a process started off the main
thread must die with the harness too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.core import process
from harness.core.paths import REPO_ROOT
from harness.deploy.local import LocalBackend
from tests import synth

SCENARIO = REPO_ROOT / "tests" / "resources" / "scenarios" / "short-steady.yaml"
# A Ctrl-C'd run kills its brokers at once (their stores are scratch; RocketMQ's shutdown hooks take 8-20 s);
# a killed harness's children get SIGKILL from the kernel (setpriv --pdeathsig).
GONE_WITHIN_S = 40.0
EXIT_WITHIN_S = 60.0
PHASE_WITHIN_S = 300.0  # the brokers' readiness timeout (180 s) and a loaded machine
INCOMPLETE = "INCOMPLETE"
# The harness's Python with SIGINT at its default (a shell may start background jobs with it ignored, and an
# ignored SIGINT stays ignored across exec): then the CLI itself.
EXEC_WITH_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                    "os.execv(sys.argv[1], sys.argv[1:])")


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "rmq-harness"
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli.main"]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(p: psutil.Process) -> str:
    try:
        line = " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"{p.pid} (gone)"
    for name in ("NamesrvStartup", "BrokerStartup", "ProxyStartup", "SparkSubmit", "pyspark.daemon", "prometheus",
                 "--worker", "--master", "setpriv"):
        if name in line:
            return f"{p.pid} {name}"
    return f"{p.pid} {line[:100]}"


class Harness:
    """One `rmq-harness` process, signalled (``sig``) from its output reader the moment a line holds ``at``."""

    def __init__(self, name: str, home: Path, argv: list[str], at: str, sig: signal.Signals,
                 run_id: str | None = None, child: str | None = None) -> None:
        """``child``: after the line, also wait until a descendant's command line holds this (a JVM being
        launched has printed nothing yet)."""
        self.name, self.home, self.at, self.sig, self.run_id, self.child = name, home, at, sig, run_id, child
        self.child_seen = False
        self.lines: list[tuple[float, str]] = []
        self.seen: dict[int, psutil.Process] = {}  # every process of this case ever found
        self.signalled_at: float | None = None
        self.signalled = threading.Event()
        self.exited_at: float | None = None  # when the harness exited (seen to within 0.2 s)
        self.token_prefix = LocalBackend(home / "runs" / ".work" / run_id / "brokers").token_prefix if run_id else None
        env = {k: v for k, v in os.environ.items() if not k.startswith("RMQ_HARNESS_") or k == "RMQ_HARNESS_CACHE"}
        env.update(RMQ_HARNESS_STATE=str(home / "state"), PYTHONUNBUFFERED="1")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-c", EXEC_WITH_SIGINT, *_cli(), *argv], cwd=home, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.gone_after: float | None = None
        self.alive: list[str] = []
        self.lasted: dict[str, float] = {}  # each process that outlived the signal: for how long (measured)
        self._watcher = threading.Thread(target=self._watch, name=f"watch-{name}", daemon=True)
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line.rstrip()))
            if self.signalled_at is None and self.at in line:
                if self.child:
                    self._wait_child()
                self.find()  # what runs right now, so a process that exits with the harness is still checked
                if self.sig == signal.SIGINT:
                    os.killpg(self.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
                else:
                    self.proc.send_signal(self.sig)
                self.signalled_at = time.monotonic()
                self._watcher.start()
                self.signalled.set()
        self.proc.stdout.close()

    def _wait_child(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                kids = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for k in kids:
                try:
                    if any(self.child in a for a in k.cmdline()):
                        self.child_seen = True
                        return
                except psutil.Error:
                    pass
            time.sleep(0.02)

    def find(self) -> list[psutil.Process]:
        """The case's live processes (remembered for good): the harness and its descendants, processes with the
        run's owner token, processes that name the case's directory on their command line."""
        found: dict[int, psutil.Process] = {}
        try:
            me = psutil.Process(self.proc.pid)
            found[me.pid] = me
            found.update((c.pid, c) for c in me.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
        if self.token_prefix:
            for pid, _token in process.find_owned(self.token_prefix):
                try:
                    found.setdefault(pid, psutil.Process(pid))
                except psutil.NoSuchProcess:
                    pass
        home = str(self.home)
        for p in psutil.process_iter(["cmdline"]):
            if p.pid != os.getpid() and any(home in a for a in p.info["cmdline"] or ()):
                found.setdefault(p.pid, p)
        for pid, p in found.items():
            self.seen.setdefault(pid, p)
        return [p for p in found.values() if _alive(p)]

    def output(self) -> str:
        return "\n".join(f"[{t:6.1f}] {line}" for t, line in self.lines[-40:])

    def wait_signalled(self) -> None:
        deadline = time.monotonic() + PHASE_WITHIN_S
        while not self.signalled.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no line with {self.at!r} (exit code {self.proc.poll()}):\n{self.output()}")

    def wait_exit(self) -> int:
        try:
            code = self.proc.wait(EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name}: still running {EXIT_WITHIN_S:.0f} s after {self.sig.name}:\n{self.output()}")
        self._reader.join(10)
        return code

    def _watch(self) -> None:
        """From the signal on: until none of the case's processes runs (or GONE_WITHIN_S has passed)."""
        assert self.signalled_at is not None
        while True:
            if self.exited_at is None and self.proc.poll() is not None:
                self.exited_at = time.monotonic()
            alive = [p for p in [*self.find(), *self.seen.values()] if _alive(p) and p.pid != self.proc.pid]
            took = time.monotonic() - self.signalled_at
            if not alive and self.exited_at is not None:
                self.gone_after = took
                return
            self.alive = sorted({_describe(p) for p in alive})
            self.lasted.update((d, took) for d in self.alive)
            if took > GONE_WITHIN_S:
                return
            time.sleep(0.2)

    def wait_gone(self) -> float:
        """Seconds from the signal until the last of the case's processes was gone; fails past GONE_WITHIN_S."""
        self._watcher.join(GONE_WITHIN_S + 30)
        if self.gone_after is None:
            pytest.fail(f"{self.name}: still running {GONE_WITHIN_S:.0f} s after {self.sig.name}: "
                        f"{', '.join(self.alive)}\n{self.output()}")
        return self.gone_after

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for p in [*self.find(), *self.seen.values()]:
            try:
                p.kill()  # psutil refuses a PID that now names another process
            except psutil.Error:
                pass


@pytest.fixture
def harnesses() -> Iterator[list[Harness]]:
    started: list[Harness] = []
    yield started
    for h in started:
        h.cleanup()


def _run(tmp: Path, name: str, at: str, sig: signal.Signals, scenario: Path = SCENARIO) -> Harness:
    home = tmp / name
    home.mkdir()
    run_id = f"interrupt-{name}"
    return Harness(name, home, ["run", "--variant", "unpatched", "--scenario", str(scenario), "--runs-dir",
                                str(home / "runs"), "--run-id", run_id], at, sig, run_id)


def _fault_scenario(tmp: Path) -> Path:
    """short-faults with one fault early on: the name server SIGKILLed and started again by the fault's own
    thread (not the main thread, which a death signal would otherwise be bound to). On the default topology (the
    broker inside the proxy's JVM): the name server is all the fault hits, and a harness has two JVMs to start, not
    short-faults' three (whose cluster-mode proxy starts only once the broker registered)."""
    import yaml

    doc = yaml.safe_load((SCENARIO.parent / "short-faults.yaml").read_text())
    doc.pop("topology")
    doc.update(name="interrupt-faults", duration_s=20, faults=[{"at_s": 3, "action": "kill9", "target": "namesrv"}])
    path = tmp / "interrupt-faults.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _check_run(h: Harness, code: int) -> str:
    runs = h.home / "runs"
    final, staging = runs / h.run_id, runs / f".{h.run_id}.partial"
    # Nothing that looks like an archive without being one: every runs/<name> has its manifest.
    for d in runs.iterdir():
        if not d.name.startswith("."):
            assert (d / "manifest.json").is_file(), f"{d} has no manifest"
    assert not final.exists(), f"{h.name}: the run completed (exit {code}); the signal came too late"
    note = (staging / INCOMPLETE).read_text()
    assert f"run {h.run_id}" in note and "never completed" in note and ".partial" in note
    assert not (staging / "manifest.json").exists()
    return ", ".join(sorted(p.name for p in staging.iterdir()))


def _check_signal_outcome(h: Harness, code: int) -> None:
    if h.sig == signal.SIGINT:
        assert code == 130, f"{h.name}: exit {code}\n{h.output()}"
        text = "\n".join(line for _, line in h.lines)
        assert "interrupted; started processes were stopped" in text
        assert "Traceback" not in text, h.output()
    else:
        assert code == -signal.SIGKILL


def _report(h: Harness, code: int, gone_s: float, left: str) -> None:
    took = (h.exited_at or 0) - (h.signalled_at or 0)
    lasted = ", ".join(f"{d} {t:.1f} s" for d, t in sorted(h.lasted.items(), key=lambda x: -x[1]))
    print(f"\n{h.name}: {h.sig.name} at {h.signalled_at - h.t0:.1f} s; exit {code} after {took:.1f} s; "
          f"every process gone after {gone_s:.1f} s ({lasted or 'none outlived it'}); left: {left}")


RUN_PHASES = {
    "brokers-starting": "started RocketMQ",  # the JVMs were just spawned, not yet listening
    "clock-check": "ready in",  # then the clock offset and the scenario's topics and groups
    "export": "Locust finished",  # the last scrape, the Prometheus export, merging events, the manifest
    # Mid-load (Locust master and worker, Prometheus, brokers), with a name server the fault's thread started
    # again: the load phase without a fault has no process this one lacks (its own case was dropped for time).
    "load-after-a-fault": "namesrv back after",
}


@pytest.mark.parametrize("phase", list(RUN_PHASES))
def test_ctrl_c_and_sigkill_of_a_run(phase: str, tmp_path: Path, harnesses: list[Harness]):
    """At the export phase, a third run starts beside the two that are signalled and is never signalled: runs
    started together on one machine (two CI jobs, two people) each finish whole, whatever the others do (each
    takes port slots of its own: the lock, not the ports' state, keeps them apart, since none of their brokers
    listen yet when another looks)."""
    at = RUN_PHASES[phase]
    scenario = _fault_scenario(tmp_path) if phase == "load-after-a-fault" else SCENARIO
    # Side by side: each harness locks the port slots it takes (harness.deploy.local.ports.SlotLocks).
    harnesses.append(_run(tmp_path, f"{phase}-int", at, signal.SIGINT, scenario))
    harnesses.append(_run(tmp_path, f"{phase}-kill", at, signal.SIGKILL, scenario))
    free = _run(tmp_path, f"{phase}-free", "\x00", signal.SIGINT, scenario) if phase == "export" else None
    signalled = list(harnesses)
    if free:
        harnesses.append(free)  # (cleaned up with the others however the test ends)
    for h in signalled:
        h.wait_signalled()
    cases = []
    for h in signalled:
        code = h.wait_exit()
        cases.append((h, code, h.wait_gone()))
    for h, code, gone in cases:
        _check_signal_outcome(h, code)
        _report(h, code, gone, _check_run(h, code))
    if free:
        _check_finished_whole(free)


def _check_finished_whole(h: Harness) -> None:
    """A run no one signalled exits 0 with its whole archive: events, manifest, nothing lost."""
    try:
        code = h.proc.wait(PHASE_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{h.name}: still running after {PHASE_WITHIN_S:.0f} s:\n{h.output()}")
    assert code == 0, f"{h.name}: exit {code}\n{h.output()}"
    archive = h.home / "runs" / h.run_id
    manifest = json.loads((archive / "manifest.json").read_text())
    assert (archive / "events" / "unpatched.parquet").is_file()
    [row] = manifest["summary"]
    assert row["sent"] > 0 and row["ledger"]["lost"] == 0, row


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    return synth.archive(tmp_path_factory.mktemp("runs"), "synth-1", {"unpatched": synth.slow, "patched": synth.fast},
                         messages=40)


COMPARE_PHASES = {
    "spark-starting": "starting Spark",  # the Spark JVM is being launched (and is not yet a session)
    "spark-working": "on Spark",  # Spark reads the archives and computes
    "report-writing": "writing the report",  # the report directory is being staged
}


@pytest.mark.parametrize("phase", list(COMPARE_PHASES))
def test_ctrl_c_and_sigkill_of_a_comparison(phase: str, archive: Path, tmp_path: Path, harnesses: list[Harness]):
    for sig in (signal.SIGINT, signal.SIGKILL):
        home = tmp_path / f"{phase}-{sig.name}"
        home.mkdir()
        harnesses.append(Harness(f"{phase}-{sig.name}", home, [
            "compare", str(archive), "--baseline", "unpatched", "--candidate", "patched", "--bootstrap", "200",
            "--out", str(home / "reports" / "r")], COMPARE_PHASES[phase], sig,
            child="SparkSubmit" if phase == "spark-starting" else None))
    for h in harnesses:
        h.wait_signalled()
    for h in harnesses:
        code = h.wait_exit()
        gone = h.wait_gone()
        _check_signal_outcome(h, code)
        assert h.child_seen or not h.child, f"{h.name}: no Spark JVM was being launched"
        reports = h.home / "reports"
        assert not (reports / "r").exists(), f"{h.name}: the comparison completed (exit {code})"
        staging = reports / ".r.partial"
        if h.sig == signal.SIGINT or not staging.exists():
            assert not staging.exists(), sorted(p.name for p in staging.iterdir())
            left = "nothing"
        else:
            note = (staging / INCOMPLETE).read_text()
            assert "report was never completed" in note and ".partial" in note
            left = f"{staging.name} marked INCOMPLETE"
        # The archive compared is read, never touched.
        assert json.loads((archive / "manifest.json").read_text())["run_id"] == "synth-1"
        assert not (archive / INCOMPLETE).exists()
        _report(h, code, gone, left)
