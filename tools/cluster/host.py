"""What the cluster changes on the host, and its record to undo it: the sysctls, the bridge and the host
directories as they were, the marker naming the cluster that owns this host, the bridge's address, the
certificates and kubeconfigs (kubeadm's phases) and the components' config files; the commands it runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.core.errors import HarnessError
from tools.cluster import binaries, configs
from tools.cluster.layout import (
    API_PORT,
    BRIDGE,
    CLUSTER_DOMAIN,
    CLUSTER_POD_CIDR,
    FIRST,
    HOST_DIRS,
    NODE_IP,
    NODE_NAME,
    OWNER_MARKER,
    POD_CIDR,
    SECOND_VETH,
    SERVICE_CIDR,
    SYSCTLS,
    Layout,
    Node,
)

# The one masquerade of the cluster: what leaves every node's pods for elsewhere (the bridge plugin's own
# would NAT one node's pods to another's). A chain of its own, named as the down's cleanup finds it.
MASQUERADE = "CNI-RMQH-MASQ"
# Service addresses no kube-proxy has rewritten yet (a Service made a moment ago) refused here, as kube-proxy
# refuses one without endpoints: left alone they follow the default route out of the machine, where this
# sandbox's egress answers any address with HTTP 404 and keeps the connection alive, so a client that
# connected early (Prometheus's http_sd) kept getting 404 from it for the whole run. Rewritten addresses are
# pod addresses by the time the filter table sees them (nat runs first), so only the unrewritten are refused.
UNROUTED_SERVICES = "CNI-RMQH-SVC"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    return proc


def record(lay: Layout) -> None:
    if lay.host.is_file():
        return
    state = {"sysctls": {k: Path("/proc/sys", k).read_text().strip() for k in SYSCTLS if Path("/proc/sys", k).exists()},
             "existed": [d for d in HOST_DIRS if Path(d).exists()],
             "bridge_existed": Path("/sys/class/net", BRIDGE).exists()}
    lay.host.write_text(json.dumps(state, indent=1))
    tmp = OWNER_MARKER.with_suffix(".tmp")
    tmp.write_text(json.dumps({"root": str(lay.root), "host": state}, indent=1))
    tmp.replace(OWNER_MARKER)


def owner() -> Layout | None:
    """The state directory of the cluster this host carries (running or left by a killed starter), if any."""
    if not OWNER_MARKER.is_file():
        return None
    return Layout(Path(json.loads(OWNER_MARKER.read_text())["root"]))


def prepare() -> None:
    for key in SYSCTLS:
        path = Path("/proc/sys", key)
        if not path.exists():
            raise HarnessError(f"/proc/sys/{key} is missing: this kernel lacks what pod networking needs")
        path.write_text("1")
    if not Path("/sys/class/net", BRIDGE).exists():
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
    addrs = sh("ip", "-o", "-4", "addr", "show", "dev", BRIDGE).stdout
    if f" {NODE_IP}/" not in addrs:
        sh("ip", "addr", "add", f"{NODE_IP}/{POD_CIDR.split('/')[1]}", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    rules = sh("iptables", "-t", "nat", "-S", MASQUERADE, check=False)
    if rules.returncode != 0:
        sh("iptables", "-t", "nat", "-N", MASQUERADE)
        sh("iptables", "-t", "nat", "-A", MASQUERADE, "-d", CLUSTER_POD_CIDR, "-j", "RETURN")
        sh("iptables", "-t", "nat", "-A", MASQUERADE, "-j", "MASQUERADE")
        sh("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", CLUSTER_POD_CIDR, "-j", MASQUERADE)
    if sh("iptables", "-S", UNROUTED_SERVICES, check=False).returncode != 0:
        sh("iptables", "-N", UNROUTED_SERVICES)
        sh("iptables", "-A", UNROUTED_SERVICES, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
        sh("iptables", "-A", UNROUTED_SERVICES, "-j", "REJECT")
        for chain in ("FORWARD", "OUTPUT"):  # every node's pods leave through the host's FORWARD
            sh("iptables", "-A", chain, "-d", SERVICE_CIDR, "-j", UNROUTED_SERVICES)


def in_node(node: Node, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """A command in ``node``'s network namespace (the host's mounts)."""
    return sh(*node.nsenter(), *argv, check=check)


def add_node(node: Node) -> None:
    """``node``'s network namespace joined to BRIDGE at its address by a veth, its default route through the
    first node, the host's route to its pods, forwarding and bridged traffic through iptables inside it (both
    per namespace), and its pods' cgroup root in every cgroup v1 hierarchy (kubelet's cgroupRoot must exist)."""
    if not Path("/run/netns", node.netns).exists():
        sh("ip", "netns", "add", node.netns)
    if not Path("/sys/class/net", SECOND_VETH).exists():
        sh("ip", "link", "add", SECOND_VETH, "type", "veth", "peer", "name", "eth0", "netns", node.netns)
    sh("ip", "link", "set", SECOND_VETH, "master", BRIDGE, "up")
    if f" {node.ip}/" not in in_node(node, "ip", "-o", "-4", "addr", "show", "dev", "eth0").stdout:
        in_node(node, "ip", "addr", "add", f"{node.ip}/{POD_CIDR.split('/')[1]}", "dev", "eth0")
    in_node(node, "ip", "link", "set", "lo", "up")
    in_node(node, "ip", "link", "set", "eth0", "up")
    in_node(node, "ip", "route", "replace", "default", "via", NODE_IP)
    sh("ip", "route", "replace", node.pod_cidr, "via", node.ip, "dev", BRIDGE)
    for key in SYSCTLS:
        in_node(node, "sh", "-c", f"echo 1 > /proc/sys/{key}")
    for hierarchy in cgroup_hierarchies():
        own = hierarchy / node.cgroup_root.strip("/")
        own.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":  # v1 cpusets start empty: a task cannot join one without CPUs and nodes
            for f in ("cpuset.cpus", "cpuset.mems"):
                (own / f).write_text((hierarchy / f).read_text())


def remove_node(node: Node) -> None:
    """What add_node made: the namespace (and with it the veth, its bridge and its iptables rules), the route
    (gone with the veth) and its cgroup root (emptied by the caller)."""
    if Path("/run/netns", node.netns).exists():
        sh("ip", "netns", "delete", node.netns, check=False)
    if Path("/sys/class/net", SECOND_VETH).exists():
        sh("ip", "link", "delete", SECOND_VETH, check=False)


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (the v1 controllers', systemd's named one, the v2 unified mount): the
    kubelet wants its cgroup root in each ("has some missing paths: /sys/fs/cgroup/systemd/...")."""
    root = Path("/sys/fs/cgroup")
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").is_file())


