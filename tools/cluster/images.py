"""Images without a registry: built with podman (its store in the user cache, so a rebuilt cluster reuses
them) and imported straight into the cluster's containerd, where pods run them with imagePullPolicy Never.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.core.errors import HarnessError
from tools.cluster.binaries import tools_dir
from tools.cluster.layout import FIRST, PAUSE_IMAGE, Layout, Node

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


def _ctr(lay: Layout, *args: str) -> list[str]:
    return ["ctr", "--address", str(lay.containerd_socket), "--namespace", "k8s.io", *args]


def image_id_of(image: str) -> str:
    """The podman image's id (its config's digest)."""
    found = _run(podman("image", "inspect", "--format", "{{.Id}}", image), f"reading {image}'s id")
    return found.stdout.decode().strip()


def _loaded_record(lay: Layout) -> Path:
    """Which podman image (by id) each image of the node's store was imported from."""
    return lay.image_store / "rmq-harness-images.json"


def holds(lay: Layout, image: str, image_id: str) -> bool:
    """Whether the node's store holds ``image`` as imported from podman's ``image_id`` (an earlier cluster's)."""
    record = _loaded_record(lay)
    if not record.is_file() or json.loads(record.read_text()).get(image) != image_id:
        return False
    listed = subprocess.run(_ctr(lay, "images", "ls", "-q"), capture_output=True, text=True, check=False)
    return listed.returncode == 0 and image in listed.stdout.split()


def _remember(lay: Layout, image: str, image_id: str) -> None:
    record = _loaded_record(lay)
    known = json.loads(record.read_text()) if record.is_file() else {}
    record.write_text(json.dumps({**known, image: image_id}, indent=1, sort_keys=True))


def forget_containers(lay: Layout, log: Callable[[str], None]) -> bool:
    """Remove from the node's store the containers an earlier cluster left recorded in it (its pods, stopped with
    it or killed with the machine's processes): a kubelet starting on them would stop and remove pods it never
    ran. True when there were any: containerd's CRI holds them in memory from its start, so it must start again."""
    listed = subprocess.run(_ctr(lay, "containers", "ls", "-q"), capture_output=True, text=True, check=False)
    ids = listed.stdout.split() if listed.returncode == 0 else []
    for cid in ids:
        subprocess.run(_ctr(lay, "tasks", "delete", "--force", cid), capture_output=True, check=False)
    if ids:
        gone = subprocess.run(_ctr(lay, "containers", "delete", *ids), capture_output=True, text=True, check=False)
        if gone.returncode:
            raise HarnessError(f"could not remove an earlier cluster's containers from {lay.image_store}",
                               detail=gone.stderr.strip()[-2000:] + f"\nremove {lay.image_store} and start again")
        log(f"{lay.node.name}: {len(ids)} containers of an earlier cluster removed from its image store")
    return bool(ids)


def load(lay: Layout | Sequence[Layout], image: str, log: Callable[[str], None]) -> None:
    """Copy ``image`` from podman's store into the containerd (namespace k8s.io) of each node ``lay`` names (a
    node's Layout, Layout.of, or several): saved once, the archive's stream fanned out to every node's import
    (saving the harness image costs 25 s of CPU here, and it goes to both nodes of a two-node cluster). A node
    whose store kept this very image from an earlier cluster (Layout.image_store) is skipped, and said."""
    asked = [lay] if isinstance(lay, Layout) else list(lay)
    image_id = image_id_of(image)
    nodes = [n for n in asked if not holds(n, image, image_id)]
    if len(nodes) < len(asked):
        kept = ", ".join(n.node_name for n in asked if n not in nodes)
        log(f"{image}: kept in {kept} from an earlier cluster (image {image_id[:12]})")
    if not nodes:
        return
    save = subprocess.Popen(podman("save", "--format", "docker-archive", image), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_podman_env())
    imports = [subprocess.Popen(_ctr(n, "images", "import", "-"), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE) for n in nodes]
    errors = [b""] * len(imports)

    def drain(i: int) -> None:  # an import's stderr read as it goes, so a full pipe never stalls it
        errors[i] = imports[i].stderr.read()

    readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(len(imports))]
    for t in readers:
        t.start()
    try:
        if len(imports) == 1:
            shutil.copyfileobj(save.stdout, imports[0].stdin, 1 << 20)
        else:
            while chunk := save.stdout.read(1 << 20):
                for imp in imports:
                    imp.stdin.write(chunk)
    except BrokenPipeError:  # an import that failed: its stderr says why, below
        pass
    finally:
        for imp in imports:
            try:
                imp.stdin.close()
            except BrokenPipeError:
                pass
        save.stdout.close()
    save_err = save.stderr.read().decode(errors="replace")
    codes = [imp.wait() for imp in imports]
    for t in readers:
        t.join()
    if save.wait() != 0 or any(codes):
        detail = save_err + "".join(e.decode(errors="replace") for e in errors)
        raise HarnessError(f"loading {image} into the cluster failed", detail=detail.strip()[-2000:])
    for n in nodes:
        _remember(n, image, image_id)
    log(f"{image}: loaded into {', '.join(n.node_name for n in nodes)}")


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


