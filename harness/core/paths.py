"""Where the harness keeps things on this machine (all overridable by environment variables)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VARIANTS_FILE = REPO_ROOT / "workloads" / "variants.yaml"


def git_sha() -> str | None:
    """The commit of the checkout the harness runs from (None: not a git checkout, or git is missing)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def cache_dir() -> Path:
    """Downloaded RocketMQ jars, per version; survives across runs and works offline once filled."""
    env = os.environ.get("RMQ_HARNESS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmq-harness"


def state_dir() -> Path:
    """Brokers started by `rmq-harness brokers up`: their PIDs, configs, stores and logs."""
    env = os.environ.get("RMQ_HARNESS_STATE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rmq-harness"
