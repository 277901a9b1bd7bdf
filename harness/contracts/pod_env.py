"""What the chart tells a harness pod about itself, as environment variables: the contract between the
chart's templates and the code that runs in its pods (the load test's run, the analysis's Spark driver)."""

from __future__ import annotations

FULLNAME = "RMQ_HARNESS_FULLNAME"
NAMESPACE = "RMQ_HARNESS_NAMESPACE"
POD_IP = "RMQ_HARNESS_POD_IP"
# The pod's own name: the owner of what it starts (a run's worker Jobs, a comparison's executor pods).
POD_NAME = "RMQ_HARNESS_POD_NAME"
POD_UID = "RMQ_HARNESS_POD_UID"
PROMETHEUS = "RMQ_HARNESS_PROMETHEUS_URL"