# Local stand-ins for the public base images the Dockerfiles start FROM, made from the debootstrap base and
# tagged with the public names in the harness's own podman store (never pushed, never in the user's), so
# the same Dockerfiles build here with --pull=never. They trust the machine's own extra CAs
# (/usr/local/share/ca-certificates): behind a TLS-inspecting egress proxy Maven Central and PyPI are
# unreachable from a build otherwise.
HOST_CAS = Path("/usr/local/share/ca-certificates")
TRUST_HOST_CAS = """COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
"""
STAND_INS = {
    "docker.io/library/python:3.11-slim-bookworm": ("localhost/rmq-harness/python:3.11-bookworm", """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s /usr/bin/python3 /usr/local/bin/python && ln -s /usr/bin/pip3 /usr/local/bin/pip
{trust}# The image is the environment: pip may install into the system Python, as in python:3.11-slim; and it
# trusts the system's CAs, not only its own bundle.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt
"""),
    "docker.io/library/eclipse-temurin:17-jre": ("localhost/rmq-harness/java:17-jre-bookworm", """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
"""),
    "docker.io/library/maven:3.9.9-eclipse-temurin-17": ("localhost/rmq-harness/maven:3-jdk17-bookworm", """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless ca-certificates-java \
    && rm -rf /var/lib/apt/lists/*
{trust}"""),
}


def stand_ins(log: Callable[[str], None]) -> None:
    """Every stand-in built when missing and tagged with the public name it stands in for."""
    b = base(log)
    for public, (image, containerfile) in STAND_INS.items():
        if not present(image):
            with tempfile.TemporaryDirectory() as ctx:
                cas = sorted(HOST_CAS.glob("*.crt")) if HOST_CAS.is_dir() else []
                (Path(ctx) / "ca").mkdir()
                for ca in cas:
                    (Path(ctx) / "ca" / ca.name).write_bytes(ca.read_bytes())
                if cas:
                    log(f"{image}: trusting this machine's CAs {', '.join(c.name for c in cas)}")
                build(image, Path(ctx), containerfile.format(base=b, trust=TRUST_HOST_CAS if cas else ""), log)
        _run(podman("tag", image, public), f"tagging {image} as {public}")


def stages(dockerfile: Path) -> list[str]:
    """The names of a Dockerfile's named build stages (FROM ... AS name), in order."""
    return [m.group(1) for m in re.finditer(r"^\s*FROM\s+\S+\s+AS\s+(\S+)\s*$", dockerfile.read_text(),
                                              re.IGNORECASE | re.MULTILINE)]


def stage_tag(name: str, stage: str) -> str:
    """The tag that keeps image ``name``'s build stage ``stage`` (and so its cache) in the harness's store."""
    repo, _, tag = name.partition(":")
    return f"localhost/rmq-harness/{repo}-{stage}:{tag or 'latest'}"


