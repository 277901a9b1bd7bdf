"""One throwaway cluster for every test here: built programs from the cache, a state directory of its own,
and a host without a trace of it afterwards."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import client as kclient

from tools.cluster import binaries, images, kube_api, node, processes
from tools.cluster.layout import BRIDGE, Layout


def host_traces() -> dict[str, object]:
    rules = "".join(subprocess.run([t, "-S", "-t", tb], capture_output=True, text=True).stdout
                    for t in ("iptables", "ip6tables") for tb in ("filter", "nat", "mangle"))
    return {
        "chains": sorted({ln.split()[1] for ln in rules.splitlines()
                          if ln.startswith("-N ") and ln.split()[1].startswith(node.IPTABLES_PREFIXES)}),
        "bridge": Path("/sys/class/net", BRIDGE).exists(),
        "netns": sorted(p.name for p in Path("/run/netns").glob("cni-*")) if Path("/run/netns").is_dir() else [],
        "cgroups": sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods")),
    }


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the local cluster tests need root (bridge, iptables, mounts): run `make test` as root")
    if binaries.missing():
        pytest.fail(f"cluster programs not built ({', '.join(binaries.missing())}): run `make cluster-tools`")
    if node.take_down_stale(print) or Path("/sys/class/net", BRIDGE).exists():
        pytest.fail(f"a cluster is already up on this machine (bridge {BRIDGE}): `make cluster-down` first")
    before = host_traces()
    lay = Layout(tmp_path_factory.mktemp("cluster"))
    previous = os.environ.get("KUBECONFIG")
    try:
        node.up(lay, log=print)
        images.load(lay, images.base(print), print)
        os.environ["KUBECONFIG"] = str(lay.admin_kubeconfig)  # for helm and the harness's k8s backend
        api = kube_api.api(lay)
        yield lay, kclient.CoreV1Api(api)
        api.close()
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        node.down(lay, log=print)
    assert processes.running(lay) == {}
    assert host_traces() == before
