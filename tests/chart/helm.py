"""Rendering the Helm chart with the pinned helm `make k8s-tools` builds (no cluster needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.core.paths import REPO_ROOT

CHART = REPO_ROOT / "charts" / "rocketmq-pop-harness"
PROFILES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBE_VERSION = "1.32.0"  # the kind node image of charts/kind/cluster.yaml
NAMESPACE = "rmq-harness"
RELEASE = "rmq"


def helm_binary() -> str:
    path = os.environ.get("RMQ_HARNESS_HELM") or str(
        Path.home() / ".cache" / "rmq-harness" / "tools" / "helm-v3.19.5" / "helm"
    )
    if not Path(path).is_file():
        pytest.fail(f"helm not found at {path}: run `make k8s-tools` (or set RMQ_HARNESS_HELM)")
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{out.stderr}")
    return out


def render_text(profile: Path | None = None, release: str = RELEASE, sets: tuple[str, ...] = ()) -> str:
    args = ["template", release, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION]
    if profile:
        args += ["--values", str(profile)]
    for s in sets:
        args += ["--set", s]
    return helm(*args).stdout


def render(profile: Path | None = None, release: str = RELEASE, sets: tuple[str, ...] = ()) -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(profile, release, sets)) if d]


def find(objs: list[dict], kind: str, suffix: str = "") -> list[dict]:
    return [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


def one(objs: list[dict], kind: str, suffix: str = "") -> dict:
    found = find(objs, kind, suffix)
    assert len(found) == 1, f"expected one {kind} named *{suffix}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def container(pod_spec: dict, name: str) -> dict:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def env_of(c: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}
