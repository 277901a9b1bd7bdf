"""RocketMQ server jars from Maven Central, cached per version under the user's cache directory.

Maven resolves the dependency tree of rocketmq-proxy (which pulls in the broker and store),
rocketmq-namesrv and rocketmq-tools from a generated pom; the jars land in a temporary directory that
is renamed into place only when complete, so an interrupted fetch never leaves a half cache.

A release whose broker is published but some of whose modules are not (5.3.4: no proxy, tools, common,
remoting; 5.5.1: no proxy, name server, client, tools) is assembled as a hybrid (``assembly``): its own
modules wherever published, each missing one from the newest earlier release of the same MAJOR.MINOR line that
publishes it (a patch release keeps the interfaces between broker, proxy and common; a minor release need not),
and every third-party jar at the version the release's own modules resolve to (their POMs, a first Maven pass).
What came from where is in the cache's complete.json and, per jar, in each run's manifest
(harness.contracts.modules).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.contracts.modules import ModuleJar, borrowed, hybrid_note
from harness.core.errors import ConfigError, HarnessError, NotApplicable
from harness.core.paths import cache_dir
from harness.deploy.local import linkage

ARTIFACTS = ("rocketmq-proxy", "rocketmq-namesrv", "rocketmq-tools")
# Every org.apache.rocketmq server module a 5.x server's tree holds (their versions are what an assembly decides;
# rocketmq-proto, -rocksdb and the logging shims are versioned apart and resolve as third-party jars).
MODULES = ("rocketmq-broker", "rocketmq-store", "rocketmq-tiered-store", "rocketmq-common", "rocketmq-remoting",
           "rocketmq-client", "rocketmq-srvutil", "rocketmq-filter", "rocketmq-auth", "rocketmq-acl",
           "rocketmq-controller", "rocketmq-container", "rocketmq-namesrv", "rocketmq-proxy", "rocketmq-tools")
# What Maven itself resolves from (no mirror is configured on these machines); RMQ_HARNESS_MAVEN_REPO points the
# listings elsewhere (Maven's own settings.xml decides where mvn fetches from).
CENTRAL = "https://repo.maven.apache.org/maven2"
GROUP_PATH = "org/apache/rocketmq"
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_MODULE_JAR = re.compile(r"^(rocketmq-[a-z-]+?)-(\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.-]+)?)\.jar$")
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
# A hybrid whose jars did not link: the plan (module -> version) and the refusal, so that the same plan is
# refused again without a fetch; a module published since changes the plan and is fetched.
_REFUSED = "refused.json"


@dataclass(frozen=True)
class Distribution:
    """A usable set of RocketMQ jars: a classpath directory plus the logback configs, and the server module
    jars it holds (a hybrid holds some of another release: harness.contracts.modules)."""

    version: str
    lib: Path
    logback: dict[str, Path]
    modules: tuple[ModuleJar, ...] = ()
    # A hybrid's references that do not link, each in code that runs only with a broker setting on: (the
    # reference, the setting). A variant that turns one of those settings on is refused (refuse_guarded).
    unlinked: tuple[tuple[str, str], ...] = ()

    def classpath(self) -> str:
        return str(self.lib / "*")

    @property
    def hybrid(self) -> str | None:
        """``hybrid: proxy, tools from 5.3.3``, or None when every module is of this version."""
        return hybrid_note(self.version, self.modules)

    def refuse_guarded(self, variant: str, broker: Mapping[str, object]) -> None:
        """One line when the variant's broker settings turn on code of this hybrid that does not link."""
        for reference, setting in self.unlinked:
            if str(broker.get(setting, "false")).lower() == "true":
                raise NotApplicable(variant, f"variant {variant}: {setting}=true runs code of this {self.hybrid} that "
                                    f"does not link ({reference}); remove the setting or use a build whose modules "
                                    f"are all {self.version}")


# --- which release each module comes from ------------------------------------------------------------------

Version = tuple[int, int, int]


def parse(text: str) -> Version:
    m = _RELEASE.match(text.strip())
    if not m:
        raise ConfigError(f"{text!r} is not a release version; write MAJOR.MINOR.PATCH, e.g. 5.3.3")
    return int(m[1]), int(m[2]), int(m[3])


def is_release(text: str) -> bool:
    """MAJOR.MINOR.PATCH and nothing else (no pre-release suffix)."""
    return bool(_RELEASE.match(text))


def repository() -> str:
    return os.environ.get("RMQ_HARNESS_MAVEN_REPO", CENTRAL).rstrip("/")


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 (an https URL we build)
        return resp.read()


