"""Deployment backends: where the brokers of a comparison run (this machine, or Kubernetes)."""
