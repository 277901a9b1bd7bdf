"""A real Spark standalone cluster on this machine, from the pyspark installation: a master, and one worker (or
more) each in a mount namespace of its own with a private /tmp (a tmpfs only it sees), as a worker on another
node would be: whatever the driver writes under its /tmp, the executors cannot read, nor one worker's another's,
and the other way round."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.core import process
from harness.core.waiting import Pending, wait_until

START_S = 60.0


@dataclass(frozen=True)
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    ui: str  # the master's web UI (JSON at /json)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _state(ui: str, workers: int = 1) -> dict | Pending:
    try:
        with urllib.request.urlopen(f"{ui}/json", timeout=2) as r:
            state = json.load(r)
    except OSError as e:
        return Pending(f"master UI not answering ({e})")
    alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
    return state if len(alive) >= workers else Pending(f"master {state.get('status')}, {len(alive)} of {workers} "
                                                       "workers alive")


@contextmanager
def standalone(logs: Path, cores: int = 2, memory: str = "2g",
               env: Mapping[str, str] | None = None, workers: int = 1, tmp_size: str = "4g",
               tmp_on: Path | None = None) -> Iterator[Cluster]:
    """Start the master and ``workers`` workers of ``cores`` and ``memory`` each (logs under ``logs``; ``env``
    added to their environment, which the executors inherit, as a node's credentials; each worker's private
    /tmp a tmpfs of ``tmp_size``, or with ``tmp_on`` a directory of its own under it on disk, for shuffles
    larger than memory), wait until every worker registered, yield; stop them all by their PIDs."""
    if shutil.which("unshare") is None:
        raise RuntimeError("unshare (util-linux) is needed to give the Spark worker a /tmp of its own")
    logs.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port = process.free_port(), process.free_port()
    env = {**os.environ, **(env or {}), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(spark_home()),
           "SPARK_NO_DAEMONIZE": "1"}
    started: list[subprocess.Popen] = []
    names = ["master", *(f"worker-{i + 1}" if workers > 1 else "worker" for i in range(workers))]
    try:
        with open(logs / "master.log", "wb") as out:
            started.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(ui_port)], env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
        # Each worker's own /tmp: a tmpfs mounted in a private mount namespace, seen by nothing else. Its work
        # directory (executors' files, the shipped code) lives there.
        for i, name in enumerate(names[1:]):
            # Workers of their own address each when there are several (127.0.0.2, .3, ...: loopback still), so
            # that Spark takes them for different hosts: on one address its executors read each other's shuffle
            # files straight from disk (Spark's readHostLocalDisk setting), which private /tmps, like separate
            # nodes, do not allow (FetchFailedException: NoSuchFileException .../shuffle_0_9_0.index).
            host = "127.0.0.1" if workers == 1 else f"127.0.0.{i + 2}"
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                      "--host", host, "--port", str(process.free_port()), "--webui-port",
                      str(process.free_port()), "--cores", str(cores), "--memory", memory,
                      "--work-dir", "/tmp/spark-worker"]
            if tmp_on is None:
                mount = f"mount -t tmpfs -o size={tmp_size} rmq-harness-worker-tmp /tmp"
            else:
                (tmp_on / name).mkdir(parents=True, exist_ok=True)
                mount = f"mount --bind {shlex.quote(str(tmp_on / name))} /tmp"
            with open(logs / f"{name}.log", "wb") as out:
                started.append(subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mount} && exec "$@"', "sh",
                     *worker],
                    env={**env, "SPARK_LOCAL_IP": host}, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True))

        def alive() -> None:
            for p, name in zip(started, names, strict=True):
                if p.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited ({p.returncode}); see {logs / (name + '.log')}")

        ui = f"http://127.0.0.1:{ui_port}"
        wait_until(f"{workers} Spark standalone worker(s) to register", lambda: _state(ui, workers), START_S, 0.5,
                   alive=alive)
        yield Cluster(f"spark://127.0.0.1:{port}", ui)
    finally:
        # Each in a session of its own: the JVM and whatever it started (executors, Python workers) go with it.
        for p in started:
            procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)] \
                if p.poll() is None else []
            process.terminate(procs, 10.0)
            p.wait(5)


def worker_sees(path: Path) -> bool:
    """Whether ``path`` exists as the Spark worker sees the filesystem (through its mount namespace)."""
    for p in psutil.process_iter(["cmdline"]):
        if "org.apache.spark.deploy.worker.Worker" in (p.info["cmdline"] or []):
            return Path(f"/proc/{p.pid}/root{path.resolve()}").exists()
    raise RuntimeError("no Spark worker running")
