"""One SeaweedFS `weed server` (master, volume server, filer and S3 gateway in one process) on 127.0.0.1,
started and stopped by its PID; its data, its log and its credentials file in one directory."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from harness.core import process
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Pending, wait_until
from tools.s3.build import find_weed

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

HOST = "127.0.0.1"
REGION = "us-east-1"
START_S = 60.0
# A filer that was written to in the last minute spends 15 s on SIGTERM trying to flush its metadata log,
# after `weed server` already stopped the volume server it would flush to: 20 s lets that end by itself.
STOP_S = 20.0
BUCKET_S = 30.0
LOG = "weed.log"
CREDENTIALS = "s3.json"
PORTS = "ports.json"
# Each gRPC port explicit: weed's default (HTTP port + 10000) could fall on a port someone else holds.
ROLES = ("s3", "s3_grpc", "master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc")
# Where weed puts its unix sockets (one per HTTP and gRPC port it serves; no flag moves the gRPC ones).
SOCKETS = "/tmp/seaweedfs-*-{port}.sock"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str = field(repr=False)  # kept out of reprs: test failures and logs print them
    pid: int
    started_at: float  # with pid, names the process for good (PIDs are reused)
    data_dir: Path
    ports: tuple[int, ...]  # every TCP port it listens on: S3, master, volume, filer, and their gRPC twins

    def env(self) -> dict[str, str]:
        """What an AWS SDK (or pyarrow's FileSystem.from_uri) needs to reach this server and nothing else."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION,
                # No lookup of an EC2 instance's role (a 1 s timeout per client on a machine that is no EC2).
                "AWS_EC2_METADATA_DISABLED": "true"}

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "data_dir": str(self.data_dir), "ports": list(self.ports)}

    @classmethod
    def from_json(cls, d: dict) -> S3Server:
        return cls(**{**d, "data_dir": Path(d["data_dir"]), "ports": tuple(d["ports"])})


def _bindable(port: int) -> bool:
    # SO_REUSEADDR as Go's listeners set it: a port whose last connections linger in TIME_WAIT is free to weed.
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _ports(data_dir: Path) -> dict[str, int]:
    """The server's ports: chosen on its first start, the same on every later one from ``data_dir``.

    SeaweedFS's master keeps its state in a directory named after its port, and a master that finds volumes
    but no state of its own freezes volume growth (no new bucket can be written to) until an operator resumes
    it; the volume server's identity is its address too. So a data directory keeps its ports.
    """
    path = data_dir / PORTS
    if path.is_file():
        ports = {role: int(port) for role, port in json.loads(path.read_text()).items()}
        busy = [f"{role} port {port}" for role, port in ports.items() if not _bindable(port)]
        if busy:
            raise ConfigError(f"{data_dir} keeps the ports of its first start (SeaweedFS's state is tied to them) "
                              f"and its {', '.join(busy)} is in use: free it, or use another data directory")
        return ports
    chosen: list[int] = []
    while len(chosen) < len(ROLES):
        p = process.free_port()
        if p not in chosen:
            chosen.append(p)
    ports = dict(zip(ROLES, chosen, strict=True))
    path.write_text(json.dumps(ports))
    return ports


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path`` readable by its owner only, from the first byte (no window at 0644)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def _ready(urls: list[str], master_port: int, weed: Path, master: str, cwd: Path,
           env: dict[str, str]) -> bool | Pending:
    """Whether an object write would go through at once, not just whether every part answers: the health
    checks pass seconds before the master takes writes and before the filer can lock the object."""
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                r.read()
        except (urllib.error.URLError, OSError) as e:
            return Pending(f"{url}: {getattr(e, 'code', None) or getattr(e, 'reason', e)}")
    # A master restarted over existing volumes refuses to assign for 15 s after it became leader ("warming
    # up": its volume servers report in). A lookup of a volume id nobody has tells, without side effects:
    # 503 while warming up, 404 after.
    try:
        urllib.request.urlopen(f"http://{HOST}:{master_port}/dir/lookup?volumeId=4294967295", timeout=2).close()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            return Pending(f"master warming up (HTTP {e.code}, retry after {e.headers.get('Retry-After')} s)")
    except OSError as e:
        return Pending(f"master lookup: {e}")
    return _filer_joined(weed, master, cwd, env)


