import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Spark for every test here (a JVM start costs ~10 s)."""
    from spark.session import local_session

    s = local_session("local[2]")
    yield s
    s.stop()
