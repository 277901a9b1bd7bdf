"""The Makefile's promises, checked by `make -n` (nothing runs) or with the harness replaced by a stub."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


def _make(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MAKEFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_kubernetes_line_finds_the_cluster_the_project_started(tmp_path: Path):
    """README: `make cluster-up cluster-images deploy loadtest`, word for word, without exporting KUBECONFIG."""
    kubeconfig = tmp_path / "cluster" / "kubeconfig" / "super-admin.conf"
    env = {"RMQ_HARNESS_STATE": str(tmp_path)}
    line = ("cluster-up", "cluster-images", "deploy", "loadtest")
    assert f"export KUBECONFIG={kubeconfig};" not in _make("-n", *line, env=env).stdout  # no cluster, no guess
    kubeconfig.parent.mkdir(parents=True)
    kubeconfig.write_text("")
    out = _make("-n", *line, env=env).stdout
    talking = [row for row in out.splitlines() if " upgrade --install " in row or " k8s " in row]
    assert len(talking) == 3 and all(row.startswith(f"export KUBECONFIG={kubeconfig};") for row in talking)
    assert "KUBECONFIG" not in _make("-n", "deploy", env={**env, "KUBECONFIG": str(tmp_path / "mine")}).stdout


def test_make_run_fails_the_job_when_the_gate_finds_a_regression(monkeypatch):
    """`RMQ_HARNESS_FAIL_ON_REGRESSION=1 make run` gates; make itself exits 2 for any failed step and names the
    harness's 3 in its last line (a CI step that must tell 3 from 1 calls rmq-harness itself: docs/operations.md)."""
    from harness.cli.main import parse

    dry = _make("-n", "-o", "setup", "run", env={}).stdout.split()
    argv = dry[dry.index("run"):]
    monkeypatch.setenv("RMQ_HARNESS_FAIL_ON_REGRESSION", "1")
    assert parse(argv).fail_on_regression
    stub = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    done = _make("-o", "setup", "run", f"HARNESS={stub}", env={})
    assert done.returncode != 0 and "Error 3" in done.stderr
