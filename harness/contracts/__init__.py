"""What the stages hand each other: endpoints (deploy -> workload), events (workload -> archive -> analysis),
metrics (workload -> Prometheus -> dashboards)."""
