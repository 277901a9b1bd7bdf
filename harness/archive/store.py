"""Run archives in object storage: a committed local archive copied to ``s3://bucket/prefix/<run-id>``.

S3 has no rename, so an upload is made whole the way readers look at it: every file first, the manifest last.
Readers open the manifest before anything else (spark.io), so an upload cut short is no archive at all (and is
named as such); an archive already there is never written over.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from harness.contracts.record import MANIFEST
from harness.core.errors import ConfigError, HarnessError
from harness.core.storage import Location, check_writable, upload_tree


def check_destination(runs: Location, run_ids: list[str]) -> None:
    """Before anything starts: the bucket takes writes from these credentials and holds none of ``run_ids``."""
    check_writable(runs)
    for run_id in run_ids:
        _refuse_existing(runs.join(run_id))


def _refuse_existing(there: Location) -> None:
    if there.join(MANIFEST).exists():
        raise ConfigError(f"{there.uri} already exists; archives are never overwritten (pass another "
                          "--runs-dir prefix)")


def upload(archive: Path, runs: Location, log: Callable[[str], None] = print) -> str:
    """Copy the archive at ``archive`` to ``runs``/<its name>, its manifest last; its URI. A partial upload
    of the same archive left there before (no manifest) is completed over."""
    if not (archive / MANIFEST).is_file():
        raise ConfigError(f"{archive}: not a run archive (no {MANIFEST}); only a complete archive is uploaded")
    dest = runs.join(archive.name)
    # The bucket was checked before the run (or the uploads) started; only a run id taken since is new here.
    _refuse_existing(dest)
    files = 0
    for _ in upload_tree(archive, dest, MANIFEST):
        files += 1
    log(f"uploaded {archive.name} ({files} files) to {dest.uri}")
    return dest.uri


def publish(archive: Path, runs: Location, log: Callable[[str], None] = print) -> str:
    """A run's archive moved to ``runs``: uploaded, then the local copy removed; kept (and said where) when
    the upload fails."""
    try:
        uri = upload(archive, runs, log)
    except HarnessError as e:
        raise HarnessError(f"the upload to {runs.uri} failed ({e}); the archive is kept at {archive}: upload it "
                           f"with `rmq-harness upload {archive} --runs-dir {runs.uri}`") from None
    shutil.rmtree(archive)
    return uri
