"""SeaweedFS's `weed`, built once per pinned version into the user cache (a warm call builds nothing).

`go install module@version` refuses SeaweedFS (its go.mod has a replace directive), so the module is
downloaded, copied somewhere writable and built in place. The Go module and build caches are the cluster's
(tools/cluster): part of SeaweedFS's dependency tree (gRPC, protobuf, golang.org/x) is Kubernetes' too, and
one cache is less disk than two (measured: 5.5 min from empty caches, 4.5 min after the cluster's build; the
caches grow by 3.8 GB).
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import cache_dir
from tools.cluster import binaries

MODULE = "github.com/seaweedfs/seaweedfs"
# No semver tags on the module path (SeaweedFS tags "4.01", not "v4.01"): a pseudo-version names the commit.
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"


def out_dir() -> Path:
    return cache_dir() / "tools" / f"seaweedfs-{VERSION}"


def weed_path() -> Path:
    return out_dir() / "weed"


def find_weed() -> Path:
    """The built `weed`, or a one-line ConfigError saying how to build it."""
    weed = weed_path()
    if not weed.is_file():
        raise ConfigError(f"SeaweedFS {VERSION} is not built: run `make s3-tools` (python -m tools.s3 build)")
    return weed


def _find_go() -> str:
    try:
        return binaries.find_go()
    except ConfigError:
        raise ConfigError("building SeaweedFS needs Go (https://go.dev/dl) on PATH or at /usr/local/go/bin/go; "
                          "none found") from None


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _check_go_version(go: str, go_mod: str) -> None:
    """GOTOOLCHAIN=local (no toolchain download behind the user's back): an older Go must be said plainly."""
    want = re.search(r"^go\s+(\S+)", go_mod, re.MULTILINE)
    have = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    if want and have and _version_tuple(have) < _version_tuple(want.group(1)):
        raise ConfigError(f"building SeaweedFS {VERSION} needs Go {want.group(1)}+; {go} is {have}")


def _module_dir() -> Path:
    # Where `go mod download` leaves the module's source (GOPATH/pkg/mod/<path>@<version>; the path is all
    # lower case, so no case-encoding applies).
    return binaries.tools_dir() / "gopath" / "pkg" / "mod" / f"{MODULE}@{VERSION}"


def build(log: Callable[[str], None]) -> Path:
    """`weed` of the pinned version, built when missing (cold: 4.5-5.5 min on 2 cores; warm: nothing to do)."""
    weed = weed_path()
    if weed.is_file():
        return weed
    go = _find_go()
    parent = out_dir().parent
    parent.mkdir(parents=True, exist_ok=True)
    # One build at a time (two test workers, a user beside them): the second waits and finds it built.
    with open(parent / f".seaweedfs-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if weed.is_file():
            return weed
        # What an interrupted build (SIGKILL, power) left: nobody else builds while we hold the lock.
        for stale in parent.glob(f".seaweedfs-{VERSION}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".seaweedfs-{VERSION}-", dir=parent))
        try:
            log(f"downloading SeaweedFS {VERSION}")
            binaries._go(["mod", "download", "-json", f"{MODULE}@{VERSION}"], work, log)
            src = _module_dir()
            if not (src / "go.mod").is_file():
                raise HarnessError(f"go mod download left no module at {src}")
            _check_go_version(go, (src / "go.mod").read_text())
            shutil.copytree(src, work / "src", symlinks=True)
            log(f"building weed {VERSION} (its dependencies are downloaded on the way: minutes, once)")
            binaries._go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(work / "out" / "weed"), "./weed"],
                         work / "src", log)
            # The whole output directory appears at once, or not at all.
            shutil.rmtree(out_dir(), ignore_errors=True)
            (work / "out").replace(out_dir())
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return weed
