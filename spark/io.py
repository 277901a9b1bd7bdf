"""Run archives -> one events DataFrame (plus their manifests), with every bad input named in one line.

Local paths are checked file by file before Spark touches them (manifest JSON, schema versions,
Parquet footers), so a broken archive is reported by name rather than by a JVM stack trace. Paths with
a scheme (s3a://, hdfs://, file://) are read through Spark with the user's Hadoop configuration.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from harness.archive.schema import MANIFEST, MANIFEST_SCHEMA_VERSION
from harness.errors import ConfigError
from harness.events import COLUMNS, COLUMNS_BY_VERSION, EVENT_SCHEMA_VERSION, SCHEMA
from harness.scenario import Scenario, parse_scenario

KNOWN_MANIFEST_VERSIONS = set(range(1, MANIFEST_SCHEMA_VERSION + 1))
KNOWN_EVENT_VERSIONS = set(range(1, EVENT_SCHEMA_VERSION + 1))


class ArchiveError(ConfigError):
    """An archive that cannot be read, naming the file."""


@dataclass(frozen=True)
class Archive:
    path: str
    manifest: dict
    event_files: list[str]

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def variants(self) -> list[str]:
        return [v["name"] for v in self.manifest.get("variants", [])]

    @property
    def event_version(self) -> int:
        return int(self.manifest["event_schema_version"])


def _is_remote(path: str) -> bool:
    return "://" in path


def _check_manifest(manifest: object, where: str) -> dict:
    if not isinstance(manifest, dict):
        raise ArchiveError(f"{where}: not a JSON object")
    for key in ("schema_version", "event_schema_version", "run_id", "variants"):
        if key not in manifest:
            raise ArchiveError(f"{where}: missing {key!r}")
    if manifest["schema_version"] not in KNOWN_MANIFEST_VERSIONS:
        raise ArchiveError(f"{where}: manifest schema version {manifest['schema_version']} is unknown to this "
                           f"build (knows {sorted(KNOWN_MANIFEST_VERSIONS)}); upgrade rmq-pop-harness")
    if manifest["event_schema_version"] not in KNOWN_EVENT_VERSIONS:
        raise ArchiveError(f"{where}: event schema version {manifest['event_schema_version']} is unknown to this "
                           f"build (knows {sorted(KNOWN_EVENT_VERSIONS)}); upgrade rmq-pop-harness")
    return manifest


def inspect_local(path: str) -> Archive:
    root = Path(path)
    if not root.is_dir():
        raise ArchiveError(f"{root}: no such run archive directory")
    mf = root / MANIFEST
    try:
        manifest = json.loads(mf.read_text())
    except FileNotFoundError:
        raise ArchiveError(f"{mf}: missing; is {root} a run archive (runs/<run-id>/)?") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArchiveError(f"{mf}: corrupt JSON ({e})") from None
    _check_manifest(manifest, str(mf))
    files = sorted((root / "events").glob("*.parquet"))
    if not files:
        raise ArchiveError(f"{root / 'events'}: no event Parquet files")
    for f in files:
        try:
            names = pq.read_schema(f).names
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a broken file
            raise ArchiveError(f"{f}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
        missing = [c for c in COLUMNS_BY_VERSION[int(manifest["event_schema_version"])] if c not in names]
        if missing:
            raise ArchiveError(f"{f}: missing event column(s) {', '.join(missing)}")
    return Archive(str(root.resolve()), manifest, [str(f.resolve()) for f in files])


def inspect_remote(spark: object, path: str) -> Archive:
    base = path.rstrip("/")
    try:
        text = spark.sparkContext.wholeTextFiles(f"{base}/{MANIFEST}").collect()[0][1]
        manifest = json.loads(text)
    except Exception as e:  # noqa: BLE001 - Hadoop and Py4J errors of every kind
        raise ArchiveError(f"{base}/{MANIFEST}: cannot be read ({str(e).splitlines()[0][:200]})") from None
    _check_manifest(manifest, f"{base}/{MANIFEST}")
    return Archive(base, manifest, [f"{base}/events/*.parquet"])


def load_archives(
    paths: Sequence[str],
    spark: object | None = None,
    skip_bad: bool = False,
    warn: Callable[[str], None] = print,
) -> list[Archive]:
    out: list[Archive] = []
    seen: dict[str, str] = {}
    scenarios: dict[str, tuple[str, dict]] = {}
    for p in paths:
        try:
            a = inspect_remote(spark, p) if _is_remote(p) else inspect_local(p)
        except ArchiveError as e:
            if not skip_bad:
                raise
            warn(f"skipped: {e}")
            continue
        if a.run_id in seen:
            raise ArchiveError(f"{p}: run {a.run_id} is also at {seen[a.run_id]}; pass each archive once")
        seen[a.run_id] = p
        # Pooling two different loads under one name would mix what cannot be compared.
        sc = a.manifest.get("scenario") or {}
        name = sc.get("name", "?")
        if name in scenarios and _comparable(scenarios[name][1]) != _comparable(sc):
            raise ArchiveError(f"{p}: scenario {name!r} differs from the one of {scenarios[name][0]} "
                               "(pool only archives of one scenario definition, or rename one)")
        scenarios.setdefault(name, (p, sc))
        out.append(a)
    if not out:
        raise ArchiveError("no readable run archive among the paths given")
    return out


def _comparable(scenario: dict) -> dict:
    """A scenario as far as pooling is concerned: how long it ran may differ, what it did may not."""
    return {k: v for k, v in scenario.items()
            if k not in ("duration_s", "description", "schema_version", "reference", "expect")}


def scenario_of(archive: Archive) -> Scenario:
    """The scenario an archive ran, as its manifest recorded it (older schema versions included)."""
    return parse_scenario(archive.manifest.get("scenario"), f"{archive.path}: manifest scenario")


def read_events(spark: object, archives: Sequence[Archive]) -> object:
    """All events of ``archives`` as one Spark DataFrame with the current event columns; columns an older
    archive lacks are null."""
    from pyspark.sql import functions as F

    frames = []
    for version in sorted({a.event_version for a in archives}):
        files = [f for a in archives if a.event_version == version for f in a.event_files]
        try:
            df = spark.read.parquet(*files)
        except Exception as e:  # noqa: BLE001
            raise ArchiveError(f"reading events failed: {str(e).splitlines()[0][:300]}") from None
        for c in COLUMNS:
            if c not in COLUMNS_BY_VERSION[version]:
                df = df.withColumn(c, F.lit(None).cast(_spark_type(c)))
        frames.append(df.select(*COLUMNS))
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def _spark_type(column: str) -> str:
    return {"int32": "int", "int64": "bigint", "double": "double", "string": "string"}[str(SCHEMA.field(column).type)]
