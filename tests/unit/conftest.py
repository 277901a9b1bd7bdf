"""What the unit layer's tests share: the tripwires a refused command line must never reach, and the report of
each test's call kept on its item (the fuzz suites check from it which of their tests ran here)."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.unit.fuzzing import CALL
from tests.unit.refusals import TRIPWIRES, trip


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry point that does real work (brokers, a run, Spark, a cluster) fails the test if reached."""
    for target in TRIPWIRES:
        monkeypatch.setattr(target, trip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL] = report
    return report
