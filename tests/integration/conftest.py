import shutil

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _need_java():
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.fail("integration tests need java and mvn on PATH: run `make setup`")
