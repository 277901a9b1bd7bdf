"""The cluster's API as system:masters: a client, whether the API server and the node are ready, and what
`kubeadm init` would have made that its phases do not (the cluster-admins binding, a default StorageClass with
its volumes made ahead)."""

from __future__ import annotations

from collections.abc import Callable

from tools.cluster.layout import NODE_NAME, NODES, Layout


def api(lay: Layout):
    """A kubernetes client ApiClient for the cluster, as system:masters."""
    from kubernetes import config as kconfig

    return kconfig.new_client_from_config(config_file=str(lay.admin_kubeconfig))


def ready(lay: Layout) -> bool:
    client = api(lay)
    try:
        return client.call_api("GET", client.configuration.host + "/readyz").status == 200
    finally:
        client.close()


def grant_cluster_admins(lay: Layout) -> None:
    """kubeadm's certificates for admin.conf and the API server's kubelet client name the group
    kubeadm:cluster-admins; `kubeadm init` would bind it to cluster-admin, its phases do not (without it,
    logs and exec are forbidden)."""
    from kubernetes import client as kclient

    body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:cluster-admins"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}]}
    c = api(lay)
    try:
        _create(lambda: kclient.RbacAuthorizationV1Api(c).create_cluster_role_binding(body))
    finally:
        c.close()


STORAGE_CLASS = "local-volumes"
VOLUMES = 4


def default_storage(lay: Layout, nodes: int = 1) -> None:
    """A default StorageClass whose volumes are directories of the state dir, made ahead (no provisioner
    runs here), VOLUMES on each of the first ``nodes`` nodes: what a chart's claims bind to, as kind's
    local-path provisioner gives them there (a claim binds to a volume of the node its first pod goes to)."""
    from kubernetes import client as kclient

    c = api(lay)
    try:
        storage = kclient.StorageV1Api(c)
        core = kclient.CoreV1Api(c)
        sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
              "metadata": {"name": STORAGE_CLASS,
                           "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
              "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
              "reclaimPolicy": "Retain"}
        _create(lambda: storage.create_storage_class(sc))
        for node, i in ((n, i) for n in NODES[:nodes] for i in range(VOLUMES)):
            name = f"pv{node.suffix}-{i}"
            path = lay.volumes / name
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)  # the charts' pods run as their images' own non-root users
            pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{name}"},
                  "spec": {"capacity": {"storage": "50Gi"}, "accessModes": ["ReadWriteOnce"],
                           "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                           "local": {"path": str(path)},
                           "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                               {"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name]}]}]}}}}
            _create(lambda pv=pv: core.create_persistent_volume(pv))
    finally:
        c.close()


def _create(call: Callable[[], object]) -> None:
    from kubernetes import client as kclient

    try:
        call()
    except kclient.ApiException as e:
        if e.status != 409:  # already there: a restart over existing state
            raise


def node_ready(lay: Layout, name: str = NODE_NAME) -> bool:
    from kubernetes import client as kclient

    c = api(lay)
    try:
        node = kclient.CoreV1Api(c).read_node(name)
        return any(cond.type == "Ready" and cond.status == "True" for cond in node.status.conditions or [])
    finally:
        c.close()
