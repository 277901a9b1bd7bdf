"""What the stages hand each other: the run record (record: the run -> the archive -> every report), how a run runs
(options), endpoints (deploy -> workload), the worker-starter seam (workload <-> the backend that starts its
workers), events (workload -> archive -> analysis), metrics (workload -> Prometheus)."""
