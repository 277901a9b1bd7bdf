"""The cluster's life: up (bridge, certificates, etcd, control plane, containerd, kubelet, kube-proxy, DNS,
every one a process recorded by PID and start time; with ``nodes=2`` a second node's containerd, kubelet and
kube-proxy in a network namespace of its own), status, and down (the processes, the containers, and every
trace on the host: mounts, network namespaces, iptables chains, the bridge, sysctls, cgroups and the host
directories kubelet created). Its steps: processes.py (the components by PID), host.py (what up changes on the
host), kube_api.py (the API).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from harness.core import process
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Deadline
from tools.cluster import binaries, configs, host, images, kube_api, processes
from tools.cluster.layout import (
    API_PORT,
    BRIDGE,
    CLUSTER_DOMAIN,
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    FIRST,
    HOST_DIRS,
    NODE_IP,
    NODE_NAME,
    NODES,
    OWNER_MARKER,
    SERVICE_CIDR,
    Layout,
    Node,
)

# Started in this order, stopped in the reverse (kubelet before containerd, so nothing restarts a container
# being stopped; the API server and etcd last, so the others can still say goodbye).
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet",
         "kube-proxy", "coredns")
# Each further node's own components (named with its suffix), in the order they start.
NODE_COMPONENTS = ("containerd", "kubelet", "kube-proxy")
HOST_TOOLS = {"containerd": "containerd", "runc": "runc", "conntrack": "conntrack", "iptables": "iptables",
              "ip": "iproute2", "podman": "podman", "debootstrap": "debootstrap"}
IPTABLES_PREFIXES = ("KUBE-", "CNI-")


def preflight() -> None:
    """What the cluster needs from the machine, each missing thing named with its fix."""
    if os.geteuid() != 0:
        raise ConfigError("the local cluster needs root (it creates a bridge, iptables rules and mounts): "
                          "run `make cluster-up` as root")
    missing = sorted({pkg for tool, pkg in HOST_TOOLS.items() if shutil.which(tool) is None})
    if missing or not Path(configs.CNI_PLUGINS, "bridge").is_file():
        pkgs = [*missing, *([] if Path(configs.CNI_PLUGINS, "bridge").is_file() else ["containernetworking-plugins"])]
        raise ConfigError(f"the local cluster needs {', '.join(pkgs)}: run `make cluster-up` (installs them with apt)")


def take_down_stale(log: Callable[[str], None]) -> bool:
    """Take down a cluster whose processes are all gone (its starter was killed: a CI runner's restart, a
    kill -9) but whose traces are still on the host. A running cluster is left alone; True if one was."""
    lay = host.owner()
    if lay is None:
        return False
    if processes.running(lay):
        return True
    log(f"a cluster left by a killed run ({lay.root}) still had traces on this host: taking them down")
    down(lay, log)
    return False


def nodes_of(lay: Layout) -> tuple[Node, ...]:
    """The nodes the cluster was brought up with (the first alone when up never said)."""
    count = json.loads(lay.nodes.read_text())["nodes"] if lay.nodes.is_file() else 1
    return NODES[:count]


def components(nodes: tuple[Node, ...]) -> tuple[str, ...]:
    """Every component's process name, the further nodes' with their suffixes."""
    return ORDER + tuple(f"{c}{n.suffix}" for n in nodes if n != FIRST for c in NODE_COMPONENTS)


def up(lay: Layout, log: Callable[[str], None], nodes: int = 1) -> None:
    if not 1 <= nodes <= len(NODES):
        raise ConfigError(f"a cluster of {nodes} nodes: this machine's cluster has 1 or {len(NODES)}")
    preflight()
    progs = binaries.build(log)
    alive = processes.running(lay)
    if alive and len(nodes_of(lay)) != nodes:
        raise HarnessError(f"the cluster at {lay.root} is up with {len(nodes_of(lay))} node(s), not {nodes}: "
                           "`make cluster-down` first")
    if set(components(NODES[:nodes])) <= set(alive):
        log(f"cluster already up ({lay.root})")
        return
    if alive:
        raise HarnessError(f"a partial cluster is running ({', '.join(sorted(alive))}): "
                           "run `make cluster-down` first")
    other = host.owner()
    if other is not None and other != lay:
        if processes.running(other):
            raise HarnessError(f"another cluster is up on this host ({other.root}); take it down first "
                               "(`make cluster-down`)")
        take_down_stale(log)
    t0 = time.monotonic()
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.nodes.write_text(json.dumps({"nodes": nodes}))
    host.record(lay)
    host.prepare()
    host.pki(lay, progs["kubeadm"])
    host.write_configs(lay)
    kc = lay.kubeconfigs
    pki = lay.pki
    etcd_url = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
    processes.start(lay, "etcd", [str(progs["etcd"]), "--name", "node", "--data-dir", str(lay.etcd),
                                  "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                                  "--listen-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
                                  "--initial-advertise-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
                                  "--initial-cluster", f"node=http://127.0.0.1:{ETCD_PEER_PORT}",
                                  "--listen-metrics-urls", "http://127.0.0.1:23810", "--log-level", "warn"], log)
    processes.start(lay, "kube-apiserver", [
        str(progs["kube-apiserver"]), f"--etcd-servers={etcd_url}", f"--bind-address={NODE_IP}",
        f"--advertise-address={NODE_IP}", f"--secure-port={API_PORT}", f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--client-ca-file={pki / 'ca.crt'}", f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        # logs and exec reach the kubelet by the node's address, not by resolving its name.
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
        "--profiling=false"], log)
    processes.wait_up("the API server to be ready", lambda: kube_api.ready(lay), lay, "kube-apiserver", 120)
    log(f"API server ready at https://{NODE_IP}:{API_PORT} ({time.monotonic() - t0:.1f} s)")
    kube_api.grant_cluster_admins(lay)
    kube_api.default_storage(lay, nodes)
    cm = str(kc / "controller-manager.conf")
    processes.start(lay, "kube-controller-manager", [
        str(progs["kube-controller-manager"]), f"--kubeconfig={cm}", f"--authentication-kubeconfig={cm}",
        f"--authorization-kubeconfig={cm}", "--bind-address=127.0.0.1", "--secure-port=10257",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--root-ca-file={pki / 'ca.crt'}", f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--use-service-account-credentials=true",
        # No node IPAM controller: the node's pod range is the kubelet's own (host-local on the bridge).
        "--controllers=*,-nodeipam", "--leader-elect=false", "--profiling=false"], log)
    sc = str(kc / "scheduler.conf")
    processes.start(lay, "kube-scheduler", [
        str(progs["kube-scheduler"]), f"--kubeconfig={sc}", f"--authentication-kubeconfig={sc}",
        f"--authorization-kubeconfig={sc}", "--bind-address=127.0.0.1", "--secure-port=10259",
        "--leader-elect=false", "--profiling=false"], log)
    _start_containerd(lay, FIRST, [], log)
    images.load_pause(lay, progs["pause"], log)
    processes.start(lay, "kubelet", [
        str(progs["kubelet"]), f"--config={lay.config / 'kubelet.yaml'}", f"--kubeconfig={kc / 'kubelet.conf'}",
        f"--root-dir={lay.kubelet}", f"--cert-dir={lay.kubelet / 'pki'}", f"--node-ip={NODE_IP}",
        f"--hostname-override={NODE_NAME}"], log)
    processes.wait_up("the node to be Ready", lambda: kube_api.node_ready(lay), lay, "kubelet", 120)
    log(f"node {NODE_NAME} Ready ({time.monotonic() - t0:.1f} s)")
    processes.start(lay, "kube-proxy", [str(progs["kube-proxy"]), f"--config={lay.config / 'kube-proxy.yaml'}"],
                    log)
    processes.start(lay, "coredns", [str(progs["coredns"]), "-conf", str(lay.config / "Corefile")], log)
    for further in NODES[1:nodes]:
        add_node(lay, further, progs, log)
        log(f"node {further.name} Ready ({time.monotonic() - t0:.1f} s)")
    log(f"cluster up in {time.monotonic() - t0:.1f} s; KUBECONFIG={lay.admin_kubeconfig}")


def _start_containerd(lay: Layout, node: Node, run_in: list[str], log: Callable[[str], None]) -> None:
    """``node``'s containerd, on its image store; started again once an earlier cluster's containers are removed
    from that store (images.forget_containers), so that its CRI starts without them."""
    mine, name = lay.of(node), f"containerd{node.suffix}"
    mine.image_store.mkdir(parents=True, exist_ok=True)
    for again in (False, True):
        processes.start(lay, name, [*run_in, "containerd", "--config", str(mine.config / "containerd.toml")], log)
        processes.wait_up(f"{node.name}'s containerd socket to appear", mine.containerd_socket.exists, lay, name, 60)
        if again or not images.forget_containers(mine, log):
            return
        rec = processes.read_pids(lay)[name]
        process.stop_started([(rec["pid"], rec["started"])], timeout_s=15)
        mine.containerd_socket.unlink(missing_ok=True)


def add_node(lay: Layout, node: Node, progs: dict[str, Path], log: Callable[[str], None]) -> None:
    """A further node: its network namespace and cgroup root (host.add_node), its credentials and configs, then
    its containerd, kubelet and kube-proxy in that namespace, each a process of the cluster's record."""
    mine = lay.of(node)
    host.add_node(node)
    host.node_credentials(lay, node, progs["kubeadm"])
    host.write_configs(lay, node)
    run_in = node.nsenter()
    _start_containerd(lay, node, run_in, log)
    images.load_pause(mine, progs["pause"], log)
    processes.start(lay, f"kubelet{node.suffix}", [
        *run_in, str(progs["kubelet"]), f"--config={mine.config / 'kubelet.yaml'}",
        f"--kubeconfig={mine.kubelet_kubeconfig}", f"--root-dir={mine.kubelet}", f"--cert-dir={mine.kubelet / 'pki'}",
        f"--node-ip={node.ip}", f"--hostname-override={node.name}"], log)
    processes.wait_up(f"node {node.name} to be Ready", lambda: kube_api.node_ready(lay, node.name), lay,
                      f"kubelet{node.suffix}", 120)
    processes.start(lay, f"kube-proxy{node.suffix}",
                    [*run_in, str(progs["kube-proxy"]), f"--config={mine.config / 'kube-proxy.yaml'}"], log)


