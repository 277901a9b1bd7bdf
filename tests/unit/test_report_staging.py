"""A report directory is staged, marked INCOMPLETE while written, renamed into place when complete, and
removed when its writing is interrupted; Spark work turns a Ctrl-C or SIGTERM into KeyboardInterrupt."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.core.errors import ConfigError
from harness.core.publish import INCOMPLETE, REMOVE, mark_incomplete
from spark.comparison import Collected
from spark.outputs import Gate
from spark.outputs import write as stage
from tests.unit.by_hand import collected


@pytest.fixture(autouse=True)
def _rows_without_spark(monkeypatch):
    """The retry and ledger rows come from Spark (spark.outputs.write_rows, tested in the spark layer); here a
    part of one row stands for them, so the staging alone is under test."""
    def write_rows(parts: object, directories: dict[str, Path], gate: object = None) -> dict[str, int]:
        for d in directories.values():
            d.mkdir(parents=True)
            pq.write_table(pa.table({"x": [1]}), d / "part-00000.parquet")
        return dict.fromkeys(directories, 1)

    monkeypatch.setattr("spark.outputs.write_rows", write_rows)


@pytest.fixture
def ctrl_c():
    """SIGINT as an interactive Python has it (KeyboardInterrupt): a background job (`make test &`, nohup)
    starts with SIGINT ignored, and an ignored SIGINT is inherited, so the test sets what it is about."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _one_variant() -> Collected:
    """What a comparison of one variant collected: a row of the per-variant table, no more."""
    return collected(per_variant_table=pd.DataFrame({"variant": ["v"]}))


def test_a_report_is_marked_incomplete_until_renamed(tmp_path: Path):
    out = tmp_path / "reports" / "r"
    seen = {}

    def render(summary, plot, samples, staging: Path, **_kw: object) -> None:
        seen["staging"] = staging
        seen["note"] = (staging / INCOMPLETE).read_text()
        (staging / "report.html").write_text("<html/>")

    lines: list[str] = []
    got = stage(_one_variant(), {"verdict": "no change"}, out, render, log=lines.append)
    assert seen["staging"].name == ".r.partial"
    assert f"process {os.getpid()} " in seen["note"] and "never completed" in seen["note"]
    assert "starts with '.' and ends with '.partial'" in seen["note"]
    assert lines == ["writing the report ..."]  # not the staging directory: gone by the time anyone reads it
    assert sorted(p.name for p in out.iterdir()) == ["ledger.parquet", "per_variant.parquet", "report.html",
                                                      "retries.parquet", "summary.json"]
    assert got["out"] == str(out.resolve()) and not seen["staging"].exists()