def listed(artifact: str, fetch: Callable[[str], bytes] = _get) -> set[str]:
    """The versions the repository's metadata lists for an org.apache.rocketmq artifact (none: never published)."""
    url = f"{repository()}/{GROUP_PATH}/{artifact}/maven-metadata.xml"
    try:
        root = ET.fromstring(fetch(url))
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return set()
        raise HarnessError(f"cannot list RocketMQ releases: {url}: {e}; check the network or set "
                           "RMQ_HARNESS_MAVEN_REPO to a Maven repository") from None
    except (urllib.error.URLError, OSError) as e:
        raise HarnessError(f"cannot list RocketMQ releases: {url}: {e}; check the network or set "
                           "RMQ_HARNESS_MAVEN_REPO to a Maven repository") from None
    except ET.ParseError as e:
        raise HarnessError(f"cannot list RocketMQ releases: {url} is not Maven metadata ({e})") from None
    return {v.text.strip() for v in root.iter("version") if v.text}


def listings(fetch: Callable[[str], bytes] = _get) -> dict[str, set[str]]:
    """Every server module's listed versions, by module (looked up side by side: one round trip, not fifteen)."""
    with ThreadPoolExecutor(8, thread_name_prefix="maven-metadata") as pool:
        return dict(zip(MODULES, pool.map(lambda a: listed(a, fetch), MODULES), strict=True))


@dataclass(frozen=True)
class Assembly:
    """The version each server module of a release is taken at: its own where published, else the newest earlier
    release of its MAJOR.MINOR line that publishes the module. Modules no release of the line publishes are left
    to the POMs (a module the release no longer depends on, e.g. rocketmq-acl after 5.3.2)."""

    release: str
    versions: dict[str, str] = field(default_factory=dict)  # module -> version taken

    @property
    def fills(self) -> dict[str, str]:
        """The modules taken from an earlier release should the release's tree need them (Maven decides: 5.3.3's
        plan names rocketmq-acl 5.3.2, which 5.3.3 no longer depends on). Whether a build is a hybrid is read
        from the jars it ended up with (Distribution.hybrid), never from the plan."""
        return borrowed(self.release, [ModuleJar(a, v) for a, v in self.versions.items()])

    def why_not(self) -> str | None:
        """Why the release cannot run (None: it can): its broker is not published, or no release of its line
        publishes a proxy, name server or tools at or before it."""
        if self.versions.get("rocketmq-broker") != self.release:
            return f"rocketmq-broker {self.release} not published on Maven Central"
        gone = [a for a in ARTIFACTS if a not in self.versions]
        if gone:
            line = ".".join(self.release.split(".")[:2])
            return (f"{', '.join(gone)} {self.release} not published on Maven Central, nor in an earlier {line}.x "
                    f"release")
        return None


def assembly(release: str, listed_versions: Mapping[str, set[str]]) -> Assembly:
    """Which version of each module ``release`` runs with, from the listings (``listings()``)."""
    want = parse(release)
    versions: dict[str, str] = {}
    for module in MODULES:
        have = listed_versions.get(module, set())
        if release in have:
            versions[module] = release
            continue
        earlier = [parse(v) for v in have if _RELEASE.match(v) and parse(v)[:2] == want[:2] and parse(v) < want]
        if earlier:
            versions[module] = ".".join(map(str, max(earlier)))
    return Assembly(release, versions)


