"""Which RocketMQ module jars a variant ran, and whether they are all of its release: the one definition of a
hybrid, shared by the deployment that assembles the jars, the manifest that records them and every report.

A release whose broker jars are on Maven Central but whose proxy, name server or tools are not runs with those
modules taken from an earlier release of its line (harness.deploy.local.assembly.assembly): a hybrid. Every report
says so, in the words of ``hybrid_note``; the manifest keeps each module jar (artifact, version, sha256).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ModuleJar:
    """One org.apache.rocketmq server module on a variant's classpath."""

    artifact: str  # rocketmq-broker, rocketmq-proxy, ...
    version: str
    sha256: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _pairs(modules: Iterable[ModuleJar | Mapping[str, Any] | tuple[str, str]]) -> list[tuple[str, str]]:
    return [m if isinstance(m, tuple) else (m.artifact, m.version) if isinstance(m, ModuleJar)
            else (str(m["artifact"]), str(m["version"])) for m in modules]


def borrowed(release: str, modules: Iterable[ModuleJar | Mapping[str, Any] | tuple[str, str]]) -> dict[str, str]:
    """The modules not of ``release`` (artifact -> the version taken), by artifact; empty: not a hybrid."""
    return {a: v for a, v in sorted(_pairs(modules)) if v != release}


def hybrid_note(release: str | None, modules: Iterable[ModuleJar | Mapping[str, Any]] | None) -> str | None:
    """``hybrid: proxy, tools from 5.3.3`` for a variant that ran modules of another release than its broker's;
    None otherwise (also for archives that did not record their modules, before manifest schema 7). The broker
    jar's version is the release (a local build's, whatever its variant's ``version`` says); ``release`` counts
    only where no broker jar is recorded."""
    pairs = _pairs(modules or ())
    release = next((v for a, v in pairs if a == "rocketmq-broker"), release)
    if not release or not pairs:
        return None
    taken = borrowed(release, pairs)
    if not taken:
        return None
    by_version: dict[str, list[str]] = {}
    for artifact, version in taken.items():
        by_version.setdefault(version, []).append(artifact.removeprefix("rocketmq-"))
    return "hybrid: " + "; ".join(f"{', '.join(names)} from {v}" for v, names in sorted(by_version.items()))