def test_rows_still_streaming_when_the_report_is_interrupted_never_bring_its_staging_back(tmp_path: Path, monkeypatch,
                                                                                         ctrl_c):
    """A second interrupt (Spark's interruptible delivers one again) while the report waits for its rows' writer
    used to leave that writer running after the staging directory was removed, and pyarrow brought the directory
    back with the next part (a ledger.parquet seen in make test): the writer is halted first."""
    started = threading.Event()
    wrote: list[int] = []

    def write_rows(parts: object, directories: dict[str, Path], gate: Gate) -> dict[str, int]:
        where = next(iter(directories.values()))

        def slow_part(i: int) -> None:  # a part being written when the report is given up
            wrote.append(i)
            pq.write_table(pa.table({"x": [i]}), where / f"part-{i:05d}.parquet")
            started.set()
            time.sleep(0.2)

        gate.write(lambda: where.mkdir(parents=True))
        for i in range(100):
            gate.write(lambda i=i: slow_part(i))
        return {}

    monkeypatch.setattr("spark.outputs.write_rows", write_rows)
    inside = [True]

    def again(signum: int, frame: object) -> None:  # the interrupt delivered again, while the report is given up
        if inside[0]:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, again)

    def render(summary, plot, samples, staging: Path, **_kw: object) -> None:
        started.wait(5)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            stage(_one_variant(), {"verdict": "no change"}, tmp_path / "reports" / "r", render)
        inside[0] = False
        so_far = len(wrote)
        time.sleep(0.5)
    finally:
        inside[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not (tmp_path / "reports" / ".r.partial").exists() and not (tmp_path / "reports" / "r").exists()
    assert 0 < so_far == len(wrote) < 100  # no part started once the report was given up


def test_an_interrupted_report_leaves_nothing(tmp_path: Path):
    out = tmp_path / "reports" / "r"

    def render(summary, plot, samples, staging: Path, **_kw: object) -> None:
        (staging / "half.html").write_text("<ht")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stage(_one_variant(), {}, out, render, log=lambda _s: None)
    assert list((tmp_path / "reports").iterdir()) == []


def test_the_staging_of_a_killed_comparison_is_replaced_a_live_one_refused(tmp_path: Path):
    out = tmp_path / "reports" / "r"
    staging = out.with_name(".r.partial")
    staging.mkdir(parents=True)
    (staging / "summary.json").write_text("{}")
    # A writer of this host that is gone: a child that exited.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    mark_incomplete(staging, "report", out, REMOVE)
    note = (staging / INCOMPLETE).read_text().replace(f"process {os.getpid()} ", f"process {dead.stdout.strip()} ")
    (staging / INCOMPLETE).write_text(note)
    stage(_one_variant(), {}, out, lambda *a, **k: None, log=lambda _s: None)
    assert (out / "summary.json").read_text() == "{}\n" and not staging.exists()

    out2 = tmp_path / "reports" / "r2"
    staging2 = out2.with_name(".r2.partial")
    staging2.mkdir()
    mark_incomplete(staging2, "report", out2, REMOVE)  # written by this very process: still at it
    with pytest.raises(ConfigError, match="exists"):
        stage(_one_variant(), {}, out2, lambda *a, **k: None, log=lambda _s: None)
    assert (staging2 / INCOMPLETE).is_file()


def test_interruptible_turns_a_signal_swallowed_by_spark_into_keyboard_interrupt():
    from spark.session import interruptible

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interruptible(object()):
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(1)
        except KeyboardInterrupt:
            # What pyspark does with it inside a call: the cancelled job's error instead.
            raise RuntimeError("SPARK_JOB_CANCELLED") from None
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(RuntimeError, match="no signal"), interruptible(object()):
        raise RuntimeError("no signal")  # errors without a signal stay what they are


def test_an_interrupt_a_finalizer_dropped_is_delivered_again(monkeypatch, capfd, ctrl_c):
    import weakref

    from spark import session

    class Java:  # a py4j JavaObject: a weakref callback tells the JVM when it is collected
        pass

    monkeypatch.setattr(session, "REDELIVER_S", 0.1)
    hook = sys.unraisablehook
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), session.interruptible(object()):
        obj = Java()
        ref = weakref.ref(obj, lambda _r: signal.raise_signal(signal.SIGINT))  # the Ctrl-C lands in it
        del obj  # the callback runs; its KeyboardInterrupt is dropped, as Python drops it
        assert ref() is None
        while time.monotonic() - t0 < 10:
            time.sleep(0.01)
    assert time.monotonic() - t0 < 5
    assert logging.root.manager.disable == 0  # py4j's logging, quiet meanwhile, is back
    assert sys.unraisablehook is hook
    assert "Exception ignored" not in capfd.readouterr().err


def test_a_command_that_ends_after_a_dropped_interrupt_still_says_interrupted(monkeypatch, ctrl_c):
    from spark import session

    monkeypatch.setattr(session, "REDELIVER_S", 60)
    with pytest.raises(KeyboardInterrupt), session.interruptible(object()):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass


def test_a_spark_jvm_that_never_became_a_session_is_stopped(tmp_path: Path):
    from spark import session

    before = session._descendants()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = time.monotonic()
    session._stop_new(before)  # SIGTERM, and reaped (so Popen sees no status of its own)
    child.wait(5)
    assert time.monotonic() - t0 < 5


def test_a_staging_directory_is_removed_whole_through_a_second_interrupt(tmp_path: Path, monkeypatch):
    """spark.session.interruptible delivers a Ctrl-C again while a comparison unwinds: one that lands inside the
    staging directory's removal must not leave half of it behind."""
    import shutil

    from harness.core import publish

    real_rmtree, calls = shutil.rmtree, []

    def rmtree_interrupted_once(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:  # part of the way through, as a signal handler's exception would
            next(Path(path).iterdir()).unlink()
            raise KeyboardInterrupt
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(publish.shutil, "rmtree", rmtree_interrupted_once)
    final = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt), publish.staged(final, "report") as staging:
        for name in ("a", "b", "c"):
            (staging / name).write_text(name)
        raise KeyboardInterrupt
    assert len(calls) == 2
    assert not publish.staging_of(final).exists() and not final.exists()
