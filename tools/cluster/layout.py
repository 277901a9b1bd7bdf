"""Where the cluster keeps its state, and the addresses it uses: one definition for the starter, the
stopper and the image loader.

Everything listens on 127.0.0.1 except what pods must reach (the API server, the kubelet for logs and
exec, the DNS server): those listen on the node address, which lives on a private bridge of this machine
and is routed nowhere else.

A second node (``SECOND``) is a network namespace of this machine joined to that bridge by a veth: its own
containerd, kubelet and kube-proxy, its pods on a bridge and address range of its own, routed (not NATed)
to the first node's, its pods' cgroups under a root of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.paths import cache_dir, state_dir

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
# Every node's pods (the second node's range after the first's): what leaves it for elsewhere is masqueraded
# by the host, what stays in it is routed with its pod addresses, as a real cluster's network does.
CLUSTER_POD_CIDR = "10.213.0.0/23"


@dataclass(frozen=True)
class Node:
    """One kubelet's node: its name, its address on BRIDGE, its pods' range, bridge and gateway, the network
    namespace its components run in (None: the host's), its pods' cgroup root, and the suffix of its
    components' names and directories."""

    name: str
    ip: str
    pod_cidr: str
    bridge: str
    gateway: str
    range_start: str
    netns: str | None
    cgroup_root: str
    suffix: str

    def nsenter(self) -> list[str]:
        """What a command of this node runs under: its network namespace, the host's mounts (the kubelet's
        volume mounts must be seen by its containerd: `ip netns exec` would give each its own)."""
        return [] if self.netns is None else ["nsenter", f"--net=/run/netns/{self.netns}", "--"]


FIRST = Node(NODE_NAME, NODE_IP, POD_CIDR, BRIDGE, NODE_IP, POD_RANGE_START, None, "/", "")
SECOND = Node(f"{NODE_NAME}-b", "10.213.0.2", "10.213.1.0/24", "rmqh1", "10.213.1.1", "10.213.1.10", "rmqh-b",
              "/rmqh-b", "-b")
NODES = (FIRST, SECOND)
# The second node's end of its veth lives in its namespace as eth0; the host's end is enslaved to BRIDGE.
SECOND_VETH = "rmqh-b0"
# Where kubelet and the CNI plugins write whatever their configured directories (environment.md): removed
# on the way down only if they did not exist before the way up.
HOST_DIRS = ("/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/netns")
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables")
# Which state directory owns the host's cluster, and what its way up changed: outside that directory, so
# a cluster whose starter was killed (and whose directory may since have gone) can still be taken down.
OWNER_MARKER = Path("/run/rmq-harness-cluster.json")


@dataclass(frozen=True)
class Layout:
    """The cluster's directories, and those of one of its nodes (``node``; Layout.of): the first node's own are
    the cluster's, a further node's sit under a directory of its own (containerd, kubelet, CNI, configs); the
    cluster-wide ones (PKI, logs, PIDs, volumes) are shared."""

    root: Path
    node: Node = FIRST

    def of(self, node: Node) -> Layout:
        return replace(self, node=node)

    @property
    def _own(self) -> Path:
        return self.root if self.node == FIRST else self.root / f"node{self.node.suffix}"

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
        return self._own / "containerd"

    @property
    def image_store(self) -> Path:
        """The node's containerd root (images, their unpacked layers, containers' records): in the user's cache,
        outliving the cluster, so a cluster started again finds the images it had (images.load) instead of
        importing about 3 GB a node again. What an earlier cluster left running in it is forgotten at the start
        (images.forget_containers); nothing is mounted under it (containers' roots are under ``containerd``)."""
        return cache_dir() / "cluster" / "containerd" / self.node.name

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.containerd / "runc"

    @property
    def kubelet(self) -> Path:
        return self._own / "kubelet"

    @property
    def cni_conf(self) -> Path:
        return self._own / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self._own / "cni" / "ipam"

    @property
    def config(self) -> Path:
        return self._own / "config"

    @property
    def pod_logs(self) -> Path | None:
        """The kubelet's podLogsDir: its default (None: /var/log/pods) on the first node, a directory of its own
        on another (a kubelet's log GC removes the directories of pods it never ran: two cannot share one)."""
        return None if self.node == FIRST else self._own / "pods-logs"

    @property
    def node_name(self) -> str:
        return self.node.name

    @property
    def kubelet_kubeconfig(self) -> Path:
        """The kubelet's credentials: system:node:<its node> (NodeRestriction lets a kubelet act for its own)."""
        return self.kubeconfigs / "kubelet.conf" if self.node == FIRST else self._own / "kubeconfig" / "kubelet.conf"

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
    def nodes(self) -> Path:
        """Which nodes the cluster has: written by up, read by everything after."""
        return self.root / "nodes.json"

    @property
    def host(self) -> Path:
        """What the way up changed on the host, so the way down can put it back."""
        return self.root / "host.json"


def default_layout() -> Layout:
    return Layout(state_dir() / "cluster")
