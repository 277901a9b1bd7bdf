"""The test layers. Every test belongs to exactly one, by the folder it lives in, and carries its marker
(`pytest -m unit`, `make test-fast`). Each layer has a time budget beside it: what the whole layer may take
warm on a 2-core machine, and what one of its tests may take. A new test goes in the cheapest layer that can
prove its point; one that would push a layer over its budget makes something else cheaper first.

Budgets are not pass/fail (timing here is noisy): the end of every run prints each layer's time against its
budget and names the tests over their layer's ceiling, so an overrun is seen, never silent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Support modules whose asserts are the tests' own (moved out of test modules): pytest explains their failures as
# it does a test's, once registered before anything imports them.
pytest.register_assert_rewrite("tests.unit.fuzzing", "tests.unit.refusals", "tests.integration.leftovers")


@dataclass(frozen=True)
class Layer:
    what: str
    budget_s: float  # the whole layer, warm
    per_test_s: float  # one test (setup, call and teardown together)


# A budget is the layer's test time summed over its tests (setup, call and teardown), warm, on a 2-core machine of
# the kind of 2026-12-07 evening (about 1.7x faster than that morning's), with every layer run side by side as
# `make test` runs them: one pytest on three workers, a file's tests on one (--dist loadfile), the costliest first
# (`_ByGroup`: the cluster's tests on a worker of their own from the start). Side by side each test takes longer
# than alone (the two cores are busy throughout) but the wall time falls: on that machine, one after the other
# (the layers below the cluster on two workers, then the cluster's alone) took 12 min 32 s + 7 min 33 s, side by
# side 15 min 48 s (unit 132 s, chart 112, spark 210, integration 1,519, cluster 729, browser 11; 16 min 37 s
# the first time, when two cluster tests failed on the drop below).
# Running them side by side was tried twice before and left: the chart's Prometheus missed a run's targets (a race
# in the cluster, fixed: tools.cluster.host.UNROUTED_SERVICES), a crash in the run's hooks when the workers'
# metrics came late (fixed), and a Locust master that dropped a k8s run's workers held up 4 s (fixed:
# docs/findings/dropped-workers.md). A machine half as fast would take twice these (the earlier one of 2026-12-07,
# about 1.7x slower, took 31-37 min one after the other); the budgets leave no room for it.
LAYERS: dict[str, Layer] = {
    "unit": Layer("pure logic: no server, no JVM, no network beyond loopback stubs", 180, 20),
    "chart": Layer("the Helm chart rendered, linted, validated and security-checked", 150, 60),
    "spark": Layer("Spark jobs on local[2], and on a standalone Spark cluster, over small archives", 300, 45),
    "integration": Layer("real RocketMQ servers started on this machine", 1800, 150),
    "cluster": Layer("the chart across a real two-node Kubernetes built here", 900, 600),
    "browser": Layer("reports opened in headless Chromium", 60, 30),
}


def layer_of(path: Path) -> str | None:
    """The layer of a test file: the folder under tests/ it sits in."""
    try:
        top = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return top if top in LAYERS else None


def pytest_configure(config: pytest.Config) -> None:
    for name, layer in LAYERS.items():
        config.addinivalue_line(
            "markers", f"{name}: {layer.what} (budget {layer.budget_s:.0f} s, {layer.per_test_s:.0f} s a test)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    homeless = []
    for item in items:
        layer = layer_of(item.path)
        if layer is None:
            homeless.append(item.nodeid)
        else:
            item.add_marker(getattr(pytest.mark, layer))
    if homeless:
        raise pytest.UsageError(f"tests outside every layer's folder ({', '.join(sorted(LAYERS))}): "
                                f"{', '.join(homeless[:5])}")
    # Cheapest layer first when one process runs them (`pytest -m ...`): a broken unit test fails in a minute.
    # Under xdist the scheduler orders them costliest first (_ByGroup).
    order = list(LAYERS)
    items.sort(key=lambda item: order.index(layer_of(item.path)))


# Under `-n N` (pytest-xdist; `make test`) a worker takes whole groups: a module (its module fixtures, a run or
# brokers, are made once), a layer whose tests share one costly session fixture (a Spark JVM, a cluster), or
# modules that read one session fixture together.
ONE_WORKER = ("spark", "cluster")
COSTLIEST_FIRST = ["cluster", "integration", "spark", "chart", "browser", "unit"]
SHARED = {
    "tests/integration/test_run.py": "short-burst",  # both read conftest.short_burst
    "tests/integration/test_agents.py": "short-burst",
    "tests/integration/test_local_brokers.py": "detached-unpatched",  # both read detached_unpatched
    "tests/integration/test_external_run.py": "detached-unpatched",
}


def layer_of_nodeid(nodeid: str) -> str:
    """The layer of a test id (tests/<layer>/...), from the id alone: the scheduler asks it often."""
    path = nodeid.split("::", 1)[0]
    return path.split("/")[1] if path.count("/") >= 2 else ""


def group_of(nodeid: str) -> str:
    layer, path = layer_of_nodeid(nodeid), nodeid.split("::", 1)[0]
    return layer if layer in ONE_WORKER else SHARED.get(path, path)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # without pytest-xdist there is nothing to schedule
    pass
else:
    class _ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            # Costliest layer first (longest first keeps one worker from finishing long after the others): the
            # cluster's group to a worker of its own at once, the real-broker modules next, the unit files last
            # to fill in. Within a layer, xdist's order (most tests first).
            def rank(scope: str) -> int:
                return COSTLIEST_FIRST.index(layer_of_nodeid(next(iter(self.workqueue[scope]))))

            self.workqueue.move_to_end(min(self.workqueue, key=rank), last=False)
            super()._assign_work_unit(node)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
        return _ByGroup(config, log)


_spent: dict[str, dict[str, float]] = {}
_started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    layer = layer_of(Path(report.fspath)) if report.fspath else None
    if layer is not None:
        per_test = _spent.setdefault(layer, {})
        per_test[report.nodeid] = per_test.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _spent:
        return
    tr = terminalreporter
    tr.section("time per layer (budgets: tests/conftest.py)")
    total = 0.0
    for name, layer in LAYERS.items():
        if name not in _spent:
            continue
        tests = _spent[name]
        spent = sum(tests.values())
        total += spent
        over = "  OVER BUDGET" if spent > layer.budget_s else ""
        tr.write_line(f"{name:12} {len(tests):4} tests {spent:7.1f} s of {layer.budget_s:5.0f} s{over}")
        for nodeid, s in sorted(tests.items(), key=lambda kv: -kv[1]):
            if s <= layer.per_test_s:
                break
            tr.write_line(f"    {s:6.1f} s > {layer.per_test_s:.0f} s a test: {nodeid}")
    workers = getattr(tr.config.option, "numprocesses", None)
    on = f" on {workers} workers" if workers else ""
    tr.write_line(f"{'all':12} {sum(map(len, _spent.values())):4} tests {total:7.1f} s of test time; "
                  f"{time.monotonic() - _started:.0f} s of wall time{on}")
