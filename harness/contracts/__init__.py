"""What the stages hand each other: endpoints (deploy -> workload), the worker-starter seam (workload <-> the
backend that starts its workers), events (workload -> archive -> analysis), metrics (workload -> Prometheus)."""
