"""Writing a run archive atomically: everything goes into a hidden staging directory beside the
final one, which is renamed into place only when complete; an existing archive is never replaced.

The staging directory holds an ``INCOMPLETE`` file from its creation until just before that rename, so
whatever a run leaves behind when it is interrupted or killed says so itself; a committed archive never
holds one.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from harness import events as ev
from harness.archive.schema import MANIFEST, Manifest
from harness.errors import HarnessError
from harness.latency import derive

INCOMPLETE = "INCOMPLETE"


def incomplete_note(what: str, final: Path, started: dt.datetime | None = None) -> str:
    """The text of the INCOMPLETE marker of a staging directory that will become ``final``."""
    started = started or dt.datetime.now(dt.UTC)
    return (
        f"INCOMPLETE: this {what} was never completed.\n"
        f"It was being written by process {os.getpid()} on {socket.gethostname()}, started "
        f"{started.isoformat(timespec='seconds')}, to become {final}.\n"
        "This file is written when the staging directory is created and removed just before the directory is "
        f"renamed to {final.name}; a directory whose name starts with '.' and ends with '.partial' is never "
        f"a complete {what}. If that process is no longer running, it was interrupted or killed: what is here "
        "is kept for inspection only, nothing reads it, and it may be deleted.\n"
    )


def mark_incomplete(staging: Path, what: str, final: Path) -> None:
    """Write ``staging``/INCOMPLETE (atomically: the marker is either absent or whole)."""
    tmp = staging / f".{INCOMPLETE}.tmp"
    tmp.write_text(incomplete_note(what, final))
    tmp.replace(staging / INCOMPLETE)


def publish(staging: Path, final: Path, what: str) -> None:
    """Rename the complete ``staging`` to ``final``, taking its INCOMPLETE marker away just before; should
    the rename fail, the marker is put back."""
    (staging / INCOMPLETE).unlink(missing_ok=True)
    try:
        os.rename(staging, final)
    except BaseException:
        if staging.is_dir():
            mark_incomplete(staging, what, final)
        raise


class ArchiveStaging:
    """A run archive being assembled under ``<runs>/.<run-id>.partial``, marked INCOMPLETE until ``commit``
    renames it to ``<runs>/<run-id>``."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.runs_dir = runs_dir
        self.run_id = run_id
        self.final = runs_dir / run_id
        if self.final.exists():
            raise HarnessError(f"{self.final} already exists; archives are never overwritten")
        self.path = runs_dir / f".{run_id}.partial"
        self.path.mkdir(parents=True, exist_ok=False)
        mark_incomplete(self.path, f"run archive of run {run_id}", self.final)

    def dir(self, *parts: str) -> Path:
        d = self.path.joinpath(*parts)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def merge_events(self, shard_dirs: dict[str, Path]) -> pd.DataFrame:
        """Merge each variant's worker shards into ``events/<variant>.parquet`` with derived columns."""
        frames = []
        for shard_dir in shard_dirs.values():
            shards = sorted(shard_dir.glob("*.parquet"))
            if not shards:
                continue
            frames.append(pd.concat([pq.read_table(s).to_pandas() for s in shards], ignore_index=True))
        if not frames:
            return ev.to_table([]).to_pandas()
        merged = derive(pd.concat(frames, ignore_index=True))
        merged = merged.sort_values(["variant", "t_client_ns"], kind="stable").reset_index(drop=True)
        out = self.dir("events")
        for variant, part in merged.groupby("variant", sort=True):
            rows = part.astype(object).where(part.notna(), None).to_dict("records")
            ev.write_parquet(rows, out / f"{variant}.parquet")
        return merged

    def commit(self, manifest: Manifest) -> Path:
        files: dict[str, list[str]] = {}
        for p in sorted(self.path.rglob("*")):
            if p.is_file() and p != self.path / INCOMPLETE:
                rel = p.relative_to(self.path)
                files.setdefault(rel.parts[0] if len(rel.parts) > 1 else "root", []).append(str(rel))
        manifest.files = files
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_text(manifest.model_dump_json(indent=2))
        tmp.replace(self.path / MANIFEST)
        if self.final.exists():
            raise HarnessError(f"{self.final} appeared while the run was being written; kept {self.path}")
        publish(self.path, self.final, f"run archive of run {self.run_id}")
        return self.final
