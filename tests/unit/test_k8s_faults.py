"""Faults on Kubernetes (harness/deploy/k8s/faults.py): which container signals which process, and when the
target counts as back; against stand-ins for the pod's exec and status (no cluster runs here)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from harness.core.errors import HarnessError
from harness.deploy.k8s.faults import PodProcess


class FakePod:
    """A pod whose two containers share a PID namespace: a kill of a JVM bumps its container's restarts."""

    def __init__(self) -> None:
        self.restarts = {"namesrv": 0, "broker": 0}
        self.ready = {"namesrv": True, "broker": True}
        # What tells each JVM apart on its command line (the file it was started with) -> (container, pid).
        self.pids = {"/etc/rocketmq/namesrv.conf": ("namesrv", 7), "/etc/rocketmq/rmq-proxy.json": ("broker", 9)}
        self.execs: list[tuple[str, list[str]]] = []

    def pods(self) -> list:
        statuses = [NS(name=c, restart_count=self.restarts[c], ready=self.ready[c]) for c in self.restarts]
        return [NS(metadata=NS(name="v-0", deletion_timestamp=None), status=NS(container_statuses=statuses))]

    def exec_(self, pod: str, container: str, argv: list[str]) -> tuple[int, str, str]:
        self.execs.append((container, argv))
        if argv[-1] in self.pids:  # the find script's argument: the marker
            return 0, f"{self.pids[argv[-1]][1]}\n", ""
        sig, pid = argv[-1].split()[1:]
        target = next(c for c, p in self.pids.values() if str(p) == pid)
        if sig in ("-KILL", "-TERM"):
            self.restarts[target] += 1  # the kubelet starts the container again
        return 0, "", ""


@pytest.mark.parametrize("target, signaller, pid", [("broker", "namesrv", 9), ("namesrv", "broker", 7)])
def test_a_jvm_is_signalled_from_the_pods_other_container_and_back_when_its_container_is(target, signaller, pid):
    pod, started = FakePod(), []
    proc = PodProcess("v", target, pod.exec_, pod.pods, ready_timeout_s=5, after_start=lambda: started.append(1))
    assert not proc.holds_down
    proc.kill()
    assert [argv[-1] for c, argv in pod.execs if c == signaller][-1] == f"kill -KILL {pid}"
    proc.start()
    assert started == [1] and "restarts 1" in proc.describe()
    proc.pause()
    proc.resume()
    assert [argv[-1] for _, argv in pod.execs if argv[-1].startswith("kill")][-2:] == [f"kill -STOP {pid}",
                                                                                       f"kill -CONT {pid}"]
    assert {c for c, _ in pod.execs} == {signaller}


def test_a_container_that_does_not_come_back_is_an_error():
    pod = FakePod()
    proc = PodProcess("v", "broker", pod.exec_, pod.pods, ready_timeout_s=1.5)
    proc.terminate()
    pod.ready["broker"] = False
    with pytest.raises(HarnessError, match="waited 2 s for .*container broker to be back; last seen: restarts"):
        proc.start()


def test_no_such_jvm_says_the_pods_must_share_their_process_namespace():
    pod = FakePod()
    pod.pids = {}
    with pytest.raises(HarnessError, match="must share their process namespace"):
        PodProcess("v", "broker", lambda p, c, a: (0, "", ""), pod.pods, ready_timeout_s=1).kill()
    with pytest.raises(HarnessError, match="has no slave"):
        PodProcess("v", "slave", pod.exec_, pod.pods, ready_timeout_s=1)


def test_in_two_masters_each_broker_is_told_from_the_other_by_its_file_and_signalled_from_another_container():
    from harness.inputs.brokers import Topology

    pod = FakePod()
    pod.restarts = {"namesrv": 0, "broker": 0, "broker-b": 0, "proxy": 0}
    pod.ready = dict.fromkeys(pod.restarts, True)
    pod.pids = {"/etc/rocketmq/namesrv.conf": ("namesrv", 7), "/etc/rocketmq/broker.conf": ("broker", 8),
                "/etc/rocketmq/broker-b.conf": ("broker-b", 9), "/etc/rocketmq/rmq-proxy.json": ("proxy", 10)}
    two = Topology(proxy="cluster", masters=2)
    for target, pid in (("broker-b", 9), ("proxy", 10), ("broker", 8), ("namesrv", 7)):
        proc = PodProcess("v", target, pod.exec_, pod.pods, ready_timeout_s=5, topology=two)
        proc.kill()
        signaller, argv = pod.execs[-1]
        assert argv[-1] == f"kill -KILL {pid}" and signaller != target
        proc.start()
        assert pod.restarts[target] == 1
    with pytest.raises(HarnessError, match="has no slave"):
        PodProcess("v", "slave", pod.exec_, pod.pods, ready_timeout_s=1, topology=two)
