"""A scenario is data: no code path names one. A string in harness/ or spark/ that is a scenario's name is a special
case waiting to drift (what the defect needs belongs in the scenario language, as a general feature). Words that are
part of that language themselves (a field, or a value a field takes: the `burst` pattern, the `dlq` ... ) are not a
scenario's name when the code says them."""

from __future__ import annotations

import ast
import types
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from harness.core.paths import REPO_ROOT
from harness.inputs.catalogue import load_scenarios
from harness.inputs.scenario import Scenario

SCENARIO_DIRS = (REPO_ROOT / "workloads" / "scenarios", REPO_ROOT / "tests" / "resources" / "scenarios")


def _names() -> set[str]:
    out = set()
    for d in SCENARIO_DIRS:
        for f in d.glob("*.yaml"):
            for s in load_scenarios(str(f)):  # a series: its name and every point's
                out.update({s.name, s.series.of if s.series else s.name})
    return out


def _words(tp: object, seen: set[type]) -> Iterator[str]:
    """Every field name and literal value of the scenario model, through its parts."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp in seen:
            return
        seen.add(tp)
        for name, f in tp.model_fields.items():
            yield name
            yield from _words(f.annotation, seen)
        return
    if typing.get_origin(tp) is typing.Literal:
        yield from (str(v) for v in typing.get_args(tp))
        return
    for arg in typing.get_args(tp):
        yield from _words(arg, seen)
    if isinstance(tp, types.UnionType):
        for arg in tp.__args__:
            yield from _words(arg, seen)


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """The strings of ``path``'s code, but a command line's defaults (``default="burst"``: which scenario runs
    when none is named, a choice no code path depends on)."""
    tree = ast.parse(path.read_text(), str(path))
    defaults = {id(k.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                for k in node.keywords if k.arg == "default"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in defaults:
            yield node.lineno, node.value


def test_no_scenario_is_named_in_the_code():
    language = set(_words(Scenario, set()))
    names = _names() - language
    assert len(names) >= 30  # the catalogue and the tests' scenarios were read
    hits = [f"{path.relative_to(REPO_ROOT)}:{line}: {text!r}"
            for root in ("harness", "spark") for path in sorted((REPO_ROOT / root).rglob("*.py"))
            for line, text in _strings(path) if text in names]
    assert not hits, "scenario names in code (make what they need a feature of the scenario language):\n" + \
        "\n".join(hits)
