"""A single-node Kubernetes cluster on this machine without Docker or a registry: Kubernetes and etcd built
from the Go module proxy at pinned versions, containerd and runc from the distribution, every component a
plain process with its state in one directory (for CI runners and machines where kind cannot run)."""
