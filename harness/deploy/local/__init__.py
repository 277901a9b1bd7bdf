"""The local backend: RocketMQ servers as Java processes on this machine, built from Maven Central jars."""

from harness.deploy.local.launcher import LocalBackend

__all__ = ["LocalBackend"]
