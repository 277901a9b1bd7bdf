"""A SparkSession: on loopback in local mode, at an address the cluster can reach otherwise, with this
virtualenv's Python and the project's code for its workers; and how an interrupt (Ctrl-C, SIGTERM) reaches the
Spark work of a command."""

from __future__ import annotations

import atexit
import io
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

import psutil

from harness.contracts import pod_env
from harness.core import process
from harness.core.errors import ConfigError
from spark import jvm

# Where the driver listens when the master is not local: this, or the address this machine reaches the
# master from (what the master's workers most likely reach back).
DRIVER_HOST_ENV = "RMQ_HARNESS_SPARK_DRIVER_HOST"
# The packages executors import (spark.facts runs harness.measure in tasks): shipped as one zip to every
# executor when the master is not local, so a worker needs pyspark and the dependencies, not a checkout.
SHIPPED = ("harness", "spark")

# How long a Spark JVM that never became a session gets to exit on SIGTERM before it is killed.
ABANDONED_JVM_STOP_S = 10.0
# Spark's logging for the JVMs started here (warnings and errors; none of the banner every start prints): its
# log4j2.properties, named to the driver's JVM by a system property (spark.jvm.driver_options). Not by
# SPARK_CONF_DIR: Spark's launcher puts that directory on the JVM's class path, and a class path with a non-empty
# directory on it can have no class archive (spark.jvm).
CONF_DIR = Path(__file__).resolve().parent / "conf"
# What the Spark JVM writes to stderr on every start and no logging setting reaches: the JVM's own note on the
# incubator module Spark's launcher always adds (--add-modules=jdk.incubator.vector). Dropped; the rest passes.
JVM_NOISE = (b"WARNING: Using incubator modules: ",)


def logging_conf(env: Mapping[str, str]) -> str | None:
    """The JVM option that points log4j2 at CONF_DIR's properties; None when the user's environment
    (SPARK_CONF_DIR, or a Spark installation's conf/) says how Spark logs."""
    home = env.get("SPARK_HOME")
    if env.get("SPARK_CONF_DIR") or (home and (Path(home) / "conf").is_dir()):
        return None
    return f"-Dlog4j2.configurationFile={(CONF_DIR / 'log4j2.properties').as_uri()}"


def _forward(read_fd: int, write_fd: int, drop: tuple[bytes, ...]) -> None:
    """Copy lines from ``read_fd`` to ``write_fd`` until the writers are gone, but those starting with ``drop``."""
    with os.fdopen(read_fd, "rb", buffering=0) as src:
        for raw in iter(src.readline, b""):
            if not raw.startswith(drop):
                os.write(write_fd, raw)
    os.close(write_fd)


@contextmanager
def stderr_filtered(drop: tuple[bytes, ...] = JVM_NOISE) -> Iterator[None]:
    """Processes started in the block write their stderr through a pipe that drops the lines starting with
    ``drop`` and passes the rest to this process's stderr, for as long as they run (pyspark starts its JVM with
    our stderr, and offers no other way to it). This process's own stderr is its own again after the block."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)  # inheritable: the children's fd 2
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd, os.dup(saved), drop), name="stderr-filter",
                     daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the children keep the pipe: the filter ends when the last of them does
        os.close(saved)


def _descendants() -> dict[int, psutil.Process]:
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _stop_new(before: dict[int, psutil.Process]) -> None:
    """Stop the processes started (directly or not) since ``before`` was taken: the Spark JVM of a session
    that did not come up, and whatever it started."""
    process.terminate([p for pid, p in _descendants().items() if pid not in before], ABANDONED_JVM_STOP_S)


def is_local(master: str | None) -> bool:
    return master is not None and (master == "local" or master.startswith("local["))


def is_k8s(master: str | None) -> bool:
    """Executors as pods, made by the driver through this Kubernetes API server (k8s://https://HOST[:PORT])."""
    return master is not None and master.startswith("k8s://")


def _api_server(master: str) -> tuple[str, int]:
    rest = master[len("k8s://"):]
    url = urlsplit(rest if "://" in rest else f"https://{rest}")  # Spark's default scheme: https
    if not url.hostname:
        raise ConfigError(f"Spark master {master!r} names no API server: give k8s://https://HOST[:PORT]")
    return url.hostname, url.port or (80 if url.scheme == "http" else 443)


def driver_host(master: str) -> str:
    """The address the driver listens on for a cluster's executors: RMQ_HARNESS_SPARK_DRIVER_HOST, else the
    local address of this machine's route to the master (loopback for a master on loopback)."""
    if os.environ.get(DRIVER_HOST_ENV):
        return os.environ[DRIVER_HOST_ENV]
    host = urlsplit(master.split("://", 1)[-1] if master.startswith("k8s://") else master).hostname
    if not host:
        raise ConfigError(f"Spark master {master!r} names no host: give spark://HOST:PORT or k8s://https://HOST")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))  # UDP: no packet sent, only a route chosen
            return s.getsockname()[0]
    except OSError as e:
        raise ConfigError(f"Spark master {master!r}: no route to {host} ({e.strerror or e}); "
                          f"check the address or set {DRIVER_HOST_ENV}") from None


