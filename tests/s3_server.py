"""A real S3 server for tests: SeaweedFS (tools/s3), built once into the user cache (`make s3-tools`; built
here when missing, minutes cold), started on 127.0.0.1 with random credentials, stopped by its PID."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools.s3 import build, seaweedfs
from tools.s3.seaweedfs import S3Server

# Shorter than a user's stop (seaweedfs.STOP_S): within a minute of a write the filer spends 15 s on SIGTERM
# flushing a metadata log no test reads (16.6 s measured after a 100 kB write), so a 5 s grace always ran out;
# the directory is thrown away, so it is killed at once.
STOP_S = 0.0


@contextmanager
def running_s3(tmp_dir: Path, bucket: str | None = None, stop_timeout_s: float = STOP_S) -> Iterator[S3Server]:
    """A server with its data, log and credentials under ``tmp_dir`` (and ``bucket`` created), taking writes
    (about 10 s), stopped on exit. It dies with the test process, however that ends."""
    build.build(lambda msg: print(msg, file=sys.stderr))
    server = seaweedfs.start(tmp_dir, die_with_parent=True)
    try:
        if bucket:
            seaweedfs.create_bucket(server, bucket)
        yield server
    finally:
        seaweedfs.stop(server, stop_timeout_s)


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One server for a test module (a module that wants it: `from tests.s3_server import s3_server`)."""
    with running_s3(tmp_path_factory.mktemp("s3")) as server:
        yield server
