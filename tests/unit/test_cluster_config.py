"""The local cluster's pure parts: the Kubernetes wrapper module and the components' configuration."""

import json
import tomllib

import pytest
import yaml

from harness.core.errors import HarnessError
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
