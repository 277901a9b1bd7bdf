"""The layout is the architecture: data flows one way, variants and scenarios -> deployment -> workloads -> run
archive -> analysis -> report, and each stage is one package. A package may import the packages below it that
it needs, never one above: one rule per package, below. Two seams narrow it further: a particular deployment
backend (deploy/local, deploy/k8s) is chosen only where a run's site is chosen, never by the run's sequence or
its faults; and the Kubernetes builder (tools/) is outside the runtime: nothing in it is imported by the
harness.

Every import statement counts, also those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.core.paths import REPO_ROOT
from tests.unit.sources import ROOTS, sources

# Package -> the packages it may import, bottom to top. "harness" is the package's face (its version).
ALLOWED: dict[str, set[str]] = {
    "harness": set(),
    "harness.core": set(),
    "harness.contracts": {"harness.core"},
    "harness.inputs": {"harness.core", "harness.contracts"},
    "harness.measure": {"harness.core", "harness.contracts", "harness.inputs"},
    "harness.client": {"harness.core", "harness.contracts"},
    "harness.deploy": {"harness.core", "harness.contracts", "harness.inputs", "harness.client"},
    "harness.workload": {"harness.core", "harness.contracts", "harness.inputs", "harness.measure", "harness.client"},
    "workloads": {"harness.workload"},  # the locustfile Locust loads: the workload's door
    "harness.archive": {"harness", "harness.core", "harness.contracts", "harness.inputs", "harness.measure"},
    "harness.run": {"harness.core", "harness.contracts", "harness.inputs", "harness.measure", "harness.client",
                    "harness.deploy", "harness.workload", "harness.archive"},
    "harness.report": {"harness.core", "harness.contracts"},  # renders what the analysis and the run wrote
    "spark": {"harness.core", "harness.contracts", "harness.inputs", "harness.measure", "harness.archive",
              "harness.report"},
    "harness.campaigns": {"harness.core", "harness.contracts", "harness.inputs", "harness.measure",
                          "harness.deploy", "harness.run", "harness.archive", "spark"},
    "harness.cli": {"harness", "harness.core", "harness.contracts", "harness.inputs", "harness.deploy",
                    "harness.run", "harness.report", "harness.campaigns", "spark"},
    "dashboards": {"harness.core", "harness.contracts"},
    "tools": {"harness.core", "harness.inputs", "harness.deploy", "harness.report"},
}
# A particular backend: chosen where the site of a run is chosen (run.site), by the commands that drive one
# backend by name, and by what assembles releases (their jars).
BACKENDS = ("harness.deploy.local", "harness.deploy.k8s")
# harness.run.kept: the site of a campaign's runs on brokers it keeps between them (local ones).
CHOOSE_A_BACKEND = ("harness.deploy", "harness.run.site", "harness.run.kept", "harness.cli",
                    "harness.campaigns.releases", "tools")


def package(module: str) -> str:
    """The package of a module: harness.<stage> inside the harness, else its top folder."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "harness" and len(parts) > 1 else parts[0]


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a project module in ``path``, relative ones resolved."""
    name = _module_name(path)
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import module` imports the module when it is one.
            for a in node.names:
                candidate = f"{base}.{a.name}"
                where = REPO_ROOT / Path(*candidate.split("."))
                is_module = where.with_suffix(".py").exists() or where.is_dir()
                out.append((node.lineno, candidate if is_module else base))
    return [(line, m) for line, m in out if m.split(".")[0] in ROOTS]


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_every_module_is_in_a_package_with_a_rule():
    unknown = sorted({package(_module_name(p)) for p in sources()} - set(ALLOWED))
    assert unknown == []


def test_every_package_says_what_it_holds():
    """A package's docstring is its line in the README's layout."""
    silent = [str(p.parent.relative_to(REPO_ROOT)) for p in sources()
              if p.name == "__init__.py" and not ast.get_docstring(ast.parse(p.read_text()))]
    assert silent == []


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_import_against_the_flow(path: Path):
    me = _module_name(path)
    mine = package(me)
    bad = [f"{path.relative_to(REPO_ROOT)}:{line} imports {m}" for line, m in imports(path)
           if package(m) != mine and package(m) not in ALLOWED[mine]]
    bad += [f"{path.relative_to(REPO_ROOT)}:{line} imports {m}, a particular backend" for line, m in imports(path)
            if _within(m, BACKENDS) and not _within(me, CHOOSE_A_BACKEND)]
    assert bad == [], f"{mine} may import only {sorted(ALLOWED[mine])}"


def test_the_rules_form_no_circle_and_run_one_way():
    """Each package's allowed imports sit strictly below it: no two packages may import each other."""
    order: list[str] = []
    todo = dict(ALLOWED)
    while todo:
        ready = sorted(p for p, deps in todo.items() if deps <= set(order))
        assert ready, f"a circle among {sorted(todo)}"
        order += ready
        for p in ready:
            del todo[p]


def test_the_rule_catches_a_backward_import():
    # The checker itself must be able to fail: a backend importing the run, the run a particular backend.
    assert package("harness.run.sequence") not in ALLOWED[package("harness.deploy.local.launcher")]
    assert not _within("harness.run.sequence", CHOOSE_A_BACKEND) and _within("harness.deploy.k8s.cluster", BACKENDS)
    assert package("harness.deploy.k8s.cluster") not in ALLOWED[package("spark.jobs.compare")]
    assert package("tools.cluster.node") not in ALLOWED[package("harness.cli.main")]


def _imports_of_test_modules(path: Path) -> list[str]:
    """The test modules (test_*.py under tests/) that ``path`` imports."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
                 if isinstance(node, ast.ImportFrom) else [])
        out += [n for n in names if n.startswith("tests.") and any(p.startswith("test_") for p in n.split(".")[1:])]
    return sorted(set(out))


def test_no_test_module_imports_another():
    """What tests share lives in a conftest.py or a support module (tests/events.py, tests/synth.py ...), so each
    test module reads on its own and runs without another."""
    tests = REPO_ROOT / "tests"
    found = {str(p.relative_to(REPO_ROOT)): got for p in sorted(tests.rglob("*.py"))
             if (got := _imports_of_test_modules(p))}
    assert found == {}


def test_the_test_import_check_can_fail(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("from tests.unit.test_ledger import counts\nimport tests.synth\n")
    assert _imports_of_test_modules(probe) == ["tests.unit.test_ledger", "tests.unit.test_ledger.counts"]
