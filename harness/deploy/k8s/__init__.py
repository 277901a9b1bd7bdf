"""The Kubernetes backend: the Helm chart's release driven through the Kubernetes API."""
