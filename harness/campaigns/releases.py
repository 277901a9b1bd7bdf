"""RocketMQ 5.x releases as Maven Central lists them, and which of them the harness can run.

A release is listed when any of the server artifacts lists it (5.3.4's broker jar is there, its proxy is
not); it is assemblable when every artifact the harness fetches (harness.deploy.local.jars.ARTIFACTS) is
published and Maven resolves their tree. ``sweep`` and ``bisect`` run releases as plain variants named
``rocketmq-<version>``: no agents, no overrides, so what they measure is the release as shipped.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.deploy.local.jars import ARTIFACTS, ensure_version
from harness.inputs.variants import Variant, release_name, release_of

# What Maven itself resolves from (no mirror is configured on these machines); RMQ_HARNESS_MAVEN_REPO points
# both the listing and nothing else elsewhere (Maven's own settings.xml decides where mvn fetches from).
CENTRAL = "https://repo.maven.apache.org/maven2"
GROUP_PATH = "org/apache/rocketmq"
# Artifacts whose listings together say which releases exist.
LISTED_BY = ("rocketmq-broker", "rocketmq-common", "rocketmq-client", *ARTIFACTS)
# The oldest release the harness runs (measured, November 2026): 5.0.0's proxy sends the Python gRPC client
# no settings, so no consumer of it ever receives (and its jars bundle no logging config); 5.1.0 on run.
FIRST_SUPPORTED = (5, 1, 0)
WHY_FIRST = "5.0.0's proxy never sends the gRPC client its settings, so no consumer receives"
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")

Version = tuple[int, int, int]


def parse(text: str) -> Version:
    m = _RELEASE.match(text.strip())
    if not m:
        raise ConfigError(f"{text!r} is not a release version; write MAJOR.MINOR.PATCH, e.g. 5.3.3")
    return int(m[1]), int(m[2]), int(m[3])


def text(v: Version) -> str:
    return ".".join(map(str, v))


def release_variant(version: str) -> Variant:
    """A release as shipped, as a variant of a run."""
    return Variant(name=release_name(version), version=version,
                   description=f"Apache RocketMQ {version} as released (Maven Central)")


def repository() -> str:
    return os.environ.get("RMQ_HARNESS_MAVEN_REPO", CENTRAL).rstrip("/")


def _listed(artifact: str, fetch: Callable[[str], bytes]) -> set[str]:
    url = f"{repository()}/{GROUP_PATH}/{artifact}/maven-metadata.xml"
    try:
        root = ET.fromstring(fetch(url))
    except (urllib.error.URLError, OSError) as e:
        raise HarnessError(f"cannot list RocketMQ releases: {url}: {e}; check the network or set "
                           "RMQ_HARNESS_MAVEN_REPO to a Maven repository") from None
    except ET.ParseError as e:
        raise HarnessError(f"cannot list RocketMQ releases: {url} is not Maven metadata ({e})") from None
    return {v.text.strip() for v in root.iter("version") if v.text}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 (an https URL we build)
        return resp.read()


@dataclass(frozen=True)
class Catalogue:
    """Every listed release (X.Y.Z only) and, per release, the artifacts the harness needs that are missing."""

    missing: dict[str, tuple[str, ...]]  # version -> unpublished artifacts of ARTIFACTS (empty: all there)

    @property
    def versions(self) -> list[str]:
        return sorted(self.missing, key=parse)

    def why_not(self, version: str) -> str | None:
        """Why a listed release cannot be assembled from its listings alone (None: it may be)."""
        gone = self.missing.get(version)
        if gone is None:
            return "not a release on Maven Central"
        if gone:
            return f"{', '.join(gone)} {version} not published on Maven Central"
        return None


def catalogue(fetch: Callable[[str], bytes] = _get) -> Catalogue:
    listed = {a: _listed(a, fetch) for a in LISTED_BY}
    releases = {v for vs in listed.values() for v in vs if _RELEASE.match(v) and parse(v)[0] == 5}
    return Catalogue({v: tuple(a for a in ARTIFACTS if v not in listed[a]) for v in releases})


def in_range(spec: str, cat: Catalogue) -> list[str]:
    """The listed releases of ``A..B`` (both ends included), oldest first; either end may be left out."""
    return _within(spec, cat.versions)


def check_range(spec: str) -> tuple[Version | None, Version | None]:
    """``FIRST..LAST`` checked without looking anything up: its ends (None: left out)."""
    lo_text, sep, hi_text = spec.partition("..")
    if not sep:
        raise ConfigError(f"--versions {spec!r}: write FIRST..LAST, e.g. 5.1.0..5.5.1 (either end may be left out)")
    try:
        lo = parse(lo_text) if lo_text.strip() else None
        hi = parse(hi_text) if hi_text.strip() else None
    except ConfigError as e:
        raise ConfigError(f"--versions {spec!r}: {e}") from None
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"--versions {spec!r}: {text(lo)} is newer than {text(hi)}")
    if lo is not None:
        try:
            refuse_unsupported([text(lo)])
        except ConfigError as e:
            raise ConfigError(f"--versions {spec!r}: {e}") from None
    return lo, hi


def _within(spec: str, versions: Sequence[str]) -> list[str]:
    lo, hi = check_range(spec)
    return sorted((v for v in versions if (lo is None or lo <= parse(v)) and (hi is None or parse(v) <= hi)),
                  key=parse)


def in_archives(spec: str, archives: Sequence[Path]) -> list[str]:
    """The releases of ``A..B`` that the given run archives ran as release variants (``rocketmq-<version>``)."""
    from spark.io import load_archives

    found = set()
    for a in load_archives([str(p) for p in archives], warn=lambda s: None):
        for v in a.manifest.get("variants", []):
            if release_of(v.get("name", "")) == v.get("version"):
                found.add(v["version"])
    within = _within(spec, sorted(found, key=parse))
    if not within:
        raise ConfigError(f"--versions {spec}: the archives hold no release variant in that range (they hold "
                          f"{', '.join(sorted(found, key=parse)) or 'none'})")
    return within


def refuse_unsupported(versions: Iterable[str]) -> None:
    old = [v for v in versions if parse(v) < FIRST_SUPPORTED]
    if old:
        raise ConfigError(f"RocketMQ {', '.join(old)}: older than the first release the harness runs "
                          f"({text(FIRST_SUPPORTED)}; {WHY_FIRST}); pick {text(FIRST_SUPPORTED)} or newer")


@dataclass
class Assembled:
    ready: list[str]
    skipped: dict[str, str]  # version -> why


def assemble(versions: Sequence[str], cat: Catalogue, log: Callable[[str], None] = print,
             ensure: Callable[[str], object] | None = None) -> Assembled:
    """Fetch each release's jars (cached); the ones Maven Central cannot assemble are skipped with the reason."""
    ensure = ensure or (lambda v: ensure_version(v, log))
    out = Assembled([], {})
    for v in versions:
        why = cat.why_not(v)
        if parse(v) < FIRST_SUPPORTED:
            why = f"older than the first release the harness runs ({text(FIRST_SUPPORTED)}; {WHY_FIRST})"
        if why is None:
            try:
                ensure(v)
            except HarnessError as e:
                why = str(e).removeprefix(f"RocketMQ {v} ")
        if why is None:
            out.ready.append(v)
        else:
            out.skipped[v] = why
            log(f"skipping RocketMQ {v}: {why}")
    return out


_BROKER_JAR = re.compile(r"^rocketmq-broker-(\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.-]+)?)\.jar$")


def endpoint(spec: str) -> Variant:
    """A bisection point: a release (``5.3.3``) or a local build (``jars:DIR``, its directory of jars, whose
    version is read from its rocketmq-broker jar's name)."""
    if spec.startswith("jars:"):
        path = Path(spec[5:]).expanduser()
        if not path.is_dir():
            raise ConfigError(f"{spec}: no such directory; give jars:DIR, the lib directory of a RocketMQ build")
        found = sorted(m[1] for j in path.glob("rocketmq-broker-*.jar") if (m := _BROKER_JAR.match(j.name)))
        if not found:
            raise ConfigError(f"{spec}: no rocketmq-broker-VERSION.jar in it; give the lib directory of a build")
        slug = re.sub(r"[^a-z0-9]+", "-", path.resolve().parent.name.lower() + "-" + path.name.lower()).strip("-")
        return Variant(name=f"jars-{slug[-33:].strip('-')}", version=found[-1], jars=path,
                       description=f"a local build of {found[-1]}: {path.resolve()}")
    refuse_unsupported([text(parse(spec))])
    return release_variant(spec)