def check_reachable(master: str, timeout_s: float = 5.0) -> None:
    """A standalone master (spark://HOST:PORT) or a Kubernetes API server (k8s://https://HOST[:PORT])
    answers a connection, before a JVM is started for it (Spark itself retries for a minute and then fails
    with a page of Java)."""
    if is_k8s(master):
        targets = [_api_server(master)]
    elif master.startswith("spark://"):
        # several masters: ZooKeeper's standby ones
        targets = [(h, p) for h, _, p in (one.rpartition(":") for one in master[len("spark://"):].split(","))]
    else:
        return
    for host, port in targets:
        try:
            with socket.create_connection((host, int(port)), timeout_s):
                return
        except (OSError, ValueError) as e:
            last = getattr(e, "strerror", None) or str(e)
    what = "its API server" if is_k8s(master) else "start it"
    raise ConfigError(f"Spark master {master} cannot be reached ({last}); {what}, or give the right --master")


def k8s_settings(master: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """A driver in a pod of its own (client mode): its executors are owned by that pod, so they go when it
    goes (and they land in its namespace). Outside a pod, spark-defaults.conf or --conf says the rest."""
    if not is_k8s(master):
        return {}
    out = {}
    if env.get(pod_env.POD_NAME):
        out["spark.kubernetes.driver.pod.name"] = env[pod_env.POD_NAME]
    if env.get(pod_env.NAMESPACE):
        out["spark.kubernetes.namespace"] = env[pod_env.NAMESPACE]
    return out


def shipped_code() -> Path:
    """The project's Python packages as one zip for executors that have no checkout of it (addPyFile)."""
    root = Path(__file__).resolve().parent.parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for package in SHIPPED:
            for f in sorted((root / package).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".yaml", ".json", ".j2"):
                    z.write(f, f.relative_to(root).as_posix())
    fd, name = tempfile.mkstemp(prefix="rmq-harness-code-", suffix=".zip")
    with os.fdopen(fd, "wb") as out:
        out.write(buf.getvalue())
    return Path(name)


def local_session(master: str | None = "local[*]", app: str = "rmq-harness-compare",
                  log: Callable[[str], None] | None = None, driver_options: str | None = None) -> object:
    """master None: whatever spark-submit configured. ``log``: a line just before the JVM starts.
    ``driver_options``: the driver JVM's options instead of spark.jvm's."""
    # Set before the JVM starts: Spark otherwise binds the host's external address, and its Python
    # workers would run the system interpreter, which lacks our packages. A cluster's master gets the
    # address it can reach the driver at.
    host = "127.0.0.1" if master is None or is_local(master) else driver_host(master)
    if master is not None and not is_local(master):
        check_reachable(master)
    os.environ.setdefault("SPARK_LOCAL_IP", host)
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
        .config("spark.driver.host", host)
        .config("spark.driver.bindAddress", host)
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("RMQ_HARNESS_SPARK_DRIVER_MEMORY", "2g"))
    )
    if master:  # (spark-submit's own JVM options, if any, are left as given)
        # (Not named ``logging``: that is the module interruptible uses.)
        log_option = logging_conf(os.environ)
        options = " ".join(x for x in (driver_options or jvm.driver_options(), log_option) if x)
        builder = builder.config("spark.driver.extraJavaOptions", options).config(
            "spark.executor.extraJavaOptions", jvm.executor_options())
    # Tasks open s3:// archives themselves (harness.core.storage): a cluster's executors are told the endpoint
    # the driver uses. Never the credentials: Spark shows its settings in its UI and logs; executors take
    # theirs from their own environment, as the AWS SDK does everywhere.
    # The allocator settings above reach a cluster's executors the same way (their Python workers inherit them).
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_EC2_METADATA_DISABLED",
                "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        if os.environ.get(var) and master is not None and not is_local(master):
            builder = builder.config(f"spark.executorEnv.{var}", os.environ[var])
    for key, value in k8s_settings(master, os.environ).items():
        builder = builder.config(key, value)
    before = _descendants()
    if log:
        log(f"starting Spark ({master or 'spark-submit'})")
    try:
        with stderr_filtered():
            spark = builder.getOrCreate()
    except BaseException:
        # Interrupted (Ctrl-C) or failed while the JVM came up: pyspark has already deleted the file that JVM
        # announces its port in, so it never hears from its driver and outlives this process (measured: still
        # running two minutes after a Ctrl-C). It is stopped here instead.
        _stop_new(before)
        raise
    spark.sparkContext.setLogLevel("ERROR")
    if master is not None and not is_local(master):
        code = shipped_code()
        spark.sparkContext.addPyFile(str(code))
        atexit.register(code.unlink, missing_ok=True)  # Spark serves executors from this very file
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
