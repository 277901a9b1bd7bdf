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
    HOST_DIRS,
    NODE_IP,
    NODE_NAME,
    OWNER_MARKER,
    POD_CIDR,
    SERVICE_CIDR,
    SYSCTLS,
    Layout,
)


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


def write_configs(lay: Layout) -> None:
    for d in (lay.config, lay.cni_conf, lay.cni_ipam, lay.kubelet, lay.containerd, lay.logs, lay.runc_root):
        d.mkdir(parents=True, exist_ok=True)
    (lay.config / "containerd.toml").write_text(configs.containerd_toml(lay))
    (lay.cni_conf / "10-rmq-harness.conflist").write_text(configs.cni_conflist(lay))
    (lay.config / "kubelet.yaml").write_text(configs.kubelet_yaml(lay))
    (lay.config / "kube-proxy.yaml").write_text(configs.kube_proxy_yaml(lay))
    (lay.config / "Corefile").write_text(configs.corefile(lay))
    (lay.config / "resolv.conf").write_text(f"search {CLUSTER_DOMAIN}\n")