def pod_cgroups() -> list[Path]:
    """Every node's kubepods cgroup, in every hierarchy where one is."""
    root = Path("/sys/fs/cgroup")
    return [d for n in NODES for d in root.glob(f"*/{n.cgroup_root.strip('/') + '/' if n != FIRST else ''}kubepods")]


def _kill_containers(lay: Layout, log: Callable[[str], None]) -> None:
    for node in NODES:
        runc_root = lay.of(node).runc_root
        if not runc_root.is_dir():
            continue
        for root in [runc_root, *[p for p in runc_root.iterdir() if p.is_dir()]]:
            listing = host.sh("runc", "--root", str(root), "list", "-q", check=False).stdout.split()
            for cid in listing:
                host.sh("runc", "--root", str(root), "kill", cid, "KILL", check=False)
                host.sh("runc", "--root", str(root), "delete", "--force", cid, check=False)
    # Whatever is left in the pods' cgroups (a shim's child, a container runc no longer knows).
    left = []
    for d in pod_cgroups():
        for procs in d.rglob("cgroup.procs"):
            left += [int(x) for x in procs.read_text().split()]
    for pid in set(left):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    if left:
        log(f"killed {len(set(left))} container processes left in the pods' cgroups")


def _shims(lay: Layout) -> list[tuple[int, float]]:
    import psutil

    sockets = {str(lay.of(n).containerd_socket) for n in NODES}
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        if cmd and "containerd-shim" in Path(cmd[0]).name and sockets & set(cmd):
            try:
                out.append((p.info["pid"], process.started_at(p.info["pid"])))
            except psutil.NoSuchProcess:
                pass
    return out


