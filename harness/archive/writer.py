"""Writing a run archive atomically: everything goes into a hidden staging directory beside the
final one, which is renamed into place only when complete; an existing archive is never replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from harness import events as ev
from harness.archive.schema import MANIFEST, Manifest
from harness.errors import HarnessError
from harness.latency import derive


class ArchiveStaging:
    """A run archive being assembled under ``<runs>/.<run-id>.partial``."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.runs_dir = runs_dir
        self.run_id = run_id
        self.final = runs_dir / run_id
        if self.final.exists():
            raise HarnessError(f"{self.final} already exists; archives are never overwritten")
        self.path = runs_dir / f".{run_id}.partial"
        self.path.mkdir(parents=True, exist_ok=False)

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
            if p.is_file():
                rel = p.relative_to(self.path)
                files.setdefault(rel.parts[0] if len(rel.parts) > 1 else "root", []).append(str(rel))
        manifest.files = files
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_text(manifest.model_dump_json(indent=2))
        tmp.replace(self.path / MANIFEST)
        if self.final.exists():
            raise HarnessError(f"{self.final} appeared while the run was being written; kept {self.path}")
        os.rename(self.path, self.final)
        return self.final
