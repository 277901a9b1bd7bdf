"""The cluster without Docker, for real: two nodes up, pods from a locally built image on each, logs, exec, DNS,
services and pod addresses across the nodes, the API from a pod, and a down that leaves nothing on the host."""

from __future__ import annotations

import ipaddress

import pytest
from kubernetes import client as kclient
from kubernetes.stream import stream

from harness.core.paths import cache_dir
from harness.core.waiting import Pending, wait_until
from tools.cluster import binaries, images, kube_api
from tools.cluster.layout import FIRST, NODES, SECOND, SERVICE_CIDR

NS = "default"


def _pod(name: str, command: list[str], node: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"terminationGracePeriodSeconds": 1, "nodeName": node, "containers": [{
                "name": "main", "image": images.BASE_IMAGE, "imagePullPolicy": "Never", "command": command}]}}


def _wait_running(v1: kclient.CoreV1Api, names: list[str], timeout_s: float = 120) -> None:
    def running() -> bool | Pending:
        phases = {n: v1.read_namespaced_pod(n, NS).status.phase for n in names}
        return True if all(p == "Running" for p in phases.values()) else Pending(str(phases))

    wait_until(f"pods {', '.join(names)} to run", running, timeout_s, interval_s=0.5)


def _wait_serving(v1: kclient.CoreV1Api, timeout_s: float = 60) -> None:
    """A pod is Running once its process starts, before that process listens; a service's endpoint without a
    listener resets a connection (seen once: "Connection reset by peer" for the pong). The server says so."""
    def serving() -> bool | Pending:
        log = v1.read_namespaced_pod_log("server", NS)
        return True if log.strip() == "serving" else Pending(repr(log))

    wait_until("the server pod to listen", serving, timeout_s, interval_s=0.5)


def _exec(v1: kclient.CoreV1Api, pod: str, script: str) -> str:
    return stream(v1.connect_get_namespaced_pod_exec, pod, NS, command=["bash", "-c", script],
                  stderr=True, stdin=False, stdout=True, tty=False)


# Says "serving" once it listens (and not before: _wait_serving waits for that line).
SERVER = ("perl -MIO::Socket::INET -e '$| = 1; $s=IO::Socket::INET->new(LocalPort=>8080,Listen=>5,ReuseAddr=>1)"
          " or die; print qq(serving\\n); while($c=$s->accept){print $c qq(pong\\n); close $c}'")


@pytest.fixture(scope="module")
def pods(cluster):
    _, v1 = cluster
    # On different nodes: what one says to the other crosses the veth between their namespaces.
    v1.create_namespaced_pod(NS, _pod("server", ["sh", "-c", f"exec {SERVER}"], FIRST.name, {"app": "server"}))
    v1.create_namespaced_pod(NS, _pod("client", ["sleep", "3600"], SECOND.name))
    v1.create_namespaced_service(NS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "server"},
                                      "spec": {"selector": {"app": "server"},
                                               "ports": [{"port": 80, "targetPort": 8080}]}})
    _wait_running(v1, ["server", "client"])
    _wait_serving(v1)
    return v1


def test_both_nodes_are_ready_and_run_the_pinned_kubelet(cluster):
    lay, v1 = cluster
    for n in NODES:
        node = v1.read_node(n.name)
        assert node.status.node_info.kubelet_version == binaries.KUBERNETES
        assert kube_api.node_ready(lay, n.name)
        assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [n.ip]


def test_each_node_keeps_its_images_in_a_store_of_its_own_that_outlives_the_cluster(cluster):
    lay, _ = cluster
    base = images.base(print)  # loaded into both nodes by the cluster fixture
    for n in NODES:
        mine = lay.of(n)
        assert mine.image_store.is_relative_to(cache_dir()) and not mine.image_store.is_relative_to(lay.root)
        assert images.holds(mine, base, images.image_id_of(base)), f"{n.name} does not hold {base} as recorded"
    assert lay.of(FIRST).image_store != lay.of(SECOND).image_store


def test_logs_and_exec_go_through_the_api_server(pods):
    assert pods.read_namespaced_pod_log("server", NS).strip() == "serving"
    assert _exec(pods, "client", "echo $((6 * 7))").strip() == "42"


def test_a_service_resolves_and_carries_traffic_between_pods_on_two_nodes(pods):
    out = _exec(pods, "client", "getent hosts server.default.svc.cluster.local; "
                                "exec 3<>/dev/tcp/server/80; cat <&3")
    lines = out.strip().splitlines()
    assert lines[0].split()[1] == "server.default.svc.cluster.local" and lines[-1] == "pong"


def test_pods_reach_each_other_across_the_nodes_by_their_own_addresses(pods):
    """Routed, not NATed: the server sees the client's pod address (a real cluster's network does the same; the
    bridge plugin's masquerade would have shown it the node's)."""
    server, client = (pods.read_namespaced_pod(n, NS).status.pod_ip for n in ("server", "client"))
    assert server.startswith(FIRST.pod_cidr.rsplit(".", 1)[0]) and client.startswith(SECOND.pod_cidr.rsplit(".", 1)[0])
    out = _exec(pods, "client", f"exec 3<>/dev/tcp/{server}/8080; cat <&3")
    assert out.strip() == "pong"
    # The server's view of who connected: the kernel's table of its established and closing connections.
    seen = _exec(pods, "server", "cat /proc/net/tcp")
    peers = {_address(line.split()[2]) for line in seen.splitlines()[1:] if line.split()[1].endswith(":1F90")}
    assert client in peers, peers


def _address(hex_endpoint: str) -> str:
    """/proc/net/tcp's little-endian hex IPv4 address (of ADDR:PORT) as a dotted quad."""
    raw = bytes.fromhex(hex_endpoint.split(":")[0])
    return ".".join(str(b) for b in reversed(raw))


def test_a_pod_reaches_the_api_server_by_its_service(pods):
    assert _exec(pods, "client", "exec 3<>/dev/tcp/kubernetes.default/443 && echo open").strip() == "open"


def test_a_service_address_no_proxy_has_rewritten_is_refused_not_answered_from_outside(pods):
    """A Service made a moment ago has an address before kube-proxy rewrites it. Left to the default route, a
    connection to it once reached this sandbox's egress, which answered HTTP 404 on a connection Prometheus kept
    alive for the whole run; the host refuses it instead (tools.cluster.host.UNROUTED_SERVICES)."""
    taken = {s.spec.cluster_ip for s in pods.list_service_for_all_namespaces().items}
    free = next(str(a) for a in reversed(list(ipaddress.ip_network(SERVICE_CIDR).hosts())) if str(a) not in taken)
    out = _exec(pods, "client", f"exec 3<>/dev/tcp/{free}/9099 && echo connected")
    assert "Connection refused" in out and "connected" not in out, out
