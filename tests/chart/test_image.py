"""The harness image's build context holds what a run in the pod reads, and the agents the chart names."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from harness.core.paths import REPO_ROOT
from harness.deploy.agents import PROBE_JAR, RETRY_READ_JAR, WAKEUP_FIX_JAR

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()


def _in_context(path: str) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; '!' re-includes."""
    included = True
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/").removeprefix("**/")
        parts = Path(path).parts
        hit = fnmatch.fnmatch(path, pattern) or any(
            fnmatch.fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts))
        ) or (line.startswith("**/") and any(fnmatch.fnmatch(p, pattern) for p in parts))
        if hit:
            included = negate
    return included


def _copied() -> list[str]:
    """Sources of the COPY lines that take from the build context."""
    return [s for m in re.finditer(r"^COPY (?!--from)(.+?)\s+\S+$", DOCKERFILE, flags=re.M) for s in m.group(1).split()]


def test_every_copied_source_exists_and_is_in_the_build_context():
    sources = _copied()
    assert "harness" in sources and "workloads" in sources
    for src in sources:
        assert (REPO_ROOT / src).exists(), src
        assert _in_context(src), f"{src} is excluded by .dockerignore"


def test_what_a_run_in_the_pod_reads_is_in_the_image():
    copied = set(_copied())
    for needed in ("workloads/locustfile.py", "workloads/scenarios/burst.yaml", "dashboards/pop-retry.json",
                   "harness/run/sequence.py", "spark/jobs/compare.py", "pyproject.toml"):
        assert any(needed == c or needed.startswith(c + "/") for c in copied), needed
        assert _in_context(needed), needed
    assert not _in_context(".venv/bin/python") and not _in_context("runs/x/manifest.json")


def test_the_image_ships_the_agents_the_chart_mounts():
    start = DOCKERFILE.index("COPY --from=agents")
    line = DOCKERFILE[start:DOCKERFILE.index("\n", DOCKERFILE.index("broker-patches/target/\n", start))]
    jars = set(re.findall(r"[\w-]+\.jar", line))
    assert jars == {Path(WAKEUP_FIX_JAR).name, Path(PROBE_JAR).name, Path(RETRY_READ_JAR).name}
    assert "broker-patches/target/" in DOCKERFILE  # where the init containers copy them from (rph.agentDir)


def test_the_dependency_layer_is_built_from_pyproject_toml_alone():
    """pyspark, grpcio and the rest (1.2 GB) are a layer of their own, rebuilt when pyproject.toml changes and
    for nothing else: no file but pyproject.toml is copied in before it (a README edit rebuilt it)."""
    final = DOCKERFILE[DOCKERFILE.rindex("\nFROM "):]
    install = final.index("pip install --no-compile -r")
    before = [s for m in re.finditer(r"^COPY (?!--from)(.+?)\s+\S+$", final[:install], flags=re.M)
              for s in m.group(1).split()]
    assert before == ["pyproject.toml"]
    assert "README.md" in final[install:].split("pip install --no-compile --no-deps -e .")[0]
