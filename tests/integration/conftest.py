import shutil

import pytest


@pytest.fixture(scope="session", autouse=True)
def _need_java():
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.fail("integration tests need java and mvn on PATH: run `make setup`")