def _build_and_load(lay: Layout | None, name: str, dockerfile: Path, context: Path, args: dict[str, str],
                    log: Callable[[str], None]) -> str:
    """Build ``dockerfile`` on the stand-ins and load it into the cluster (``lay`` None: build only) under the
    name kubelet resolves a short chart name to (``rmq-pop-harness:dev`` is docker.io/library/rmq-pop-harness:dev)."""
    stand_ins(log)
    cri = f"docker.io/library/{name}"
    log(f"building {cri} from {dockerfile.name}")
    flags = [x for k, v in args.items() for x in ("--build-arg", f"{k}={v}")]
    # Each named stage (the Dockerfile's agents: Maven) built and tagged on its own first: the prune below
    # removes every untagged image, the last image of an untagged stage too, and with it the stage's cache:
    # every build ran Maven again (~40 s), and the jars it made anew (new timestamps) gave a new image to load.
    for stage in stages(dockerfile):
        _run(podman("build", "--network=host", "--pull=never", *flags, "--target", stage, "-t",
                    stage_tag(name, stage), "-f", str(dockerfile), str(context)), f"building {cri}'s stage {stage}")
    _run(podman("build", "--network=host", "--pull=never", *flags, "-t", cri, "-f", str(dockerfile), str(context)),
         f"building {cri}")
    # The image this tag named before is left untagged: gone, or every code change keeps 1.9 GB more.
    _run(podman("image", "prune", "--force"), "removing untagged images")
    if lay is not None:
        load(lay, cri, log)
    return cri


def harness_image(lay: Layout | None, repo_root: Path, tag: str, log: Callable[[str], None]) -> str:
    """The repository's Dockerfile (the load test and the agents the brokers mount)."""
    return _build_and_load(lay, f"rmq-pop-harness:{tag}", repo_root / "Dockerfile", repo_root, {}, log)


ROCKETMQ_REPOSITORY = "rmq-harness-rocketmq"


def rocketmq_image(lay: Layout | None, repo_root: Path, version: str, dist_dir: Path,
                   log: Callable[[str], None]) -> str:
    """rocketmq.Dockerfile over a version's jars (``dist_dir`` holds lib/, as the local backend caches them)."""
    if not (dist_dir / "lib").is_dir():
        raise HarnessError(f"{dist_dir / 'lib'} missing: run `rmq-harness brokers fetch` for RocketMQ {version}")
    return _build_and_load(lay, f"{ROCKETMQ_REPOSITORY}:{version}", repo_root / "rocketmq.Dockerfile", dist_dir,
                           {"ROCKETMQ_VERSION": version}, log)


# Prometheus from Debian's package (the version the local backend runs), as the chart's Prometheus runs it.
PROMETHEUS_IMAGE = "localhost/rmq-harness/prometheus:debian-bookworm"
PROMETHEUS_CONTAINERFILE = """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/*
USER 65534:65534
ENTRYPOINT ["/usr/bin/prometheus"]
"""


def prometheus_image(lay: Layout | None, log: Callable[[str], None]) -> str:
    if not present(PROMETHEUS_IMAGE):
        with tempfile.TemporaryDirectory() as ctx:
            build(PROMETHEUS_IMAGE, Path(ctx), PROMETHEUS_CONTAINERFILE.format(base=base(log)), log)
    if lay is not None:
        load(lay, PROMETHEUS_IMAGE, log)
    return PROMETHEUS_IMAGE


def load_all(lay: Layout, repo_root: Path, tag: str, dists: dict[str, Path], log: Callable[[str], None],
             nodes: Sequence[Node] = (FIRST,), brokers_on: Sequence[Node] | None = None,
             monitoring_on: Sequence[Node] | None = None) -> list[str]:
    """What the chart's Docker-less profile runs: the harness image, Prometheus, and one broker image per
    RocketMQ version (``dists``: version -> the directory holding its lib/). Built one after another (the CPU's
    work), then copied into the nodes' runtimes side by side (mostly the disk's: about 3 GB a node): the harness
    image into each of ``nodes`` (the load, the comparison and the brokers' agents come from it), the broker
    images into ``brokers_on``'s and Prometheus into ``monitoring_on``'s (both: every node, when the chart's
    placement does not say)."""
    from concurrent.futures import ThreadPoolExecutor

    harness = harness_image(None, repo_root, tag, log)
    prometheus = prometheus_image(None, log)
    brokers = [rocketmq_image(None, repo_root, version, path, log) for version, path in dists.items()]
    loads = [(harness, nodes), (prometheus, monitoring_on or nodes), *((b, brokers_on or nodes) for b in brokers)]
    with ThreadPoolExecutor(len(loads), thread_name_prefix="image-load") as pool:
        for f in [pool.submit(load, [lay.of(n) for n in where], image, log) for image, where in loads]:
            f.result()
    return [harness, prometheus, *brokers]
