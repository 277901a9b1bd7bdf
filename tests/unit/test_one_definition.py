"""One definition of each rule: the verdict words, the exit code of a regression and every schema version live in
harness/contracts (verdict.py, schemas.py); any other module spelling one out again fails here, and so does a
document that states another version than the code writes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.contracts import schemas
from harness.contracts.verdict import EXIT_REGRESSION, VERDICTS
from harness.core.paths import REPO_ROOT
from tests.unit.sources import sources

HOMES = {REPO_ROOT / "harness" / "contracts" / "verdict.py", REPO_ROOT / "harness" / "contracts" / "schemas.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (prose may name a verdict)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def spelled_again(path: Path) -> list[str]:
    """Where ``path`` defines a verdict word, EXIT_REGRESSION or a schema version of its own."""
    tree = ast.parse(path.read_text(), str(path))
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in VERDICTS and id(node) not in prose:
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} the verdict word {node.value!r}")
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = t.id if isinstance(t, ast.Name) else ""
                if (name == "EXIT_REGRESSION" or name.endswith("SCHEMA_VERSION")) and isinstance(node.value,
                                                                                                  ast.Constant):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {name} = {node.value.value!r}")
    return found


@pytest.mark.parametrize("path", [p for p in sources() if p not in HOMES],
                         ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_module_spells_a_rule_again(path: Path):
    assert spelled_again(path) == []


def test_the_check_can_fail(tmp_path: Path):
    bad = REPO_ROOT / "harness" / ".one_definition_probe.py"
    bad.write_text('"""A regression is a word here, in prose."""\nEXIT_REGRESSION = 3\nx = "regression"\n'
                   'EVENT_SCHEMA_VERSION = 9\n')
    try:
        assert len(spelled_again(bad)) == 3
    finally:
        bad.unlink()
    assert EXIT_REGRESSION == 3  # what CI jobs were told to expect; a change here is a change of contract


@pytest.mark.parametrize("schema", schemas.ALL, ids=lambda s: s.name)
def test_each_document_states_the_version_the_code_writes(schema: schemas.Schema):
    doc = (REPO_ROOT / schema.doc).read_text()
    stated = schema.stated_as.format(v=schema.version)
    assert stated in doc, f"{schema.doc} does not say {stated!r}"
    assert sorted(schema.changes) == list(range(1, schema.version + 1)), "a version without its change"
