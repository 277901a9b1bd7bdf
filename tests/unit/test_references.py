"""Prose names what exists: every dotted reference to the project's code in a comment or docstring
(``harness.measure.tally.SlicesSummary``, ``spark.facts.SLICE_EVENTS``) and in the docs is a module that exists,
a name that module defines itself (not one it imports: a moved name is cited at its new home) and, on a class,
a member of it; every path to the project's files (``harness/archive/writer.py``) is a file or folder."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from harness.core.paths import REPO_ROOT

CODE = ("harness", "spark", "tools", "workloads", "dashboards", "tests")
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
DOTTED = re.compile(r"(?<![\w./-])((?:harness|spark|tools)(?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./-])((?:harness|spark|tools|tests|docs|workloads|dashboards|charts)/[\w./*<>-]*[\w*>])")
IMPORT = re.compile(r"\s*(from [\w.]+ import |import [\w.]+( as \w+)?$)")
# A file's name, not a module's: harness.json, spark.json.
FILES = {"json", "md", "parquet", "prom", "py", "yaml"}
# Spark's own configuration keys (spark.driver.memory, ...) are not the spark package's modules.
SPARK_CONF = {"app", "driver", "executor", "executorEnv", "jars", "kubernetes", "master", "pyspark", "python",
              "sql", "submit", "ui"}


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of ``path``'s comments and docstrings that mention the code; every line of a document."""
    text = path.read_text()
    lines = text.splitlines()
    if path.suffix == ".md":
        yield from enumerate(lines, 1)
        return
    # The comment of a line: what follows its first '#' (a '#' inside a string only adds text to look at).
    yield from ((i, line[line.index("#"):]) for i, line in enumerate(lines, 1) if "#" in line)
    if not any(DOTTED.search(line) or PATH.search(line) for line in lines if not IMPORT.match(line)):
        return
    tree = ast.parse(text, str(path))
    for node in [tree, *_definitions(tree.body)]:
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            yield first.lineno, first.value.value


def _definitions(body: list[ast.stmt]) -> Iterator[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef]:
    """The classes and functions among ``body``'s statements, at any depth (statements only: fast)."""
    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _definitions(inner)


def _defined(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module or class body defines itself (imports left out), with their nodes."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update({n.id: node for n in ast.walk(target) if isinstance(n, ast.Name)})
        elif isinstance(node, ast.If | ast.Try | ast.With):
            out.update(_defined(node.body))
    return out


def _members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """A class's own names and the attributes its methods set on ``self``."""
    out = _defined(cls.body)
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            out[n.attr] = n
    return out


@cache
def _module(dotted: str) -> dict[str, ast.AST] | None:
    """The names the module ``dotted`` defines, None when there is no such module."""
    base = REPO_ROOT.joinpath(*dotted.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return _defined(ast.parse(path.read_text(), str(path)).body)
    return {} if base.is_dir() else None  # a package without __init__.py: its modules only


def unresolved(ref: str) -> str | None:
    """Why the dotted ``ref`` names nothing, None when it does."""
    parts = ref.split(".")
    if parts[-1] in FILES or parts[0] == "spark" and len(parts) > 1 and parts[1] in SPARK_CONF:
        return None
    for k in range(len(parts), 0, -1):
        names = _module(".".join(parts[:k]))
        if names is None:
            continue
        rest = parts[k:]
        if not rest:
            return None
        if rest[0] not in names and _module(".".join(parts[:k + 1])) is None:
            return f"{'.'.join(parts[:k])} defines no {rest[0]}"
        node = names[rest[0]]
        if len(rest) > 1 and isinstance(node, ast.ClassDef) and not node.bases and rest[1] not in _members(node):
            return f"{rest[0]} has no {rest[1]}"
        return None
    return "no such module"


def stale() -> list[str]:
    files = [p for root in CODE for p in (REPO_ROOT / root).rglob("*.py") if "__pycache__" not in p.parts]
    found = []
    for path in sorted(files) + DOCS:
        where = path.relative_to(REPO_ROOT)
        for line, text in _prose(path):
            for ref in DOTTED.findall(text):
                why = unresolved(ref.rstrip("."))
                if why:
                    found.append(f"{where}:{line} {ref}: {why}")
            for ref in PATH.findall(text):
                # (a glob, a placeholder, an elision, or a checkout named like a folder of ours: harness/.venv)
                if not re.search(r"[*<>]|\.\.\.|/\.", ref) and not (REPO_ROOT / ref).exists():
                    found.append(f"{where}:{line} {ref}: no such file")
    return found


def test_prose_names_only_code_and_files_that_exist():
    assert stale() == []


@pytest.mark.parametrize(("ref", "why"), [
    ("harness.measure.tally.SlicesSummary", None),
    ("harness.measure.tally.SlicesSummary.add", None),
    ("spark.facts.SLICE_EVENTS", None),
    ("harness.archive", None),
    ("spark.executor.memory", None),  # Spark's configuration, not a module
    ("harness.json", None),  # a file's name
    ("harness.measure.latency.summarize", "harness.measure.latency defines no summarize"),
    ("harness.measure.shares", "harness.measure defines no shares"),
    ("spark.jobs.compare", None),
    ("harness.measure.tally.SlicesSummary.gone", "SlicesSummary has no gone"),
    # registry imports GRPC_CLIENTS from harness.contracts.workers: cite it there
    ("harness.client.registry.GRPC_CLIENTS", "harness.client.registry defines no GRPC_CLIENTS"),
])
def test_a_reference_resolves_to_where_a_name_is_defined(ref, why):
    assert unresolved(ref) == why
