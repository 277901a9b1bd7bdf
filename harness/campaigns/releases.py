"""RocketMQ 5.x releases as Maven Central lists them, and which of them the harness can run.

A release is listed when any of the server modules lists it (5.1.2's common jar is there, its broker is not);
it is assemblable when its broker is published and every other artifact the harness fetches
(harness.deploy.local.assembly.ARTIFACTS) is published for it or for an earlier release of its line (a hybrid:
harness.deploy.local.assembly.assembly), Maven resolves the tree and a hybrid's modules link. ``sweep`` and
``bisect`` run releases as plain variants named ``rocketmq-<version>``: no agents, no overrides, so what they
measure is the release as shipped (a hybrid says so in every report).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.deploy.local.assembly import Assembly, Version, assembly, is_release, listings, parse
from harness.deploy.local.distribution import Distribution
from harness.deploy.local.jars import ensure_version
from harness.inputs.variants import Variant, release_name, release_of

# The oldest release the harness runs (measured, November 2026): 5.0.0's proxy sends the Python gRPC client
# no settings, so no consumer of it ever receives (and its jars bundle no logging config); 5.1.0 on run.
FIRST_SUPPORTED = (5, 1, 0)
WHY_FIRST = "5.0.0's proxy never sends the gRPC client its settings, so no consumer receives"


def text(v: Version) -> str:
    return ".".join(map(str, v))


def release_variant(version: str) -> Variant:
    """A release as shipped, as a variant of a run."""
    return Variant(name=release_name(version), version=version,
                   description=f"Apache RocketMQ {version} as released (Maven Central)")


@dataclass(frozen=True)
class Catalogue:
    """Every listed release (X.Y.Z only) and, per release, which version of each module it would run with."""

    assemblies: dict[str, Assembly]  # version -> its assembly (harness.deploy.local.assembly.assembly)

    @property
    def versions(self) -> list[str]:
        return sorted(self.assemblies, key=parse)

    def why_not(self, version: str) -> str | None:
        """Why a listed release cannot be assembled from the listings alone (None: it may be)."""
        plan = self.assemblies.get(version)
        return "not a release on Maven Central" if plan is None else plan.why_not()


def catalogue(fetch: Callable[[str], bytes] | None = None) -> Catalogue:
    listed = listings(fetch) if fetch else listings()
    releases = {v for vs in listed.values() for v in vs if is_release(v) and parse(v)[0] == 5}
    return Catalogue({v: assembly(v, listed) for v in releases})


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
        for v in a.record.variants:
            if release_of(v.name) == v.version:
                found.add(v.version)
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
    hybrids: dict[str, str] = field(default_factory=dict)  # ready version -> harness.contracts.modules.hybrid_note


def assemble(versions: Sequence[str], cat: Catalogue, log: Callable[[str], None] = print,
             ensure: Callable[[str], Distribution | None] | None = None) -> Assembled:
    """Fetch each release's jars (cached); the ones Maven Central cannot assemble are skipped with the reason,
    the hybrids named with what they took from where."""
    ensure = ensure or (lambda v: ensure_version(v, log))
    out = Assembled([], {})
    for v in versions:
        why = cat.why_not(v)
        if parse(v) < FIRST_SUPPORTED:
            why = f"older than the first release the harness runs ({text(FIRST_SUPPORTED)}; {WHY_FIRST})"
        dist = None
        if why is None:
            try:
                dist = ensure(v)
            except HarnessError as e:
                why = str(e).removeprefix(f"RocketMQ {v} ")
        if why is None:
            out.ready.append(v)
            if dist is not None and dist.hybrid:
                out.hybrids[v] = dist.hybrid
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