def _dependency(group: str, artifact: str, version: str, kind: str = "jar", classifier: str = "") -> str:
    extra = (f"<type>{kind}</type>" if kind != "jar" else "") + (f"<classifier>{classifier}</classifier>"
                                                                  if classifier else "")
    return (f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{extra}</dependency>")


def _pom(version: str, plan: Assembly | None = None, pins: Sequence[tuple[str, str, str, str, str]] = (),
         top: Sequence[str] = ARTIFACTS) -> str:
    """A pom depending on ``top`` (each at the version ``plan`` takes it at; ``version`` without a plan), with
    every module the plan decides and each ``pins`` entry (group, artifact, type, classifier, version) managed."""
    versions = plan.versions if plan else {}
    deps = "\n".join(_dependency("org.apache.rocketmq", a, versions.get(a, version)) for a in top)
    managed = [_dependency("org.apache.rocketmq", a, v) for a, v in sorted(versions.items())]
    managed += [_dependency(g, a, v, t, c) for g, a, t, c, v in pins]
    management = ("  <dependencyManagement><dependencies>\n" + "\n".join(managed)
                  + "\n  </dependencies></dependencyManagement>\n") if managed else ""
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rmq-harness</groupId><artifactId>rocketmq-{version}</artifactId><version>1</version>
  <packaging>pom</packaging>
{management}  <dependencies>
{deps}
  </dependencies>
</project>
"""


def parse_dependency_list(text: str) -> list[tuple[str, str, str, str, str]]:
    """(group, artifact, type, classifier, version) of each line ``dependency:list`` wrote."""
    out = []
    for line in text.splitlines():
        coords = line.strip().split(" ")[0].split(":")
        if len(coords) == 5:
            g, a, t, v, _scope = coords
            out.append((g, a, t, "", v))
        elif len(coords) == 6:
            g, a, t, c, v, _scope = coords
            out.append((g, a, t, c, v))
    return out


def module_jars(lib: Path) -> tuple[ModuleJar, ...]:
    """The server module jars of a lib directory, by artifact, with their sha256."""
    out = []
    for jar in sorted(lib.glob("rocketmq-*.jar")):
        m = _MODULE_JAR.match(jar.name)
        if m and m[1] in MODULES:
            out.append(ModuleJar(m[1], m[2], hashlib.sha256(jar.read_bytes()).hexdigest()))
    return tuple(out)


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
    return Distribution(version=version, lib=lib, logback=logback, modules=module_jars(lib))


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


def maven_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for mvn with no colour codes in its output, which reaches error messages. -B and
    -Dstyle.color=never leave two resets ('\\x1b[0m\\x1b[0m') before the first error line of Maven 3.8.7: its
    console library writes them as it starts, before the command line's -D are read; only a JVM option stops it."""
    out = dict(os.environ if env is None else env)
    out["MAVEN_OPTS"] = f"{out.get('MAVEN_OPTS', '')} -Djansi.noreset=true".strip()
    return out


def _maven(mvn: str, version: str, work: Path, pom: str, goal: list[str]) -> None:
    """Run one maven-dependency-plugin goal on ``pom``; a module Maven Central lacks is a ConfigError naming it."""
    (work / "pom.xml").write_text(pom)
    proc = subprocess.run([mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(work / "pom.xml"), *goal,
                           "-DincludeScope=runtime"], capture_output=True, text=True, check=False, env=maven_env())
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


def _plan(version: str, fetch: Callable[[str], bytes], log: Callable[[str], None]) -> Assembly | None:
    """The release's assembly when it may need modules of another release (None: every module is published for
    it, the version is not a plain release, or the listings cannot be read: Maven is then asked for the release's
    own modules, as written, and says which is missing)."""
    if not _RELEASE.match(version):
        return None
    try:
        listed_versions = listings(fetch)
    except HarnessError as e:  # e.g. Maven reaches a mirror that this lookup cannot: fetch as published
        log(f"{e}; fetching RocketMQ {version} as published, without modules of earlier releases")
        return None
    plan = assembly(version, listed_versions)
    why = plan.why_not()
    if why:
        raise ConfigError(f"RocketMQ {version} cannot be assembled: {why}; pick another version or point the "
                          "variant's jars: at a local build")
    return plan if plan.fills else None


def _fetch(mvn: str, version: str, tmp: Path, plan: Assembly | None) -> None:
    """Resolve into ``tmp/lib``. A hybrid takes two passes: the release's own top modules alone first, whose
    resolved third-party versions are then pinned, so a module borrowed from an earlier release runs on the
    libraries of the release it serves (e.g. 5.5.1's bcpkix-jdk18on 1.83), not on its own older ones."""
    copy = [f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={tmp / 'lib'}"]
    if plan is None:
        _maven(mvn, version, tmp, _pom(version), copy)
        return
    own = ["rocketmq-broker", *(a for a in ARTIFACTS if plan.versions.get(a) == version)]
    listing = tmp / "own-tree.txt"
    _maven(mvn, version, tmp, _pom(version, plan, top=own),
           [f"{DEPENDENCY_PLUGIN}:list", f"-DoutputFile={listing}", "-DoutputAbsoluteArtifactFilename=false"])
    pins = [c for c in parse_dependency_list(listing.read_text())
            if not (c[0] == "org.apache.rocketmq" and c[1] in MODULES)]
    _maven(mvn, version, tmp, _pom(version, plan, pins, top=("rocketmq-broker", *ARTIFACTS)), copy)


def check_links(version: str, lib: Path, modules: Sequence[ModuleJar]) -> list[tuple[str, str]]:
    """A hybrid's module jars link, but for references in code behind a broker setting (returned with it);
    otherwise a ConfigError naming the first reference that does not and the jar that lacks it."""
    found = linkage.breaks([(lib / f"{m.artifact}-{m.version}.jar", m.version) for m in modules])
    hard = [b for b in found if b.guard is None]
    if hard:
        first = hard[0]
        raise ConfigError(f"RocketMQ {version} cannot be assembled from Maven Central: its modules do not link: "
                          f"{first} ({len(hard)} such reference(s)); modules of {version} that are not published "
                          f"differ from those of the release they were taken from; point the variant's jars: at a "
                          f"local build")
    return [(str(b), str(b.guard)) for b in found]


def ensure_version(version: str, log: Callable[[str], None] = print,
                   fetch: Callable[[str], bytes] = _get) -> Distribution:
    """Return the cached jars of ``version``, fetching them from Maven Central the first time (a hybrid when
    some of its modules are not published there: ``assembly``)."""
    root = version_dir(version)
    lib = root / "lib"
    with _locked(root.parent / f"{version}.lock"):
        if (root / _MARKER).exists():
            return _with_record(inspect_lib(lib, version, root / "conf"), root / _MARKER)
        mvn = shutil.which("mvn")
        if not mvn:
            raise HarnessError("mvn not found on PATH: install Maven (apt-get install maven) or run make setup")
        plan = _plan(version, fetch, log)
        refused = root / _REFUSED
        if plan and refused.exists():  # the same plan did not link before: no second fetch to find that out
            record = json.loads(refused.read_text())
            if record.get("versions") == plan.versions:
                raise ConfigError(record["why"])
        log(f"fetching RocketMQ {version} from Maven Central ..." + (
            f" (modules not published for {version} from the newest earlier release of its line: "
            f"{', '.join(f'{a} {v}' for a, v in plan.fills.items())}, those its tree needs)" if plan else ""))
        started = time.monotonic()
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
            tmp_path = Path(tmp)
            _fetch(mvn, version, tmp_path, plan)
            fetched = inspect_lib(tmp_path / "lib", version, tmp_path / "conf")
            try:
                unlinked = check_links(version, tmp_path / "lib", fetched.modules) if fetched.hybrid else []
            except ConfigError as e:
                if plan:
                    refused.write_text(json.dumps({"versions": plan.versions, "why": str(e)}, indent=2))
                raise
            if lib.exists():
                shutil.rmtree(lib)
            shutil.rmtree(root / "conf", ignore_errors=True)
            (tmp_path / "lib").rename(lib)
            (tmp_path / "conf").rename(root / "conf")
        jars = list(lib.glob("*.jar"))
        dist = inspect_lib(lib, version, root / "conf")
        size = sum(j.stat().st_size for j in jars)
        meta: dict[str, object] = {
            "version": version,
            "jars": len(jars),
            "bytes": size,
            "fetch_seconds": round(time.monotonic() - started, 1),
            "modules": {m.artifact: m.version for m in dist.modules},
            "hybrid": dist.hybrid,
            "unlinked": [{"reference": r, "runs_only_with": s} for r, s in unlinked],
        }
        (root / _MARKER).write_text(json.dumps(meta, indent=2))
        log(f"fetched RocketMQ {version}: {len(jars)} jars, {size / 1e6:.0f} MB in {meta['fetch_seconds']} s"
            + (f"; {dist.hybrid}" if dist.hybrid else ""))
        for reference, setting in unlinked:
            log(f"RocketMQ {version}: does not link, in code that runs only with {setting}=true (never turned on "
                f"here; a variant that does is refused): {reference}")
        return _with_record(dist, root / _MARKER)


def _with_record(dist: Distribution, marker: Path) -> Distribution:
    """The distribution with what its fetch recorded (a hybrid's references in code behind a setting)."""
    try:
        meta = json.loads(marker.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        meta = {}
    rows = meta.get("unlinked", []) if isinstance(meta, dict) else []
    return dataclasses.replace(dist, unlinked=tuple((r["reference"], r["runs_only_with"]) for r in rows))


def distribution_for(version: str, jars: Path | None, log: Callable[[str], None] = print) -> Distribution:
    """The jars of a variant: its own directory when given, else the cached Maven Central set."""
    if jars is not None:
        return inspect_lib(jars.expanduser().resolve(), version, cache_dir() / "local-builds" / _slug(jars))
    return ensure_version(version, log)


def _slug(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", str(path.expanduser().resolve())).strip("_")
