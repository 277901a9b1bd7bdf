"""Images without a registry: built with podman (its store in the user cache, so a rebuilt cluster reuses
them) and imported straight into the cluster's containerd, where pods run them with imagePullPolicy Never.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.cluster.binaries import tools_dir
from harness.cluster.layout import PAUSE_IMAGE, Layout
from harness.errors import HarnessError

# Root here lacks CAP_SYS_RESOURCE: podman's default ulimits cannot be set, these can (environment.md).
CONTAINERS_CONF = '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'


def _podman_env() -> dict[str, str]:
    import os

    conf = tools_dir() / "podman" / "containers.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    if not conf.is_file() or conf.read_text() != CONTAINERS_CONF:
        conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def podman(*args: str) -> list[str]:
    store = tools_dir() / "podman"
    return ["podman", "--root", str(store / "root"), "--runroot", str(store / "run"), *args]


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, env=_podman_env(), **kw)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise HarnessError(f"{what} failed (exit {proc.returncode})", detail="\n".join(err[-20:]))
    return proc


def present(image: str) -> bool:
    return subprocess.run(podman("image", "exists", image), env=_podman_env()).returncode == 0


def build(image: str, context: Path, containerfile: str, log: Callable[[str], None]) -> None:
    log(f"building image {image}")
    with tempfile.NamedTemporaryFile("w", suffix=".Containerfile", delete=False) as f:
        f.write(containerfile)
    try:
        _run(podman("build", "--network=host", "-t", image, "-f", f.name, str(context)), f"building {image}")
    finally:
        Path(f.name).unlink(missing_ok=True)


def load(lay: Layout, image: str, log: Callable[[str], None]) -> None:
    """Copy ``image`` from podman's store into the cluster's containerd (namespace k8s.io)."""
    save = subprocess.Popen(podman("save", "--format", "docker-archive", image), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_podman_env())
    imp = subprocess.run(["ctr", "--address", str(lay.containerd_socket), "--namespace", "k8s.io", "images",
                          "import", "-"], stdin=save.stdout, capture_output=True)
    save.stdout.close()
    save_err = save.stderr.read().decode(errors="replace")
    if save.wait() != 0 or imp.returncode != 0:
        raise HarnessError(f"loading {image} into the cluster failed",
                           detail=(save_err + imp.stderr.decode(errors="replace")).strip()[-2000:])
    log(f"{image}: loaded into the cluster")


def load_pause(lay: Layout, pause_binary: Path, log: Callable[[str], None]) -> None:
    """The pod sandbox image: the static pause program alone, in an image from scratch."""
    if not present(PAUSE_IMAGE):
        with tempfile.TemporaryDirectory() as ctx:
            (Path(ctx) / "pause").write_bytes(pause_binary.read_bytes())
            (Path(ctx) / "pause").chmod(0o755)
            build(PAUSE_IMAGE, Path(ctx), 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n',
                  log)
    load(lay, PAUSE_IMAGE, log)


BASE_IMAGE = "localhost/rmq-harness/debian:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


def base(log: Callable[[str], None], mirror: str = DEBIAN_MIRROR) -> str:
    """A minimal Debian bookworm image made by debootstrap: the base of every image built here, where no
    registry serves one."""
    if present(BASE_IMAGE):
        return BASE_IMAGE
    log(f"building {BASE_IMAGE} with debootstrap from {mirror}")
    with tempfile.TemporaryDirectory(prefix="rmqh-rootfs-") as root:
        proc = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, mirror], capture_output=True)
        if proc.returncode != 0:
            raise HarnessError(f"debootstrap bookworm from {mirror} failed (exit {proc.returncode})",
                               detail=proc.stdout.decode(errors="replace")[-2000:])
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(podman("import", "-", BASE_IMAGE), stdin=tar.stdout, capture_output=True,
                             env=_podman_env())
        tar.stdout.close()
        if tar.wait() != 0 or imp.returncode != 0:
            raise HarnessError(f"importing the debootstrap tree as {BASE_IMAGE} failed",
                               detail=imp.stderr.decode(errors="replace")[-2000:])
    return BASE_IMAGE
