"""The S3 server tools/s3 starts (SeaweedFS): reachable through the AWS_* variables alone, with pyarrow's
URI filesystems as the harness opens archives; loopback only; credentials enforced; nothing left once stopped."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from tests.s3_server import running_s3
from tools.s3 import seaweedfs

BUCKET = "rmq-harness-test"


def _from_env(monkeypatch, env: dict[str, str], uri: str) -> tuple[fs.FileSystem, str]:
    for k in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return fs.FileSystem.from_uri(uri)


def test_s3_server_round_trip_auth_and_clean_stop(tmp_path, monkeypatch):
    with running_s3(tmp_path / "s3", bucket=BUCKET) as server:
        listening = [c for c in psutil.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.pid == server.pid]
        assert {c.laddr.port for c in listening} == set(server.ports)
        assert {c.laddr.ip for c in listening} == {"127.0.0.1"}
        assert server.secret_key not in " ".join(psutil.Process(server.pid).cmdline())
        assert stat.S_IMODE((server.data_dir / seaweedfs.CREDENTIALS).stat().st_mode) == 0o600

        # pyarrow 26's FileSystem.from_uri takes the endpoint from AWS_ENDPOINT_URL (S3FileSystem() does not).
        s3, path = _from_env(monkeypatch, server.env(), f"s3://{BUCKET}/dir/object.bin")
        began = time.monotonic()
        with s3.open_output_stream(path) as out:
            out.write(b"rmq" * 1000)
        # Started means taking writes: not a first write waiting out the master's or the filer's start-up.
        assert time.monotonic() - began < 5
        with s3.open_input_stream(path) as got:
            assert got.read() == b"rmq" * 1000
        table = pa.table({"offset": [1, 2, 3]})
        pq.write_table(table, f"s3://{BUCKET}/t/part-0.parquet")
        assert pq.read_table(f"s3://{BUCKET}/t/part-0.parquet").equals(table)

        with pytest.raises(FileNotFoundError):
            s3.open_input_stream("no-such-bucket/object.bin")
        with pytest.raises(OSError, match="NO_SUCH_BUCKET"), s3.open_output_stream("no-such-bucket/x") as out:
            out.write(b"x")

        wrong, _ = _from_env(monkeypatch, {**server.env(), "AWS_SECRET_ACCESS_KEY": "not-" + server.secret_key},
                             f"s3://{BUCKET}/")
        with pytest.raises(OSError, match="SIGNATURE_DOES_NOT_MATCH"):
            wrong.get_file_info(fs.FileSelector(BUCKET, recursive=True))

    assert not psutil.pid_exists(server.pid)
    # Its ports, by what listens on them, not by binding them: connections the server closed linger in TIME_WAIT
    # and make a bind fail with nothing listening.
    assert [c for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port in server.ports] == []
    assert [p for port in server.ports for p in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")] == []