def _filer_joined(weed: Path, master: str, cwd: Path, env: dict[str, str]) -> bool | Pending:
    """Whether the filer announced itself to the master, which makes it the lock server every S3 object write
    takes a lock from (until then a write waits). The filer first waits for peers that could hold newer
    metadata: 3 s on a fresh directory, 10 s on a used one. No HTTP endpoint tells; `weed shell`'s cluster.ps
    (about 0.2 s) does.
    """
    try:
        out = subprocess.run([str(weed), "-logtostderr", "shell", f"-master={master}", "-connectTimeout=2s"],
                             input="cluster.ps\n", capture_output=True, text=True, timeout=10, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        return Pending("weed shell cluster.ps did not answer within 10 s")
    joined = re.search(r"^\* filers (\d+)", out.stdout, re.MULTILINE)
    if joined and int(joined.group(1)) > 0:
        return True
    return Pending(f"filers known to the master: {joined.group(1) if joined else out.stderr.strip()[-200:]}")


def running(server: S3Server) -> bool:
    try:
        return process.is_started(psutil.Process(server.pid), server.started_at)
    except psutil.NoSuchProcess:
        return False


def _remove_sockets(ports: tuple[int, ...]) -> None:
    for port in ports:
        for sock in Path("/tmp").glob(Path(SOCKETS.format(port=port)).name):
            sock.unlink(missing_ok=True)


def start(data_dir: Path, access_key: str | None = None, secret_key: str | None = None,
          die_with_parent: bool = False) -> S3Server:
    """Start `weed server` with its S3 gateway, every port on 127.0.0.1; return once it takes writes (about
    10 s from a fresh ``data_dir``, 17 s from a used one: its master's warm-up).

    Credentials (random when not given) go into ``data_dir``/s3.json (0600), never on the command line.
    ``die_with_parent``: the server gets SIGKILL when this process dies (tests); a user's server outlives it.
    """
    weed = find_weed()
    access_key = access_key or "rmq" + secrets.token_hex(8)
    secret_key = secret_key or secrets.token_urlsafe(30)
    data_dir = data_dir.resolve()
    store = data_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # an existing directory keeps its mode
    store.mkdir(exist_ok=True, mode=0o700)
    write_private(data_dir / CREDENTIALS, json.dumps({"identities": [{
        "name": "admin", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
    p = _ports(data_dir)
    argv = [str(weed), "-logtostderr",  # glog would otherwise write files into /tmp
            "server", f"-ip={HOST}", f"-ip.bind={HOST}", f"-dir={store}",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}", "-master.telemetry=false",
            "-master.electionTimeout=1s",  # a lone master restarted over its state: leader in 2 s, not 14-17 s
            "-master.volumeSizeLimitMB=256",  # volumes of 30 GB by default: a handful would fill a small disk
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}", "-volume.max=0",
            "-volume.preStopSeconds=1",  # no load balancer to drain: 10 s by default
            "-filer", f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
            "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}", f"-s3.config={data_dir / CREDENTIALS}",
            "-s3.autoCreateBucket=false",  # as AWS: a write into a missing bucket fails (NoSuchBucket)
            "-s3.port.iceberg=0", "-s3.port.lance=0"]  # both on by default, on ports of their own
    # weed takes AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from its environment as extra admin credentials: a
    # user's own AWS settings must not become keys to this server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    log = data_dir / LOG
    pid = process.spawn(argv, log, cwd=data_dir, env=env, die_with_parent=die_with_parent)
    server = S3Server(f"http://{HOST}:{p['s3']}", access_key, secret_key, pid, process.started_at(pid), data_dir,
                      tuple(p.values()))

    def alive() -> None:
        if not running(server):
            raise HarnessError(f"weed server exited while starting; see {log}", detail=_tail(log))

    urls = [f"http://{HOST}:{p['master']}/readyz", f"http://{HOST}:{p['volume']}/healthz",
            f"http://{HOST}:{p['filer']}/healthz", f"http://{HOST}:{p['s3']}/healthz"]
    master = f"{HOST}:{p['master']}.{p['master_grpc']}"
    try:
        wait_until("SeaweedFS to take writes", lambda: _ready(urls, p["master"], weed, master, data_dir, env),
                   START_S, 0.5, alive=alive, detail=lambda: _tail(log))
    except BaseException:
        stop(server, 5.0)
        raise
    return server


def stop(server: S3Server, timeout_s: float = STOP_S) -> bool:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; remove its unix sockets. True if it had to be killed."""
    killed = process.stop_started([(server.pid, server.started_at)], timeout_s)
    # A graceful stop removes them; a killed weed leaves them in /tmp (a later weed on the port replaces them).
    _remove_sockets(server.ports)
    return bool(killed)


def filesystem(server: S3Server, allow_bucket_creation: bool = False) -> S3FileSystem:
    """A pyarrow S3FileSystem on ``server`` with its credentials (pyarrow imported here: `down` and `status`
    need none of it)."""
    from pyarrow import fs

    return fs.S3FileSystem(access_key=server.access_key, secret_key=server.secret_key,
                           endpoint_override=server.endpoint.removeprefix("http://"), scheme="http",
                           region=REGION, allow_bucket_creation=allow_bucket_creation)


def check_bucket_name(name: str) -> str:
    if not _BUCKET.match(name) or ".." in name:
        raise ConfigError(f"not an S3 bucket name: {name!r} (3-63 of a-z, 0-9, '.', '-'; starts and ends with a "
                          "letter or digit)")
    return name


def create_bucket(server: S3Server, name: str, timeout_s: float = BUCKET_S) -> None:
    """Create bucket ``name`` (nothing if it exists), retrying any error for up to ``timeout_s`` (the last one
    is reported): a server just started is ready by start()'s checks, one started by another process may not be."""
    check_bucket_name(name)
    s3fs = filesystem(server, allow_bucket_creation=True)

    def attempt() -> bool | Pending:
        try:
            s3fs.create_dir(name)
            return True
        except OSError as e:
            return Pending(str(e).splitlines()[0])

    wait_until(f"bucket {name} to be created on {server.endpoint}", attempt, timeout_s, 0.5,
               alive=lambda: _check_running(server))


def _check_running(server: S3Server) -> None:
    if not running(server):
        raise HarnessError(f"weed server (pid {server.pid}) is not running; see {server.data_dir / LOG}",
                           detail=_tail(server.data_dir / LOG))
