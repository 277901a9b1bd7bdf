"""RocketMQ server jars from Maven Central, cached per version under the user's cache directory.

Maven resolves the dependency tree of rocketmq-proxy (which pulls in the broker and store),
rocketmq-namesrv and rocketmq-tools from a generated pom; the jars land in a temporary directory that
is renamed into place only when complete, so an interrupted fetch never leaves a half cache.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import cache_dir

ARTIFACTS = ("rocketmq-proxy", "rocketmq-namesrv", "rocketmq-tools")
MAIN_CLASSES = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "proxy": "org.apache.rocketmq.proxy.ProxyStartup",
    "admin": "org.apache.rocketmq.tools.command.MQAdminStartup",
}
# Logback configs the upstream jars bundle; extracted so each process can be pointed at its own
# (with every jar on one classpath the first bundled one would otherwise win).
LOGBACK_RESOURCES = {"namesrv": "rmq.namesrv.logback.xml", "proxy": "rmq.proxy.logback.xml",
                     "broker": "rmq.broker.logback.xml"}
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_MARKER = "complete.json"


@dataclass(frozen=True)
class Distribution:
    """A usable set of RocketMQ jars: a classpath directory plus the logback configs."""

    version: str
    lib: Path
    logback: dict[str, Path]

    def classpath(self) -> str:
        return str(self.lib / "*")


def _pom(version: str) -> str:
    deps = "\n".join(
        f"    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>{a}</artifactId>"
        f"<version>{version}</version></dependency>"
        for a in ARTIFACTS
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rmq-harness</groupId><artifactId>rocketmq-{version}</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def _class_index(lib: Path) -> dict[str, Path]:
    """Map each wanted main class and logback resource to the jar holding it."""
    wanted = {c.replace(".", "/") + ".class" for c in MAIN_CLASSES.values()} | set(LOGBACK_RESOURCES.values())
    found: dict[str, Path] = {}
    for jar in sorted(lib.glob("*.jar")):
        if not jar.name.startswith("rocketmq-"):
            continue
        try:
            with zipfile.ZipFile(jar) as z:
                for name in wanted & set(z.namelist()):
                    found.setdefault(name, jar)
        except zipfile.BadZipFile:
            raise HarnessError(f"{jar}: corrupt jar; delete {lib.parent} and fetch again") from None
    return found


def inspect_lib(lib: Path, version: str, logback_dir: Path) -> Distribution:
    """Check a jar directory holds every server main class; extract the logback configs."""
    if not lib.is_dir():
        raise ConfigError(f"{lib}: not a directory of jars")
    found = _class_index(lib)
    missing = [c for c in MAIN_CLASSES.values() if c.replace(".", "/") + ".class" not in found]
    if missing:
        raise ConfigError(f"{lib}: no jar holds {missing[0]}; is this a RocketMQ 5.x lib directory?")
    logback_dir.mkdir(parents=True, exist_ok=True)
    logback: dict[str, Path] = {}
    for role, resource in LOGBACK_RESOURCES.items():
        target = logback_dir / resource
        if resource in found and not target.exists():
            with zipfile.ZipFile(found[resource]) as z:
                target.write_bytes(z.read(resource))
        if target.exists():
            logback[role] = target
    return Distribution(version=version, lib=lib, logback=logback)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _missing_artifact(mvn_output: str) -> str | None:
    m = re.search(r"(org\.apache\.rocketmq:[\w.-]+:(?:jar|pom):[\w.-]+)", mvn_output)
    return m.group(1) if m else None


def version_dir(version: str) -> Path:
    return cache_dir() / "rocketmq" / version


def ensure_version(version: str, log: Callable[[str], None] = print) -> Distribution:
    """Return the cached jars of ``version``, fetching them from Maven Central the first time."""
    root = version_dir(version)
    lib = root / "lib"
    with _locked(root.parent / f"{version}.lock"):
        if (root / _MARKER).exists():
            return inspect_lib(lib, version, root / "conf")
        mvn = shutil.which("mvn")
        if not mvn:
            raise HarnessError("mvn not found on PATH: install Maven (apt-get install maven) or run make setup")
        log(f"fetching RocketMQ {version} from Maven Central ...")
        started = time.monotonic()
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "pom.xml").write_text(_pom(version))
            proc = subprocess.run(
                [mvn, "-B", "-q", "-f", str(tmp_path / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                 f"-DoutputDirectory={tmp_path / 'lib'}", "-DincludeScope=runtime"],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                out = proc.stdout + proc.stderr
                artifact = _missing_artifact(out)
                if artifact and ("not found" in out or "Could not find" in out or "could not be resolved" in out):
                    raise ConfigError(
                        f"RocketMQ {version} cannot be assembled from Maven Central: {artifact} is not "
                        f"published there; pick another version or point the variant's jars: at a local build"
                    )
                last = [ln for ln in out.splitlines() if "ERROR" in ln][:1] or out.splitlines()[-1:]
                raise HarnessError(f"Maven could not fetch RocketMQ {version}: {last[0] if last else 'unknown error'}")
            inspect_lib(tmp_path / "lib", version, tmp_path / "conf")
            if lib.exists():
                shutil.rmtree(lib)
            shutil.rmtree(root / "conf", ignore_errors=True)
            (tmp_path / "lib").rename(lib)
            (tmp_path / "conf").rename(root / "conf")
        jars = list(lib.glob("*.jar"))
        meta = {
            "version": version,
            "jars": len(jars),
            "bytes": sum(j.stat().st_size for j in jars),
            "fetch_seconds": round(time.monotonic() - started, 1),
        }
        (root / _MARKER).write_text(json.dumps(meta, indent=2))
        mb = meta["bytes"] / 1e6
        log(f"fetched RocketMQ {version}: {meta['jars']} jars, {mb:.0f} MB in {meta['fetch_seconds']} s")
        return inspect_lib(lib, version, root / "conf")


def distribution_for(version: str, jars: Path | None, log: Callable[[str], None] = print) -> Distribution:
    """The jars of a variant: its own directory when given, else the cached Maven Central set."""
    if jars is not None:
        return inspect_lib(jars.expanduser().resolve(), version, cache_dir() / "local-builds" / _slug(jars))
    return ensure_version(version, log)


def _slug(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", str(path.expanduser().resolve())).strip("_")
