"""The JVM options Spark's JVMs run the analysis with, and the class archive that starts the driver's JVM in half
the time.

Spark's JVMs here move Arrow batches between the Python workers, which do the computing: the optimising compiler
(C2) costs CPU at start and buys nothing, so they compile with C1 only. And most of a driver's start is loading and
linking the same ten thousand classes every time: an application class-data archive (AppCDS, JDK 13+) of the classes
a comparison loads, made once by ``build`` (`make setup`) in the user cache for this java and this Spark, maps them
in instead. A missing, stale or damaged archive is ignored by the JVM (sharing is "auto"), silently: it costs
start-up time, never a result. Measured 2026-11-29 on 2 cores (`tests/benchmarks/bench_spark_start.py`, median of 3,
bench-results/spark-start.json), a local session and its first job (TRAIN's): 18.7 s and 28.8 CPU-seconds as Spark
starts by default, 13.4 s and 15.2 with C1, 8.4 s and 9.8 with C1 and the archive; the committed golden comparison
with both, 11.2 s and 14.6 CPU-s. C1 costs the big jobs nothing: comparisons of 10M events took 99.8 s with it
against 104.5 s without (one run each).

`python -m spark.jvm` builds the archive if it is missing; `python -m tests.benchmarks.bench_spark_start` measures
what each option saves (bench-results/spark-start.json).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.core.paths import cache_dir

JIT = "-XX:TieredStopAtLevel=1"
# The JVM says nothing of an archive it cannot use (another java, another Spark, a half-written file).
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
# What a comparison's driver does, in small: the classes of a session, Arrow to and from Python, a grouped
# pandas function, a shuffle.
TRAIN = """
import sys
from spark.session import local_session
spark = local_session("local[2]", app="rmq-harness-classes", driver_options=sys.argv[1])
def double(batches):
    for b in batches:
        yield b
df = spark.range(0, 1000, 1, 2).mapInArrow(double, "id long")
df.withColumn("k", df.id % 3).groupBy("k").applyInPandas(lambda p: p.head(1)[["k"]], "k long").toArrow()
df.selectExpr("id % 7 as k").groupBy("k").count().orderBy("k").toArrow()
spark.stop()
"""
JVM_EXIT_S = 120.0  # the JVM writes the archive as it exits, after the Python process


def _java() -> Path:
    """The java Spark's launcher runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else Path(shutil.which("java") or "java")
    return found.resolve()


def archive() -> Path:
    """Where the class archive of this java and this Spark is (or would be)."""
    import pyspark

    java = _java()
    size = java.stat().st_size if java.exists() else 0
    stamp = f"{java}|{size}|{pyspark.__version__}|{Path(pyspark.__file__).parent}"
    return cache_dir() / "spark-classes" / f"{hashlib.sha256(stamp.encode()).hexdigest()[:16]}.jsa"


def driver_options() -> str:
    """The driver's JVM options: C1 only, and the class archive when there is one."""
    jsa = archive()
    return " ".join([JIT, *([f"-XX:SharedArchiveFile={jsa}", *QUIET] if jsa.is_file() else [])])


def executor_options() -> str:
    """An executor's JVM options (its node may have no archive, or another Spark): C1 only."""
    return JIT


def _prune(keep: Path) -> None:
    """Archives of Spark installations that are gone (a virtualenv removed, a CI clone deleted): 165 MB each."""
    for other in keep.parent.glob("*.jsa"):
        made_for = other.with_suffix(".spark")
        if other != keep and made_for.is_file() and not Path(made_for.read_text().strip()).is_dir():
            other.unlink(missing_ok=True)
            made_for.unlink(missing_ok=True)


def build(log=print) -> Path | None:  # noqa: ANN001 - a print-like callable
    """The class archive, made if missing: a small Spark job run with the JVM told to archive what it loaded as it
    exits; written under a name of its own and moved into place once the JVM is gone (a run starting meanwhile
    finds either no archive or a whole one). None when it could not be made (said; the analysis runs without).
    Archives of Spark installations that are gone are removed."""
    import pyspark

    jsa = archive()
    jsa.parent.mkdir(parents=True, exist_ok=True)
    jsa.with_suffix(".spark").write_text(str(Path(pyspark.__file__).parent))
    _prune(jsa)
    if jsa.is_file():
        return jsa
    part = jsa.with_name(f".{jsa.stem}.{os.getpid()}.part")
    log(f"building Spark's class archive ({jsa.name}, once for this java and Spark)")
    options = " ".join([JIT, f"-XX:ArchiveClassesAtExit={part}", *QUIET])
    proc = subprocess.Popen([sys.executable, "-c", TRAIN, options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    jvms: dict[int, psutil.Process] = {}
    while proc.poll() is None:  # the JVM outlives the Python process that started it by the archive's writing
        try:
            jvms.update({p.pid: p for p in psutil.Process(proc.pid).children(recursive=True)})
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    _, err = proc.communicate()
    _, alive = psutil.wait_procs(list(jvms.values()), timeout=JVM_EXIT_S)
    if proc.returncode or alive or not part.is_file():
        part.unlink(missing_ok=True)
        why = err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
        log(f"warning: Spark's class archive could not be made ({why}); the analysis starts without it")
        return None
    part.replace(jsa)
    return jsa


if __name__ == "__main__":
    build()  # (one that cannot be made is said, and costs start-up time only: `make setup` goes on)
