import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _need_java():
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.fail("integration tests need java and mvn on PATH: run `make setup`")


@pytest.fixture(scope="session")
def short_burst(tmp_path_factory):
    """One real run through the CLI that several modules read: `short-burst` (two cycles of 8 messages, each
    nacked once, 5 s polls) on unpatched 5.3.3 and on 5.3.3 with the wakeup fix, side by side, with the wakeup
    probe. Its archive."""
    from harness.cli.main import main

    runs = tmp_path_factory.mktemp("short-burst-runs")
    scenario = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"
    assert main(["run", "--variant", "unpatched", "--variant", "patched", "--scenario", str(scenario),
                 "--runs-dir", str(runs), "--probe"]) == 0
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return archive
