"""What the fuzz suites share: how many cases each test draws, derandomized so CI sees the same ones every run
(RMQ_HARNESS_FUZZ=N: N random ones a test instead), how many each ran and the check that it ran them all; a
scratch directory per case and a snapshot of one; values and mutations of YAML documents."""

from __future__ import annotations

import contextlib
import copy
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

RANDOM = int(os.environ.get("RMQ_HARNESS_FUZZ", "0"))
# The report of a test's call, kept on its item by tests/unit/conftest.py: that it ran in this process, and how.
CALL = pytest.StashKey[pytest.TestReport]()
Test = TypeVar("Test", bound=Callable)


class Cases:
    """The cases of a fuzz module. ``per_test``: a count's name -> how many cases the test of that name draws.
    ``@cases(name)`` above a test's ``@given`` gives it its settings; the test adds one to ``seen[name]`` per case
    it ran; the module's last test calls ``check``."""

    def __init__(self, per_test: dict[str, int], *suppress: HealthCheck) -> None:
        self.per_test = per_test
        self.seen = dict.fromkeys(per_test, 0)
        self.tests: dict[str, str] = {}  # the name of a counted test -> the name of its count
        self.suppress = [HealthCheck.too_slow, HealthCheck.data_too_large, *suppress]

    def __call__(self, name: str) -> Callable[[Test], Test]:
        drawn = settings(max_examples=RANDOM or self.per_test[name], derandomize=not RANDOM, database=None,
                         deadline=None, suppress_health_check=self.suppress)

        def counted(test: Test) -> Test:
            self.tests[test.__name__] = name
            return drawn(test)

        return counted

    def check(self, request: pytest.FixtureRequest) -> None:
        """Every counted test of the caller's module that passed in this process before the caller ran each case
        it counts (under RMQ_HARNESS_FUZZ, at least one). The counts are this process's: a test left out (-k),
        skipped, failed (its own report says so) or run by another xdist worker is not checked; with none left
        the check is skipped, never passed on counts of zero."""
        assert sorted(self.tests.values()) == sorted(self.per_test), "each count is the count of one test"
        passed = [item.originalname for item in request.session.items
                  if getattr(item, "module", None) is request.module
                  and getattr(item, "originalname", None) in self.tests
                  and (call := item.stash.get(CALL, None)) is not None and call.passed]
        if not passed:
            pytest.skip("no counted test of this module passed in this process before this check (-k left them out, or "
                        "another worker ran them)")
        ran = {self.tests[t]: self.seen[self.tests[t]] for t in passed}
        if RANDOM:
            assert all(ran.values()), f"tests that ran no case: {sorted(k for k, n in ran.items() if not n)}"
        else:
            assert ran == {k: self.per_test[k] for k in ran}, "cases each count's test ran, and what it counts"


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh directory per case (pytest's tmp_path is one per test, not per hypothesis example)."""
    with tempfile.TemporaryDirectory(prefix="rmq-fuzz-") as d:
        yield Path(d)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``root`` with its bytes (None: a directory)."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


# ---------------------------------------------------------------------------------------------------------
# Values and mutations of YAML documents

# Text without line breaks or other control characters (keys with line breaks have a test of their own).
PRINTABLE = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))
SPECIALS = ["", " ", "drained", "burst", "steady", "grpc", "remoting", "v2", "*", "TagA||TagB", "-1", "0", "1e999",
            "0x10", ".inf", "~", "null", "yes", "5.3.3", "5.3", "latest", "../../etc/passwd", "\u202eevil",
            "名前", "émoji 🎉", "[/]", "[bold]x", ":cat:", "%RETRY%G_T", "a" * 300]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**15, max_value=10**60),
    st.integers(min_value=-10**60, max_value=-1), st.floats(), st.sampled_from([math.inf, -math.inf, math.nan, 1e308]),
    st.text(PRINTABLE, max_size=24), st.sampled_from(SPECIALS), st.dates(),
)
weird = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(PRINTABLE, min_size=1, max_size=8), scalars, max_size=3),
)
keys = st.one_of(st.text(PRINTABLE, min_size=1, max_size=16), st.sampled_from(["nmae", "Name", "topic", "groups ",
                                                                              "cycle", "extra", "__proto__"]),
                 st.integers(-5, 5), st.booleans(), st.none())


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """The path (keys and indexes) of every node under ``node``."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _parent(doc: object, path: tuple) -> object:
    for k in path[:-1]:
        doc = doc[k]
    return doc


@st.composite
def mutated(draw: st.DrawFn, doc: object) -> object:
    """``doc`` with one to three random mutations."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        op = draw(st.sampled_from(["drop", "replace", "unknown", "numbers", "rename", "empty"]))
        if not paths or not isinstance(doc, dict):
            doc = draw(weird)
            continue
        path = draw(st.sampled_from(paths))
        parent, key = _parent(doc, path), path[-1]
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(weird)
        elif op == "unknown":
            mappings = [p for p in [(), *paths] if isinstance(_parent(doc, (*p, None)), dict)]
            target = _parent(doc, (*draw(st.sampled_from(mappings)), None))
            target[draw(keys)] = draw(weird)
        elif op == "numbers":
            numeric = [p for p in paths if type(_parent(doc, p)[p[-1]]) in (int, float)]
            if numeric:
                p = draw(st.sampled_from(numeric))
                old = _parent(doc, p)[p[-1]]
                _parent(doc, p)[p[-1]] = draw(st.sampled_from(
                    [-old, old * 10**6, old + 0.5, 0, -1, 10**30, -(10**30), 2**63, math.nan, math.inf, 1e-300]))
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(keys)] = parent.pop(key)
        elif op == "empty":
            parent[key] = draw(st.sampled_from([[], {}, "", None]))
    return doc
