"""The cluster's programs, built once per pinned version into the user cache (a warm start builds nothing).

Kubernetes is not `go install`-able (its go.mod replaces its staging modules with local paths), so a
wrapper module requires k8s.io/kubernetes and points each staging module at its published v0.x twin;
the list is read from Kubernetes' own go.mod at build time, never kept here.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import cache_dir

KUBERNETES = "v1.32.0"
ETCD = "v3.5.17"
COREDNS = "v1.11.3"
GO_SOURCES = Path(__file__).parent / "go"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl",
                 "kubeadm")
_GO_FALLBACK = "/usr/local/go/bin/go"


def tools_dir() -> Path:
    return cache_dir() / "cluster"


def bin_dir() -> Path:
    """Where every built program sits, one directory per set of pinned versions."""
    return tools_dir() / f"bin-k8s-{KUBERNETES}-etcd-{ETCD}-coredns-{COREDNS}"


def programs() -> dict[str, Path]:
    names = [*KUBE_COMMANDS, "etcd", "coredns", "pause"]
    return {n: bin_dir() / n for n in names}


def missing() -> list[str]:
    return [n for n, p in programs().items() if not p.is_file()]


def find_go() -> str:
    go = shutil.which("go") or (_GO_FALLBACK if os.access(_GO_FALLBACK, os.X_OK) else None)
    if not go:
        raise ConfigError("building the cluster needs Go 1.23+ on PATH (https://go.dev/dl); none found")
    return go


def _go_env() -> dict[str, str]:
    t = tools_dir()
    return {**os.environ, "GOPATH": str(t / "gopath"), "GOCACHE": str(t / "gocache"), "GOFLAGS": "-modcacherw",
            "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}


def _go(args: list[str], cwd: Path, log: Callable[[str], None], extra_env: dict[str, str] | None = None) -> None:
    cmd = [find_go(), *args]
    proc = subprocess.run(cmd, cwd=cwd, env={**_go_env(), **(extra_env or {})}, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise HarnessError(f"go {' '.join(args[:2])} failed in {cwd} (exit {proc.returncode})", detail=tail)


def staging_replaces(kubernetes_go_mod: str, version: str) -> list[str]:
    """Kubernetes' `k8s.io/X => ./staging/...` replaces, turned into `k8s.io/X => k8s.io/X v0.<minor>.<patch>`."""
    major_minor_patch = version.lstrip("v").split(".")
    staged = f"v0.{major_minor_patch[1]}.{major_minor_patch[2]}"
    mods = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", kubernetes_go_mod, re.MULTILINE)
    if not mods:
        raise HarnessError(f"Kubernetes {version}'s go.mod names no staging modules: the wrapper cannot be built")
    return [f"\t{m} => {m} {staged}" for m in mods]


def version_ldflags(version: str) -> str:
    """What `kubectl version` and the node status report; without it a kubelet says v0.0.0 and fails skew checks."""
    major, minor = version.lstrip("v").split(".")[:2]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}", f"-X {pkg}.gitMinor={minor}",
                  f"-X {pkg}.gitTreeState=clean", f"-X {pkg}.buildDate={now}"]
    return "-s -w " + " ".join(flags)


def _module(path: Path, go_mod: str, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "go.mod").write_text(go_mod)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def _build_kubernetes(out: Path, log: Callable[[str], None]) -> None:
    work = tools_dir() / "build" / f"kubernetes-{KUBERNETES}"
    probe = _module(work / "probe", "module rmqharness.local/probe\n\ngo 1.23.0\n", {})
    _go(["mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES}"], probe, log)
    upstream = (tools_dir() / "gopath" / "pkg" / "mod" / "cache" / "download" / "k8s.io" / "kubernetes" / "@v"
                / f"{KUBERNETES}.mod").read_text()
    go_mod = "\n".join(["module rmqharness.local/kubernetes", "", "go 1.23.0", "",
                        f"require k8s.io/kubernetes {KUBERNETES}", "", "replace (",
                        *staging_replaces(upstream, KUBERNETES), ")", ""])
    imports = "\n".join(f'\t_ "k8s.io/kubernetes/cmd/{c}"' for c in KUBE_COMMANDS)
    tools = f"//go:build tools\n\n// The commands built from this module.\npackage tools\n\nimport (\n{imports}\n)\n"
    mod = _module(work / "module", go_mod, {"tools.go": tools})
    log(f"resolving Kubernetes {KUBERNETES} modules (first time only)")
    _go(["mod", "tidy"], mod, log)
    for c in KUBE_COMMANDS:
        if (out / c).is_file():
            continue
        log(f"building {c} {KUBERNETES}")
        _go(["build", "-trimpath", "-ldflags", version_ldflags(KUBERNETES), "-o", str(out / f".{c}.tmp"),
             f"k8s.io/kubernetes/cmd/{c}"], mod, log)
        (out / f".{c}.tmp").replace(out / c)


def _build_etcd(out: Path, log: Callable[[str], None]) -> None:
    mod = _module(tools_dir() / "build" / f"etcd-{ETCD}",
                  f"module rmqharness.local/etcd\n\ngo 1.23.0\n\nrequire go.etcd.io/etcd/server/v3 {ETCD}\n",
                  {"main.go": (GO_SOURCES / "etcd" / "main.go").read_text()})
    log(f"building etcd {ETCD}")
    _go(["mod", "tidy"], mod, log)
    _go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / ".etcd.tmp"), "."], mod, log)
    (out / ".etcd.tmp").replace(out / "etcd")


def _build_coredns(out: Path, log: Callable[[str], None]) -> None:
    log(f"building CoreDNS {COREDNS}")
    gobin = tools_dir() / "build" / f"coredns-{COREDNS}"
    gobin.mkdir(parents=True, exist_ok=True)
    _go(["install", "-trimpath", "-ldflags", "-s -w", f"github.com/coredns/coredns@{COREDNS}"], gobin, log,
        extra_env={"GOBIN": str(gobin)})
    shutil.copy2(gobin / "coredns", out / ".coredns.tmp")
    (out / ".coredns.tmp").replace(out / "coredns")


def _build_pause(out: Path, log: Callable[[str], None]) -> None:
    mod = _module(tools_dir() / "build" / "pause", "module rmqharness.local/pause\n\ngo 1.23.0\n",
                  {"main.go": (GO_SOURCES / "pause" / "main.go").read_text()})
    _go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / ".pause.tmp"), "."], mod, log)
    (out / ".pause.tmp").replace(out / "pause")


def build(log: Callable[[str], None]) -> dict[str, Path]:
    """Every program the cluster runs, built when missing (cold: about 15 minutes on 2 cores)."""
    out = bin_dir()
    out.mkdir(parents=True, exist_ok=True)
    todo = missing()
    if any(n in KUBE_COMMANDS for n in todo):
        _build_kubernetes(out, log)
    if "etcd" in todo:
        _build_etcd(out, log)
    if "coredns" in todo:
        _build_coredns(out, log)
    if "pause" in todo:
        _build_pause(out, log)
    left = missing()
    if left:
        raise HarnessError(f"cluster programs still missing after the build: {', '.join(left)}")
    return programs()
