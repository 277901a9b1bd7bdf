"""Chart tests: every CI profile rendered once per session."""

from __future__ import annotations

import pytest

from tests.chart.helm import PROFILES, render


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    """Every CI profile rendered once: profile file name -> objects."""
    return {p.name: render(p) for p in PROFILES}