def pki(lay: Layout, kubeadm: Path) -> None:
    """Certificates and kubeconfigs by kubeadm's own phases (no hand-made PKI)."""
    if lay.admin_kubeconfig.is_file():
        return
    common = ["--kubernetes-version", binaries.KUBERNETES, "--cert-dir", str(lay.pki)]
    sh(str(kubeadm), "init", "phase", "certs", "all", *common, "--apiserver-advertise-address", NODE_IP,
       "--service-cidr", SERVICE_CIDR, "--service-dns-domain", CLUSTER_DOMAIN, "--apiserver-cert-extra-sans",
       f"127.0.0.1,{NODE_NAME}")
    sh(str(kubeadm), "init", "phase", "kubeconfig", "all", *common, "--kubeconfig-dir", str(lay.kubeconfigs),
       "--apiserver-advertise-address", NODE_IP, "--apiserver-bind-port", str(API_PORT), "--node-name", NODE_NAME)


def node_credentials(lay: Layout, node: Node, kubeadm: Path) -> None:
    """A further node's kubelet kubeconfig (system:node:<name>), by kubeadm's phase, from the cluster's CA."""
    own = lay.of(node).kubelet_kubeconfig
    if own.is_file():
        return
    sh(str(kubeadm), "init", "phase", "kubeconfig", "kubelet", "--kubernetes-version", binaries.KUBERNETES,
       "--cert-dir", str(lay.pki), "--kubeconfig-dir", str(own.parent), "--apiserver-advertise-address", NODE_IP,
       "--apiserver-bind-port", str(API_PORT), "--node-name", node.name)


def write_configs(lay: Layout, node: Node = FIRST) -> None:
    """The components' config files: a node's own (containerd, CNI, kubelet, kube-proxy) and, with the first
    node, the cluster's (CoreDNS)."""
    mine = lay.of(node)
    for d in (mine.config, mine.cni_conf, mine.cni_ipam, mine.kubelet, mine.containerd, mine.runc_root, lay.logs,
              *([mine.pod_logs] if mine.pod_logs is not None else [])):
        d.mkdir(parents=True, exist_ok=True)
    (mine.config / "containerd.toml").write_text(configs.containerd_toml(mine))
    (mine.cni_conf / "10-rmq-harness.conflist").write_text(configs.cni_conflist(mine, node))
    (mine.config / "kubelet.yaml").write_text(configs.kubelet_yaml(mine, node))
    (mine.config / "kube-proxy.yaml").write_text(configs.kube_proxy_yaml(mine, node))
    (mine.config / "resolv.conf").write_text(f"search {CLUSTER_DOMAIN}\n")
    if node == FIRST:
        (lay.config / "Corefile").write_text(configs.corefile(lay))
