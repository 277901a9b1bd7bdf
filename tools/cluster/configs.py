"""The components' configuration files, written from the layout (pure: text in, nothing started).

The settings that are not defaults are the ones these machines need (environment.md, "A real Kubernetes
here"): cgroup v1 with the cgroupfs driver, containerd's OOM-score restriction, kube-proxy masquerading
service traffic (pods of one bridge reply straight to each other otherwise, past the DNAT).
"""

from __future__ import annotations

import json

import yaml

from tools.cluster.layout import (
    CLUSTER_DOMAIN,
    CLUSTER_POD_CIDR,
    FIRST,
    KUBELET_PORT,
    NODE_IP,
    PAUSE_IMAGE,
    POD_CIDR,
    Layout,
    Node,
)

CNI_PLUGINS = "/usr/lib/cni"
RUNC = "/usr/sbin/runc"


def containerd_toml(lay: Layout) -> str:
    c = lay.containerd
    return f"""version = 2
root = "{lay.image_store}"
state = "{c / 'state'}"

[grpc]
  address = "{lay.containerd_socket}"

[ttrpc]
  address = "{lay.containerd_socket}.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # root here lacks CAP_SYS_RESOURCE: raising a container's OOM score fails in runc otherwise.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        Root = "{lay.runc_root}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_PLUGINS}"
    conf_dir = "{lay.cni_conf}"
"""


def cni_conflist(lay: Layout, node: Node = FIRST) -> str:
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": "rmq-harness",
        "plugins": [
            # No masquerade by the bridge plugin (it would NAT one node's pods to another's): the host's one rule
            # (host.MASQUERADE) covers traffic that leaves every node's pods.
            {"type": "bridge", "bridge": node.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             # Without a default route a pod reaches its own subnet only: no service IP, no API server.
             "ipam": {"type": "host-local", "dataDir": str(lay.cni_ipam), "routes": [{"dst": "0.0.0.0/0"}],
                      "ranges": [[{"subnet": node.pod_cidr, "rangeStart": node.range_start,
                                   "gateway": node.gateway}]]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2)


def kubelet_yaml(lay: Layout, node: Node = FIRST) -> str:
    # A node's own cgroup root and pod log directory where it is not alone on the machine: a kubelet kills the
    # processes of every pod cgroup under its kubepods that it does not run, and its log GC removes the
    # directories of pods it never saw.
    own = {} if node == FIRST else {"cgroupRoot": node.cgroup_root, "podLogsDir": str(lay.pod_logs)}
    return yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{lay.containerd_socket}",
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(lay.pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [NODE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(lay.config / "resolv.conf"),
        "failSwapOn": False,
        "podCIDR": node.pod_cidr,
        # Images here come from no registry: collected ones could never be pulled back.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "serializeImagePulls": False,
        **own,
    }, sort_keys=False)


def kube_proxy_yaml(lay: Layout, node: Node = FIRST) -> str:
    return yaml.safe_dump({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(lay.admin_kubeconfig)},
        "hostnameOverride": node.name,
        "mode": "iptables",
        "clusterCIDR": CLUSTER_POD_CIDR,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # Node ports open on the private bridge only, never on the machine's own interfaces.
        "nodePortAddresses": [POD_CIDR],
        "iptables": {"masqueradeAll": True},
        # Leave the host's conntrack table size alone (not writable in these VMs).
        "conntrack": {"maxPerCore": 0},
    }, sort_keys=False)


def corefile(lay: Layout) -> str:
    return f""".:53 {{
    bind {NODE_IP}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {lay.admin_kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
