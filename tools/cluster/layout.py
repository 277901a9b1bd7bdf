"""Where the cluster keeps its state, and the addresses it uses: one definition for the starter, the
stopper and the image loader.

Everything listens on 127.0.0.1 except what pods must reach (the API server, the kubelet for logs and
exec, the DNS server): those listen on the node address, which lives on a private bridge of this machine
and is routed nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.paths import state_dir

NODE_NAME = "rmq-harness-node"
BRIDGE = "rmqh0"
NODE_IP = "10.213.0.1"
POD_CIDR = "10.213.0.0/24"
POD_RANGE_START = "10.213.0.10"
SERVICE_CIDR = "10.213.128.0/24"
CLUSTER_DOMAIN = "cluster.local"
API_PORT = 6443
ETCD_CLIENT_PORT = 23790
ETCD_PEER_PORT = 23800
KUBELET_PORT = 10250
PAUSE_IMAGE = "localhost/rmq-harness/pause:1"
# Where kubelet and the CNI plugins write whatever their configured directories (environment.md): removed
# on the way down only if they did not exist before the way up.
HOST_DIRS = ("/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/netns")
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables")
# Which state directory owns the host's cluster, and what its way up changed: outside that directory, so
# a cluster whose starter was killed (and whose directory may since have gone) can still be taken down.
OWNER_MARKER = Path("/run/rmq-harness-cluster.json")


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfigs(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        """system:masters: the harness, helm and the components that kubeadm gives no kubeconfig of their own."""
        return self.kubeconfigs / "super-admin.conf"

    @property
    def etcd(self) -> Path:
        return self.root / "etcd"

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.containerd / "runc"

    @property
    def kubelet(self) -> Path:
        return self.root / "kubelet"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        return self.root / "pids.json"

    @property
    def host(self) -> Path:
        """What the way up changed on the host, so the way down can put it back."""
        return self.root / "host.json"


def default_layout() -> Layout:
    return Layout(state_dir() / "cluster")
