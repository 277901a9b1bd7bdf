"""Where the driver listens for a cluster's executors, and a master that cannot be reached refused in one line
before a JVM starts (spark/session.py)."""

import socket

import pytest

from harness.core.errors import ConfigError
from spark.session import DRIVER_HOST_ENV, check_reachable, driver_host, is_k8s, is_local, k8s_settings


def test_local_masters_are_told_from_cluster_ones():
    assert is_local("local[2]") and is_local("local") and is_local("local[*]")
    assert not is_local("spark://127.0.0.1:7077") and not is_local("k8s://https://10.0.0.1:6443")


def test_the_driver_listens_where_the_master_is_reached_from(monkeypatch):
    monkeypatch.delenv(DRIVER_HOST_ENV, raising=False)
    assert driver_host("spark://127.0.0.1:7077") == "127.0.0.1"
    assert driver_host("k8s://https://127.0.0.1:6443") == "127.0.0.1"
    monkeypatch.setenv(DRIVER_HOST_ENV, "10.1.2.3")
    assert driver_host("spark://127.0.0.1:7077") == "10.1.2.3"


def test_a_master_without_a_host_is_refused_in_one_line(monkeypatch):
    monkeypatch.delenv(DRIVER_HOST_ENV, raising=False)
    with pytest.raises(ConfigError, match="names no host") as e:
        driver_host("spark://")
    assert "\n" not in str(e.value)


def test_a_master_nobody_listens_at_is_refused_and_one_listening_is_not():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"spark://127.0.0.1:{port} cannot be reached") as e:
            check_reachable(f"spark://127.0.0.1:{port}", timeout_s=1)  # bound, not listening: refused
        assert "\n" not in str(e.value)
        s.listen()
        check_reachable(f"spark://127.0.0.1:{port}", timeout_s=1)
        check_reachable(f"spark://127.0.0.1:1,127.0.0.1:{port}", timeout_s=1)  # one of several answers


def test_a_kubernetes_masters_api_server_is_checked_before_a_jvm_starts():
    assert is_k8s("k8s://https://10.0.0.1:6443") and not is_k8s("spark://h:7077") and not is_k8s("local[2]")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"k8s://https://127.0.0.1:{port} cannot be reached .*API server") as e:
            check_reachable(f"k8s://https://127.0.0.1:{port}", timeout_s=1)
        assert "\n" not in str(e.value)
        s.listen()
        check_reachable(f"k8s://https://127.0.0.1:{port}", timeout_s=1)
        check_reachable(f"k8s://127.0.0.1:{port}", timeout_s=1)  # no scheme: https, as Spark reads it
    with pytest.raises(ConfigError, match="names no API server"):
        check_reachable("k8s://", timeout_s=1)


def test_a_driver_in_a_pod_owns_its_executor_pods():
    env = {"RMQ_HARNESS_POD_NAME": "rmq-compare-1a2b-x7", "RMQ_HARNESS_NAMESPACE": "rmq-harness"}
    assert k8s_settings("k8s://https://kubernetes.default.svc:443", env) == {
        "spark.kubernetes.driver.pod.name": "rmq-compare-1a2b-x7", "spark.kubernetes.namespace": "rmq-harness"}
    assert k8s_settings("k8s://https://kubernetes.default.svc:443", {}) == {}  # outside a pod: spark-submit's
    assert k8s_settings("spark://127.0.0.1:7077", env) == {} == k8s_settings("local[2]", env)
