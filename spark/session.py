"""A SparkSession that stays on loopback and uses this virtualenv's Python for its workers."""

from __future__ import annotations

import os
import sys


def local_session(master: str | None = "local[*]", app: str = "rmq-harness-compare") -> object:
    """master None: whatever spark-submit configured."""
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
