"""Which release each RocketMQ server module of a release is taken from, read from the versions Maven Central
lists for each module.

A release whose broker is published but some of whose modules are not (5.3.4: no proxy, tools, common,
remoting; 5.5.1: no proxy, name server, client, tools) is assembled as a hybrid (``assembly``): its own
modules wherever published, each missing one from the newest earlier release of the same MAJOR.MINOR line that
publishes it (a patch release keeps the interfaces between broker, proxy and common; a minor release need not),
and every third-party jar at the version the release's own modules resolve to (their POMs, a first Maven pass:
harness.deploy.local.maven).
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from harness.contracts.modules import ModuleJar, borrowed
from harness.core.errors import ConfigError, HarnessError

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


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 (an https URL we build)
        return resp.read()


def listed(artifact: str, fetch: Callable[[str], bytes] = http_get) -> set[str]:
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


def listings(fetch: Callable[[str], bytes] = http_get) -> dict[str, set[str]]:
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
