"""A Spark executor in a Kubernetes pod of the harness image: what Spark's own image does with its
`executor` argument (entrypoint.sh), for an image where Spark is the pip-installed pyspark.

Spark on Kubernetes starts an executor pod with the driver's settings in SPARK_* variables and the single
argument `executor`; the chart's executor pod template names this module as the container's command, so
the image's entry point (rmq-harness) is never asked to run `executor`. `argv` is pure; `main` execs Java
(the JVM becomes the container's process, and its exit the pod's)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

# The settings Spark gives every executor pod (BasicExecutorFeatureStep); without them it is no executor.
REQUIRED = ("SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_CORES", "SPARK_APPLICATION_ID",
            "SPARK_EXECUTOR_POD_IP", "SPARK_EXECUTOR_MEMORY", "SPARK_EXECUTOR_POD_NAME")
JAVA_OPT_PREFIX = "SPARK_JAVA_OPT_"
BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"


def spark_home() -> Path:
    """The pyspark installation: its jars/ is Spark's."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def argv(env: Mapping[str, str], home: Path) -> list[str]:
    """The executor's command line from the pod's environment (``home``: where Spark's jars/ is)."""
    missing = [k for k in REQUIRED if not env.get(k)]
    if missing:
        raise SystemExit(f"not a Spark executor pod: {', '.join(missing)} unset (Spark on Kubernetes sets them)")
    # The driver's executor Java options, in their index order (SPARK_JAVA_OPT_0, _1, ... _10).
    opts = [env[k] for k in sorted((k for k in env if k.startswith(JAVA_OPT_PREFIX)),
                                   key=lambda k: int(k[len(JAVA_OPT_PREFIX):] or 0))]
    classpath = [p for p in (env.get("SPARK_CONF_DIR"), f"{home}/jars/*", env.get("SPARK_EXTRA_CLASSPATH")) if p]
    java = f"{env['JAVA_HOME']}/bin/java" if env.get("JAVA_HOME") else "java"
    memory = env["SPARK_EXECUTOR_MEMORY"]
    return [java, *opts, f"-Xms{memory}", f"-Xmx{memory}", "-cp", ":".join(classpath), BACKEND,
            "--driver-url", env["SPARK_DRIVER_URL"], "--executor-id", env["SPARK_EXECUTOR_ID"],
            "--cores", env["SPARK_EXECUTOR_CORES"], "--app-id", env["SPARK_APPLICATION_ID"],
            "--hostname", env["SPARK_EXECUTOR_POD_IP"],
            "--resourceProfileId", env.get("SPARK_RESOURCE_PROFILE_ID", "0"),
            "--podName", env["SPARK_EXECUTOR_POD_NAME"]]


def main(args: list[str]) -> None:
    if args and args != ["executor"]:
        raise SystemExit(f"usage: python -m spark.k8s_executor executor (got {' '.join(args)!r})")
    home = spark_home()
    command = argv(os.environ, home)
    # The Python workers the executor starts find pyspark where the driver's did (SPARK_HOME), and run the
    # interpreter the driver named (PYSPARK_PYTHON arrives with each task).
    os.environ["SPARK_HOME"] = str(home)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
