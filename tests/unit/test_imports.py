"""Data flows one way: variants and scenarios -> deployment backend -> workloads -> run archive -> Spark
analysis -> report. A module may import the shared contracts and the stages before it that it needs,
never a stage after it, and only the orchestrators (run, cli) see several stages at once.

Every import statement counts, also those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.core.paths import REPO_ROOT

# Longest prefix wins.
COMPONENTS = {
    "harness": "base",
    "harness.core.errors": "base",
    "harness.core.paths": "base",
    "harness.inputs.variants": "inputs",
    "harness.inputs.scenario": "inputs",
    "harness.inputs.expectations": "inputs",
    "harness.contracts.endpoints": "contracts",
    "harness.contracts.events": "contracts",
    "harness.measure.latency": "contracts",
    "harness.measure.ledger": "contracts",
    "harness.measure.ordering": "contracts",
    "harness.measure.tally": "contracts",
    "harness.measure.fault_impact": "contracts",
    "harness.measure.shares": "contracts",
    "harness.measure.frames": "contracts",
    "harness.contracts.metrics": "contracts",
    "harness.archive.schema": "contracts",
    "harness.core.process": "process",
    "harness.client": "client",
    "harness.deploy.readiness": "readiness",
    "harness.deploy": "backends",
    "harness.deploy.base": "backend-interface",
    "harness.run.faults": "faults",
    "tools.cluster": "cluster",
    "harness.run.observability": "observability",
    "harness.workload": "workload",
    "workloads": "workload",
    "harness.archive": "archive",
    "harness.run.site": "site",
    "harness.run.sequence": "run",
    "harness.campaigns.calibrate": "cli",
    "harness.campaigns.matrix": "cli",
    "harness.cli": "cli",
    "harness.cli_releases": "cli",
    "harness.campaigns.releases": "cli",
    "harness.campaigns.sweep": "cli",
    "harness.campaigns.bisect": "cli",
    "spark": "analysis",
    "spark.report": "report",
    "dashboards": "dashboards",
}

ALLOWED = {
    "base": set(),
    "inputs": {"base"},
    "contracts": {"base", "inputs"},
    "process": {"base"},
    "client": {"base", "contracts"},
    "readiness": {"base", "contracts", "client"},
    "backend-interface": {"base", "inputs", "contracts"},
    # The machine under a cluster: it knows nothing of RocketMQ, runs or the chart.
    "cluster": {"base", "process"},
    "backends": {"base", "inputs", "contracts", "process", "client", "readiness", "backend-interface"},
    # Faults act on a backend's processes through its interface, never on a particular backend.
    "faults": {"base", "inputs", "backend-interface"},
    "observability": {"base", "contracts", "process"},
    "workload": {"base", "inputs", "contracts", "process", "client"},
    "archive": {"base", "inputs", "contracts", "process"},
    "site": {"base", "process", "backend-interface", "backends", "observability"},
    # The sequence of a run sees every stage but never a particular backend: the site brings that.
    "run": {"base", "inputs", "contracts", "process", "client", "readiness", "backend-interface", "faults",
            "observability", "workload", "archive", "site"},
    "cli": set(COMPONENTS.values()),
    # Analysis reads the scenario of each archive (its expectations, its subscriptions) from the manifest.
    "analysis": {"base", "inputs", "contracts", "report"},
    "report": {"base"},
    "dashboards": {"base", "contracts"},
}
ROOTS = ("harness", "spark", "dashboards", "workloads")


def component(module: str) -> str | None:
    best = None
    for prefix in COMPONENTS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return COMPONENTS[best] if best else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a project module in ``path``, relative ones resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import module` imports the module when it is one.
            for a in node.names:
                candidate = f"{base}.{a.name}"
                where = REPO_ROOT / Path(*candidate.split("."))
                is_module = where.with_suffix(".py").exists() or where.is_dir()
                out.append((node.lineno, candidate if is_module else base))
    return [(line, m) for line, m in out if m.split(".")[0] in ROOTS]


def sources() -> list[Path]:
    files = []
    for root in ROOTS:
        files += [p for p in (REPO_ROOT / root).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def test_every_project_module_belongs_to_a_component():
    unknown = [str(p.relative_to(REPO_ROOT)) for p in sources() if component(_module_name(p)) is None]
    assert unknown == []


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_import_against_the_flow(path: Path):
    me = component(_module_name(path))
    bad = [f"{path.relative_to(REPO_ROOT)}:{line} imports {m} ({component(m)})"
           for line, m in imports(path)
           if component(m) not in ALLOWED[me] | {me}]
    assert bad == [], f"{me} may import only {sorted(ALLOWED[me])}"


def test_the_rule_catches_a_backward_import(tmp_path: Path):
    # The checker itself must be able to fail: a backend importing the run orchestrator is caught.
    assert component("harness.run.sequence") not in ALLOWED[component("harness.deploy.local.launcher")]
    assert component("harness.deploy.local") not in ALLOWED[component("harness.run.sequence")]
    assert component("harness.deploy.k8s.cluster") not in ALLOWED[component("spark.jobs.compare")]
    assert component("harness.deploy.local") not in ALLOWED[component("harness.run.observability.prometheus")]
