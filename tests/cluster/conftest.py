"""One throwaway cluster of two nodes for every test here (the second a network namespace of this machine with
its own runtime, kubelet and kube-proxy): built programs from the cache, a state directory of its own, and a
host without a trace of it afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client as kclient

from tools.cluster import binaries, host, images, kube_api, node, processes
from tools.cluster.layout import BRIDGE, NODES, SECOND, SECOND_VETH, Layout


def host_traces() -> dict[str, object]:
    rules = "".join(subprocess.run([t, "-S", "-t", tb], capture_output=True, text=True).stdout
                    for t in ("iptables", "ip6tables") for tb in ("filter", "nat", "mangle"))
    return {
        "chains": sorted({ln.split()[1] for ln in rules.splitlines()
                          if ln.startswith("-N ") and ln.split()[1].startswith(node.IPTABLES_PREFIXES)}),
        "bridge": Path("/sys/class/net", BRIDGE).exists(),
        "netns": sorted(p.name for p in Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else [],
        "veth": Path("/sys/class/net", SECOND_VETH).exists(),
        "cgroups": sorted(str(p) for p in node.pod_cgroups()),
        "node_cgroups": sorted(str(h / SECOND.cgroup_root.strip("/")) for h in host.cgroup_hierarchies()
                               if (h / SECOND.cgroup_root.strip("/")).exists()),
        "routes": [r for r in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout.splitlines()
                   if SECOND.pod_cidr in r],
    }


def keep_evidence(lay: Layout, where: Path) -> None:
    """What a failed cluster test leaves to read afterwards, before the down removes it: every component's log,
    the pods' logs and the local volumes (a run's archive, or the .partial one a failed run left)."""
    import shutil

    where.mkdir(parents=True)
    pods = [(f"pods{n.suffix}", lay.of(n).pod_logs or Path("/var/log/pods")) for n in NODES]
    for name, src in (("components", lay.logs), ("volumes", lay.volumes), *pods):
        if src.is_dir():
            shutil.copytree(src, where / name, symlinks=True, ignore_dangling_symlinks=True, dirs_exist_ok=True)
    print(f"a cluster test failed: its cluster's logs and volumes are kept in {where}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, request):
    if os.geteuid() != 0:
        pytest.fail("the local cluster tests need root (bridge, iptables, mounts): run `make test` as root")
    if binaries.missing():
        pytest.fail(f"cluster programs not built ({', '.join(binaries.missing())}): run `make cluster-tools`")
    if node.take_down_stale(print) or Path("/sys/class/net", BRIDGE).exists():
        pytest.fail(f"a cluster is already up on this machine (bridge {BRIDGE}): `make cluster-down` first")
    before = host_traces()
    lay = Layout(tmp_path_factory.mktemp("cluster"))
    previous = os.environ.get("KUBECONFIG")
    # Stopped by SIGTERM (a CI's timeout, a kill by PID, a shell's background job that ignores Ctrl-C), the
    # layer unwinds as on Ctrl-C and takes the cluster down, instead of leaving it running on the host.
    sigterm = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        node.up(lay, log=print, nodes=len(NODES))
        images.load([lay.of(n) for n in NODES], images.base(print), print)
        os.environ["KUBECONFIG"] = str(lay.admin_kubeconfig)  # for helm and the harness's k8s backend
        api = kube_api.api(lay)
        failed = request.session.testsfailed
        yield lay, kclient.CoreV1Api(api)
        api.close()
        if request.session.testsfailed > failed:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            keep_evidence(lay, tmp_path_factory.getbasetemp().parent / f"rmq-harness-cluster-failed-{stamp}")
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        node.down(lay, log=print)
        signal.signal(signal.SIGTERM, sigterm)
    assert processes.running(lay) == {}
    assert host_traces() == before
