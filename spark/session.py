"""A SparkSession that stays on loopback and uses this virtualenv's Python for its workers; and how an
interrupt (Ctrl-C, SIGTERM) reaches the Spark work of a command."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import psutil

from harness.core import process

# How long a Spark JVM that never became a session gets to exit on SIGTERM before it is killed.
ABANDONED_JVM_STOP_S = 10.0


def _descendants() -> dict[int, psutil.Process]:
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _stop_new(before: dict[int, psutil.Process]) -> None:
    """Stop the processes started (directly or not) since ``before`` was taken: the Spark JVM of a session
    that did not come up, and whatever it started."""
    process.terminate([p for pid, p in _descendants().items() if pid not in before], ABANDONED_JVM_STOP_S)


def local_session(master: str | None = "local[*]", app: str = "rmq-harness-compare",
                  log: Callable[[str], None] | None = None) -> object:
    """master None: whatever spark-submit configured. ``log``: a line just before the JVM starts."""
    # Set before the JVM starts: Spark otherwise binds the host's external address, and its Python
    # workers would run the system interpreter, which lacks our packages.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The Python workers build and drop arrays of millions of rows (spark.facts). By default glibc hands
    # each freed one back to the kernel, which zeroes fresh pages for the next: measured, a quarter of a
    # task's time. Keep freed memory in the process instead (the workers inherit this environment).
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 * 2**20))
    os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(16 * 2**30))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if master:
        builder = builder.master(master)
    builder = (
        builder.appName(app)
        .config("spark.ui.enabled", "false")  # no web UI port
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("RMQ_HARNESS_SPARK_DRIVER_MEMORY", "2g"))
    )
    before = _descendants()
    if log:
        log(f"starting Spark ({master or 'spark-submit'})")
    try:
        spark = builder.getOrCreate()
    except BaseException:
        # Interrupted (Ctrl-C) or failed while the JVM came up: pyspark has already deleted the file that JVM
        # announces its port in, so it never hears from its driver and outlives this process (measured: still
        # running two minutes after a Ctrl-C). It is stopped here instead.
        _stop_new(before)
        raise
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# A KeyboardInterrupt raised while a finalizer runs (py4j's weakref callbacks send Python code to the JVM at
# any moment of garbage collection) is dropped (Python prints "Exception ignored in ..."): the signal is sent
# again this often until one reaches the command. Seen in about one Ctrl-C of five while Spark worked: without
# it the comparison ran to its end and exited 0.
REDELIVER_S = 0.5


@contextmanager
def interruptible(spark: object) -> Iterator[None]:
    """While Spark works for a command: a Ctrl-C (SIGINT) or SIGTERM comes out as KeyboardInterrupt (exit
    130), whatever Spark call it lands in, and quietly.

    pyspark's own SIGINT handler would cancel the jobs through py4j from inside the call it interrupts (a
    reentrant call on the same connection: py4j logs tracebacks), and that call then often fails with the
    cancelled job's error (SPARK_JOB_CANCELLED, a Py4JJavaError) instead of the interrupt. Here nothing is
    sent: the command ends, and its Spark JVM with it (it exits when its driver's pipe closes). An interrupt
    dropped by a finalizer is delivered again (REDELIVER_S). Only on the main thread (where signals are
    handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []
    previous: dict[int, object] = {}
    quiet = logging.root.manager.disable
    over = threading.Event()  # the interrupt reached the command (or the command ended)
    lock = threading.Lock()
    main = threading.main_thread().ident

    def again() -> None:
        while not over.wait(REDELIVER_S):
            with lock:
                if not over.is_set():
                    signal.pthread_kill(main, seen[0])

    unraisable = sys.unraisablehook

    def dropped(u: object) -> None:
        if not issubclass(u.exc_type, KeyboardInterrupt):  # ours: delivered again, not worth a traceback
            unraisable(u)

    def handler(signum: int, frame: FrameType | None) -> None:
        if over.is_set():
            return  # a redelivery that crossed the end: the interrupt is already on its way
        if not seen:
            logging.disable(logging.CRITICAL)  # py4j logs every call the interrupt breaks, at ERROR
            sys.unraisablehook = dropped
            threading.Thread(target=again, name="redeliver-interrupt", daemon=True).start()
        seen.append(signum)
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):  # None: a handler not set from Python
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    except Exception as e:
        if seen:
            raise KeyboardInterrupt from e
        raise
    else:
        if seen:  # every delivery dropped and the command done anyway: it was still interrupted
            raise KeyboardInterrupt
    finally:
        with lock:
            over.set()
        for sig, before in previous.items():
            signal.signal(sig, before)
        if seen:
            logging.disable(quiet)
            sys.unraisablehook = unraisable