def _unmount_under(prefixes: list[str]) -> int:
    """Unmount every mount point that starts with one of ``prefixes`` (a directory, or a name prefix such as
    /run/netns/cni-), deepest first; again while any is left (a point can carry stacked mounts, e.g. a
    network namespace seen through a shared /run/netns)."""
    released = 0
    for _ in range(10):
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        hits = sorted({m for m in mounts if any(m.startswith(p) for p in prefixes)}, key=len, reverse=True)
        if not hits:
            break
        for m in hits:
            host.sh("umount", "-l", m, check=False)
        released += len(hits)
    return released


def _clean_iptables() -> None:
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle"):
            rules = host.sh(tool, "-t", table, "-S", check=False).stdout.splitlines()
            ours = {r.split()[1] for r in rules if r.startswith("-N ") and r.split()[1].startswith(IPTABLES_PREFIXES)}
            if not ours:
                continue
            for r in rules:  # rules in the built-in chains that lead into ours (comments are quoted)
                parts = shlex.split(r)
                if parts[0] == "-A" and parts[1] not in ours and any(x in ours for x in parts):
                    host.sh(tool, "-t", table, "-D", *parts[1:], check=False)
            for chain in ours:
                host.sh(tool, "-t", table, "-F", chain, check=False)
            for chain in ours:
                host.sh(tool, "-t", table, "-X", chain, check=False)


