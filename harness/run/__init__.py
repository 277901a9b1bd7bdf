"""One run: its sequence (brokers up, clocks, topics, load, archive), where it happens (site: this machine or the
chart's load-test pod), the faults it injects, and its own Prometheus (observability/)."""
