"""Runs whose archives go to object storage (``--runs-dir s3://bucket/prefix``): checked before anything
starts, written on this machine first (cache_dir()/outbox, the archive's own atomic commit), then uploaded
(harness.archive.store) and the local copy removed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from harness.archive import store
from harness.core.errors import ConfigError
from harness.core.paths import cache_dir
from harness.core.storage import Location, is_remote, location


def bucket_of(runs_dir: Path | str, run_ids: Sequence[str]) -> Location | None:
    """The destination of a remote ``runs_dir`` (None for a local one), once it is known to take these runs:
    the bucket exists, the credentials may write there, none of ``run_ids`` is there yet."""
    if not is_remote(runs_dir):
        return None
    bucket = location(runs_dir, "--runs-dir")
    store.check_destination(bucket, list(run_ids))
    return bucket


def local_dir(runs_dir: Path | str) -> Path:
    """Where a run's archive is written on this machine."""
    return cache_dir() / "outbox" if is_remote(runs_dir) else Path(runs_dir)


def deliver(archive: Path, bucket: Location | None, log: Callable[[str], None] = print) -> Path | str:
    """The archive where it belongs: uploaded (its URI) when bound for a bucket, else where it is."""
    return archive if bucket is None else store.publish(archive, bucket, log)


def upload(archives: Sequence[Path], runs_dir: Path | str, log: Callable[[str], None] = print) -> list[str]:
    """Copy complete local archives to ``runs_dir`` (s3://), none over one already there."""
    if not is_remote(runs_dir):
        raise ConfigError(f"--runs-dir {runs_dir}: upload goes to s3://bucket/prefix; to copy archives between "
                          "directories, use cp -r")
    missing = [str(a) for a in archives if not (a / "manifest.json").is_file()]
    if missing:
        raise ConfigError(f"{missing[0]}: not a run archive (no manifest.json); only complete archives are uploaded")
    bucket = bucket_of(runs_dir, [a.name for a in archives])
    return [store.upload(a, bucket, log) for a in archives]
