"""Maven fetching a release's jars: a generated pom (its top modules, what an assembly decides managed), run
through maven-dependency-plugin into a directory; a module Maven Central lacks is named in one line.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.deploy.local.assembly import ARTIFACTS, MODULES, Assembly

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


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


def _missing_artifact(mvn_output: str) -> str | None:
    m = re.search(r"(org\.apache\.rocketmq:[\w.-]+:(?:jar|pom):[\w.-]+)", mvn_output)
    return m.group(1) if m else None


def maven_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for mvn with no colour codes in its output, which reaches error messages. -B and
    -Dstyle.color=never leave two resets ('\\x1b[0m\\x1b[0m') before the first error line of Maven 3.8.7: its
    console library writes them as it starts, before the command line's -D are read; only a JVM option stops it."""
    out = dict(os.environ if env is None else env)
    out["MAVEN_OPTS"] = f"{out.get('MAVEN_OPTS', '')} -Djansi.noreset=true".strip()
    return out


def _run_goal(mvn: str, version: str, work: Path, pom: str, goal: list[str]) -> None:
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


def resolve(mvn: str, version: str, tmp: Path, plan: Assembly | None) -> None:
    """Resolve into ``tmp/lib``. A hybrid takes two passes: the release's own top modules alone first, whose
    resolved third-party versions are then pinned, so a module borrowed from an earlier release runs on the
    libraries of the release it serves (e.g. 5.5.1's bcpkix-jdk18on 1.83), not on its own older ones."""
    copy = [f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={tmp / 'lib'}"]
    if plan is None:
        _run_goal(mvn, version, tmp, _pom(version), copy)
        return
    own = ["rocketmq-broker", *(a for a in ARTIFACTS if plan.versions.get(a) == version)]
    listing = tmp / "own-tree.txt"
    _run_goal(mvn, version, tmp, _pom(version, plan, top=own),
           [f"{DEPENDENCY_PLUGIN}:list", f"-DoutputFile={listing}", "-DoutputAbsoluteArtifactFilename=false"])
    pins = [c for c in parse_dependency_list(listing.read_text())
            if not (c[0] == "org.apache.rocketmq" and c[1] in MODULES)]
    _run_goal(mvn, version, tmp, _pom(version, plan, pins, top=("rocketmq-broker", *ARTIFACTS)), copy)
