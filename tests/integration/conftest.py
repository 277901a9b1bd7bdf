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
    probe. It goes to a bucket of a real S3 server (`--runs-dir s3://...`), the way a team keeps its runs; its
    archive, copied back from there."""
    import pyarrow.fs as pafs

    from harness.cli.main import main
    from harness.core.paths import cache_dir
    from harness.core.storage import location
    from tests.s3_server import running_s3

    runs = tmp_path_factory.mktemp("short-burst-runs")
    scenario = Path(__file__).parent.parent / "resources" / "scenarios" / "short-burst.yaml"
    with running_s3(tmp_path_factory.mktemp("s3"), bucket="runs") as s3, pytest.MonkeyPatch.context() as mp:
        for k, v in s3.env().items():
            mp.setenv(k, v)
        assert main(["run", "--variant", "unpatched", "--variant", "patched", "--scenario", str(scenario),
                     "--runs-dir", "s3://runs/ci", "--probe"]) == 0
        bucket = location("s3://runs/ci")
        [run_id] = {f.inner.split("/")[-2] for f in bucket.files() if f.name == "manifest.json"}
        # Uploaded whole, and no copy left behind on this machine.
        assert not (cache_dir() / "outbox" / run_id).exists()
        pafs.copy_files(bucket.join(run_id).inner, str(runs / run_id), source_filesystem=bucket.fs)
    return runs / run_id


@pytest.fixture(scope="module")
def archive(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive of the module's own real run, made once for the module: `rmq-harness run` with the module's
    RUN options (its variant and scenario). A module that reads another run's archive defines its own."""
    from harness.cli.main import main

    runs = tmp_path_factory.mktemp("runs")
    assert main(["run", *request.module.RUN, "--runs-dir", str(runs)]) == 0
    [archive] = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return archive


@pytest.fixture(scope="session")
def detached_unpatched(tmp_path_factory):
    """Unpatched 5.3.3 started by `rmq-harness brokers up` under a directory of its own: detached, as a user's
    or an operator's cluster runs, outliving the command that started it. test_local_brokers uses it as the
    brokers it drives by hand; test_external_run measures it as a cluster the run does not own. Yields the
    directory, a LocalBackend over it and its endpoints; `brokers down` stops it after both."""
    from harness.cli.main import main
    from harness.deploy.local import LocalBackend
    from harness.run.site import RUN_BROKER_STOP_S

    work = tmp_path_factory.mktemp("detached") / "brokers"
    assert main(["brokers", "up", "--variant", "unpatched", "--workdir", str(work)]) == 0
    backend = LocalBackend(work, log=lambda s: None, stop_timeout_s=RUN_BROKER_STOP_S)
    [ep] = backend.endpoints()
    yield work, backend, ep
    backend.down()
