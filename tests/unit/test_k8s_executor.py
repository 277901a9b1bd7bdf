"""An executor pod's command line (spark/k8s_executor.py): what Spark's own image runs for `executor`,
from the variables Spark sets on the pod."""

from pathlib import Path

import pytest

from spark.k8s_executor import BACKEND, argv

POD = {"SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.213.0.9:7078", "SPARK_EXECUTOR_ID": "2",
       "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "spark-app-1", "SPARK_EXECUTOR_POD_IP": "10.213.0.12",
       "SPARK_EXECUTOR_MEMORY": "1024m", "SPARK_EXECUTOR_POD_NAME": "rmq-harness-compare-exec-2",
       "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_CONF_DIR": "/opt/spark/conf",
       # the driver's Java options, in index order (10 after 9, not after 1)
       "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078", "SPARK_JAVA_OPT_10": "-Dlast=1",
       "SPARK_JAVA_OPT_9": "--add-opens=java.base/java.nio=ALL-UNNAMED", "SPARK_JAVA_OPT_1": "-Dsecond=1",
       "JAVA_HOME": "/usr/lib/jvm/java-17"}


def test_the_executor_runs_sparks_backend_with_the_drivers_options_in_order():
    cmd = argv(POD, Path("/site/pyspark"))
    assert cmd[:5] == ["/usr/lib/jvm/java-17/bin/java", "-Dspark.driver.port=7078", "-Dsecond=1",
                       "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dlast=1"]
    assert cmd[5:9] == ["-Xms1024m", "-Xmx1024m", "-cp", "/opt/spark/conf:/site/pyspark/jars/*"]
    assert cmd[9] == BACKEND
    flags = dict(zip(cmd[10::2], cmd[11::2], strict=True))
    assert flags == {"--driver-url": POD["SPARK_DRIVER_URL"], "--executor-id": "2", "--cores": "1",
                     "--app-id": "spark-app-1", "--hostname": "10.213.0.12", "--resourceProfileId": "0",
                     "--podName": "rmq-harness-compare-exec-2"}


def test_java_from_the_path_without_java_home_and_the_default_resource_profile():
    env = {k: v for k, v in POD.items() if k not in ("JAVA_HOME", "SPARK_RESOURCE_PROFILE_ID", "SPARK_CONF_DIR")}
    cmd = argv(env, Path("/p"))
    assert cmd[0] == "java" and cmd[cmd.index("-cp") + 1] == "/p/jars/*"
    assert cmd[cmd.index("--resourceProfileId") + 1] == "0"


def test_a_pod_that_is_no_executor_is_told_what_is_missing():
    with pytest.raises(SystemExit, match="SPARK_DRIVER_URL, SPARK_EXECUTOR_ID unset"):
        argv({k: v for k, v in POD.items() if k not in ("SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID")}, Path("/p"))
