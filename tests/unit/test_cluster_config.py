"""The local cluster's pure parts: the Kubernetes wrapper module and the components' configuration."""

import json
import tomllib

import pytest
import yaml

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from tools.cluster import binaries, configs
from tools.cluster.layout import NODE_IP, POD_CIDR, Layout

GO_MOD = """module k8s.io/kubernetes

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/x/y => github.com/x/y v1.2.3
)
"""


def test_each_staging_module_points_at_its_published_twin():
    assert binaries.staging_replaces(GO_MOD, "v1.32.0") == ["\tk8s.io/api => k8s.io/api v0.32.0",
                                                            "\tk8s.io/client-go => k8s.io/client-go v0.32.0"]


def test_a_go_mod_without_staging_modules_is_refused():
    with pytest.raises(HarnessError, match="no staging modules"):
        binaries.staging_replaces("module k8s.io/kubernetes\n", "v1.32.0")


def test_the_version_is_stamped_where_kubelet_and_kubectl_read_it():
    flags = binaries.version_ldflags("v1.32.0")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.32.0" in flags and f"-X {pkg}.gitMinor=32" in flags


def test_configs_carry_what_these_machines_need(tmp_path):
    lay = Layout(tmp_path)
    kubelet = yaml.safe_load(configs.kubelet_yaml(lay))
    assert kubelet["cgroupDriver"] == "cgroupfs" and kubelet["failCgroupV1"] is False
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{lay.containerd_socket}"
    assert kubelet["healthzBindAddress"] == "127.0.0.1" and kubelet["readOnlyPort"] == 0
    proxy = yaml.safe_load(configs.kube_proxy_yaml(lay))
    assert proxy["iptables"]["masqueradeAll"] is True and proxy["nodePortAddresses"] == [POD_CIDR]
    cri = tomllib.loads(configs.containerd_toml(lay))["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True and cri["cni"]["conf_dir"] == str(lay.cni_conf)
    bridge = json.loads(configs.cni_conflist(lay))["plugins"][0]
    assert bridge["ipam"]["ranges"][0][0]["gateway"] == NODE_IP
    assert f"bind {NODE_IP}" in configs.corefile(lay)


def test_the_harness_images_named_stage_is_found_and_kept_under_a_tag_of_its_own(tmp_path):
    """A named stage left untagged is pruned after each build, and with it its cache (the agents' Maven stage
    ran again on every build): images.py tags each one."""
    from harness.core.paths import REPO_ROOT
    from tools.cluster import images

    assert images.stages(REPO_ROOT / "Dockerfile") == ["agents"]
    assert images.stages(REPO_ROOT / "rocketmq.Dockerfile") == []
    (tmp_path / "Containerfile").write_text("FROM a AS one\nRUN x\nfrom b as two\nFROM one\n")
    assert images.stages(tmp_path / "Containerfile") == ["one", "two"]
    assert images.stage_tag("rmq-pop-harness:dev", "agents") == "localhost/rmq-harness/rmq-pop-harness-agents:dev"


def test_a_second_node_has_its_own_runtime_cgroups_logs_and_pod_range(tmp_path):
    """Two kubelets on one machine: each kills the pod cgroups under its kubepods that it does not run and
    removes the log directories of pods it never saw, so the second has its own cgroup root and log directory;
    its own containerd (root, state, socket) and CNI state; pod ranges apart and routed, not masqueraded."""
    import ipaddress

    from tools.cluster.layout import CLUSTER_POD_CIDR, FIRST, SECOND

    lay = Layout(tmp_path)
    first, second = lay.of(FIRST), lay.of(SECOND)
    assert first == lay and second.of(FIRST) == lay
    mine = {f: getattr(second, f) for f in ("containerd", "containerd_socket", "runc_root", "kubelet", "cni_conf",
                                            "cni_ipam", "config", "kubelet_kubeconfig")}
    assert all(v != getattr(first, f) and str(v).startswith(str(tmp_path)) for f, v in mine.items())
    assert second.pki == first.pki and second.logs == first.logs and second.volumes == first.volumes
    k1, k2 = (yaml.safe_load(configs.kubelet_yaml(x, n)) for x, n in ((first, FIRST), (second, SECOND)))
    assert "cgroupRoot" not in k1 and k2["cgroupRoot"] == SECOND.cgroup_root != "/"
    assert k2["podLogsDir"] == str(second.pod_logs) and k2["address"] == SECOND.ip
    assert k2["containerRuntimeEndpoint"] == f"unix://{second.containerd_socket}"
    assert k1["clusterDNS"] == k2["clusterDNS"] == [NODE_IP]
    ranges = []
    for x, n in ((first, FIRST), (second, SECOND)):
        bridge = json.loads(configs.cni_conflist(x, n))["plugins"][0]
        assert bridge["ipMasq"] is False and bridge["bridge"] == n.bridge
        assert bridge["ipam"]["dataDir"] == str(x.cni_ipam)
        ranges.append(ipaddress.ip_network(bridge["ipam"]["ranges"][0][0]["subnet"]))
        assert ranges[-1].subnet_of(ipaddress.ip_network(CLUSTER_POD_CIDR))
        proxy = yaml.safe_load(configs.kube_proxy_yaml(x, n))
        assert proxy["hostnameOverride"] == n.name and proxy["clusterCIDR"] == CLUSTER_POD_CIDR
    assert not ranges[0].overlaps(ranges[1])
    assert ipaddress.ip_address(SECOND.ip) in ranges[0]  # on the first node's bridge, below its pods' range start
    assert ipaddress.ip_address(SECOND.ip) < ipaddress.ip_address(FIRST.range_start)
    cri = tomllib.loads(configs.containerd_toml(second))
    assert cri["state"].startswith(str(second.containerd)) and cri["grpc"]["address"] == str(second.containerd_socket)
    # Each node's image store its own, in the user's cache: it outlives the cluster (images.load skips what it kept).
    assert cri["root"] == str(second.image_store) != str(first.image_store)
    assert second.image_store.is_relative_to(cache_dir())
    assert SECOND.nsenter() == ["nsenter", f"--net=/run/netns/{SECOND.netns}", "--"] and FIRST.nsenter() == []
