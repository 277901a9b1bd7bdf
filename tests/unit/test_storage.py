"""Locations (harness.core.storage): what a user may name, and the local side of reading and writing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.core.storage import check_uri, dir_or_uri, is_remote, location


@pytest.mark.parametrize(("uri", "needle"), [
    ("s3://AKIA:secret@bucket/runs", "credentials do not belong in a URI"),
    ("s3://user@bucket/runs", "credentials do not belong in a URI"),
    ("gs://bucket/runs", "scheme gs:// is not supported"),
    ("s3:///runs", "no bucket"),
    ("s3://bucket/runs?endpoint_override=x", "options in the URI are not read"),
])
def test_locations_a_user_may_not_name_are_refused_in_one_line(uri: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        check_uri(uri, "--runs-dir")
    assert needle in str(e.value)
    assert "\n" not in str(e.value)
    assert e.value.exit_code == 2
    # The secret never appears in what is printed.
    assert "secret" not in str(e.value)


def test_s3_and_s3a_name_the_same_place_and_paths_stay_paths(tmp_path: Path) -> None:
    assert dir_or_uri("runs") == Path("runs")
    assert dir_or_uri("s3://b/p") == "s3://b/p"
    assert is_remote("s3a://b/p") and not is_remote("file:///x") and not is_remote(Path("s3://b"))
    assert location("s3a://bucket/a/b/").uri == location("s3://bucket/a/b").uri == "s3://bucket/a/b"
    assert location("s3://bucket").inner == "bucket"
    assert location(f"file://{tmp_path}").uri == str(tmp_path.resolve())


def test_a_local_location_lists_writes_whole_and_joins(tmp_path: Path) -> None:
    root = location(tmp_path / "d")
    assert root.files() == [] and not root.exists()
    root.join("scenario=x", "r1.parquet").write_bytes(b"one")
    root.join("top.json").write_bytes(b"{}")
    names = [f.inner[len(root.inner) + 1:] for f in root.files()]
    assert names == ["scenario=x/r1.parquet", "top.json"]
    assert root.join("top.json").read_bytes() == b"{}" and root.join("top.json").is_file() and root.is_dir()
    # Written beside its place and renamed: nothing else is left in the directory.
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["scenario=x", "top.json"]