def _remove_cgroups(timeout_s: float = 20.0) -> list[str]:
    """rmdir the pods' cgroups, deepest first. A killed container process can linger a moment (its shim
    was stopped before reaping it, and init reaps it later), keeping its cgroup busy: kill and retry until
    ``timeout_s``; return what is still there."""
    deadline = Deadline(timeout_s)
    while True:
        left = []
        for d in pod_cgroups():
            for procs in d.rglob("cgroup.procs"):
                for pid in procs.read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:
                        pass
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                try:
                    sub.rmdir()
                except OSError:
                    pass
            try:
                d.rmdir()
            except OSError:
                left.append(str(d))
        if not left or deadline.passed():
            return left
        time.sleep(0.2)


def down(lay: Layout, log: Callable[[str], None]) -> None:
    """Everything up() started or changed, undone; safe to repeat, and after a crash half-way up."""
    recs = processes.read_pids(lay)
    alive = processes.running(lay)
    by_name = {n: (r["pid"], r["started"]) for n, r in recs.items()}
    further = [f"{c}{n.suffix}" for n in NODES[1:] for c in ("kubelet", "kube-proxy")]
    for name in ("kubelet", "kube-proxy", *further, "coredns", "kube-scheduler", "kube-controller-manager"):
        if name in by_name:
            process.stop_started([by_name[name]], timeout_s=15)
    _kill_containers(lay, log)
    runtimes = [by_name[f"containerd{n.suffix}"] for n in NODES if f"containerd{n.suffix}" in by_name]
    process.stop_started(runtimes, timeout_s=15)
    process.stop_started(_shims(lay), timeout_s=5)
    for name in ("kube-apiserver", "etcd"):
        if name in by_name:
            process.stop_started([by_name[name]], timeout_s=15)
    marker = json.loads(OWNER_MARKER.read_text()) if OWNER_MARKER.is_file() else {}
    if lay.host.is_file():
        before = json.loads(lay.host.read_text())
    elif marker.get("root") == str(lay.root):
        before = marker["host"]
    else:  # nothing recorded what the way up changed: change nothing back that may not be ours
        before = {"sysctls": {}, "existed": list(HOST_DIRS), "bridge_existed": True}
    stores = [str(lay.of(node).image_store) + "/" for node in NODES]  # an import cut short leaves its mounts there
    n = _unmount_under([str(lay.root) + "/", *stores, "/run/netns/cni-", "/var/lib/kubelet/"])
    for ns in Path("/run/netns").glob("cni-*"):
        try:
            ns.unlink(missing_ok=True)
        except OSError as e:  # still mounted somewhere: said at the end, the rest is cleaned anyway
            log(f"could not remove {ns}: {e}")
    _clean_iptables()
    for node in NODES[1:]:
        host.remove_node(node)
    if not before.get("bridge_existed") and Path("/sys/class/net", BRIDGE).exists():
        host.sh("ip", "link", "delete", BRIDGE, check=False)
    for key, value in before.get("sysctls", {}).items():
        Path("/proc/sys", key).write_text(value)
    for d in HOST_DIRS:
        if d not in before.get("existed", HOST_DIRS) and Path(d).exists():
            shutil.rmtree(d, ignore_errors=True)
    stuck = _remove_cgroups()
    for node in NODES[1:]:  # the further nodes' cgroup roots, their kubepods gone above
        for hierarchy in host.cgroup_hierarchies():
            own = hierarchy / node.cgroup_root.strip("/")
            try:
                own.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                stuck.append(str(own))
    if lay.root.exists():
        shutil.rmtree(lay.root, ignore_errors=True)
    if marker.get("root") == str(lay.root) and not stuck:
        OWNER_MARKER.unlink(missing_ok=True)
    if stuck:
        raise HarnessError(f"cluster down: cgroups still busy after 20 s: {', '.join(stuck)} (processes that "
                           "ignore SIGKILL: D state?); run `make cluster-down` again")
    log(f"cluster down: {len(alive)} processes stopped, {n} mounts released, host restored")


def status(lay: Layout) -> dict[str, object]:
    """Which components run, whether the API answers and whether every node is Ready (``node_ready``)."""
    alive = processes.running(lay)
    nodes = nodes_of(lay)
    out: dict[str, object] = {"components": {n: (n in alive) for n in components(nodes)}, "api": False,
                              "node_ready": False, "nodes": [n.name for n in nodes]}
    if "kube-apiserver" in alive:
        try:
            out["api"] = kube_api.ready(lay)
            out["node_ready"] = all(kube_api.node_ready(lay, n.name) for n in nodes)
        except Exception:  # noqa: BLE001 - not answering is the status
            pass
    return out
