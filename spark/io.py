"""Run archives -> one events DataFrame (plus their manifests), with every bad input named in one line.

Archives are checked file by file before Spark starts (manifest JSON, schema versions, the run id, variants and
scenario the manifest records, Parquet footers and the event columns' names and types), so a broken archive is
reported by name rather than by a JVM stack trace. An archive is a local directory or s3://bucket/key
(harness.core.storage): read through pyarrow on the driver and in the tasks alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from harness.contracts import schemas
from harness.contracts.events import COLUMNS_BY_VERSION, SCHEMA
from harness.contracts.record import MANIFEST, RunRecord
from harness.core.errors import ConfigError, HarnessError, first_line, one_line
from harness.core.storage import Location, check_bucket, location, storage_error
from harness.inputs.scenario import Scenario, parse_scenario

KNOWN_MANIFEST_VERSIONS = schemas.MANIFEST.known
KNOWN_EVENT_VERSIONS = schemas.EVENTS.known


class ArchiveError(ConfigError):
    """An archive that cannot be read, naming the file."""


@dataclass(frozen=True)
class Archive:
    path: str
    record: RunRecord  # its manifest.json
    event_files: list[str]

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def variants(self) -> list[str]:
        return self.record.names

    @property
    def event_version(self) -> int:
        return self.record.event_schema_version


def _show(value: object) -> str:
    """A JSON value for a message: scalars as written (cut short), containers by their kind."""
    if isinstance(value, dict | list):
        return "(an object)" if isinstance(value, dict) else "(a list)"
    return one_line(json.dumps(value))[:80]


def _version(manifest: dict, key: str, what: str, known: set[int], where: str) -> None:
    v = manifest[key]
    if type(v) is not int:  # true, 2.0 and "2" are not versions
        raise ArchiveError(f"{where}: {what} schema version {_show(v)} is not a whole number")
    if v not in known:
        newer = "; upgrade rmq-pop-harness" if v > max(known) else ""
        raise ArchiveError(f"{where}: {what} schema version {v} is unknown to this build (knows {sorted(known)})"
                           f"{newer}")


def _check_manifest(manifest: object, where: str) -> RunRecord:
    """What every reader relies on before Spark starts: the versions, a run id, the variants by name and the
    scenario as run (an archive of an unknown or broken scenario is named here, not after a JVM start); the
    run record it holds."""
    if not isinstance(manifest, dict):
        raise ArchiveError(f"{where}: not a JSON object")
    for key in ("schema_version", "event_schema_version", "run_id", "variants", "scenario"):
        if key not in manifest:
            raise ArchiveError(f"{where}: missing {key!r}")
    _version(manifest, "schema_version", "manifest", KNOWN_MANIFEST_VERSIONS, where)
    _version(manifest, "event_schema_version", "event", KNOWN_EVENT_VERSIONS, where)
    if not isinstance(manifest["run_id"], str) or not manifest["run_id"]:
        raise ArchiveError(f"{where}: run_id {_show(manifest['run_id'])} is not a run id")
    variants = manifest["variants"]
    if not isinstance(variants, list) or not all(isinstance(v, dict) and isinstance(v.get("name"), str)
                                                 for v in variants):
        raise ArchiveError(f"{where}: variants is not a list of objects each with a name")
    try:
        parse_scenario(manifest["scenario"], f"{where}: scenario")
    except ConfigError as e:
        raise ArchiveError(str(e)) from None
    try:
        return RunRecord.model_validate(manifest)
    except ValidationError as e:
        first = e.errors()[0]
        field = one_line(".".join(str(p) for p in first["loc"]))
        raise ArchiveError(f"{where}: {field}: {first['msg']}") from None


def _compatible(found: pa.DataType, wanted: pa.DataType) -> bool:
    """A column type Spark reads as the events' own: the same, a large string for a string, or all null."""
    return found == wanted or pa.types.is_null(found) or (wanted == pa.string() and found == pa.large_string())


def inspect(path: str) -> Archive:
    """An archive's manifest and event files, checked, wherever it is (a local directory, s3://bucket/key)."""
    root = location(path, "run archive")
    try:
        return _inspect(root)
    except ArchiveError:
        raise
    except HarnessError as e:  # a storage error (harness.core.storage): no bucket, refused, unreachable
        raise ArchiveError(str(e)) from None


def _inspect(root: Location) -> Archive:
    mf = root.join(MANIFEST)
    where = one_line(mf.uri)
    if not root.remote and not root.is_dir():
        raise ArchiveError(f"{one_line(root.uri)}: no such run archive directory")
    try:
        manifest = json.loads(mf.read_bytes())
    except FileNotFoundError:
        if root.remote:
            check_bucket(root)
        # An upload puts the manifest last: an archive whose upload was cut short has none.
        cut = "; an upload cut short leaves no manifest: upload it again" if root.remote else ""
        raise ArchiveError(f"{where}: missing; is {one_line(root.uri)} a run archive (runs/<run-id>/)?{cut}") \
            from None
    except RecursionError:
        raise ArchiveError(f"{where}: corrupt JSON (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of more digits than Python reads
        raise ArchiveError(f"{where}: corrupt JSON ({first_line(e)})") from None
    except OSError as e:  # a directory, no permission, an S3 error
        if root.remote:
            raise storage_error(mf, e) from None
        raise ArchiveError(f"{where}: cannot be read ({one_line(e.strerror or e)})") from None
    record = _check_manifest(manifest, where)
    files = [f for f in root.join("events").files(recursive=False) if f.name.endswith(".parquet")]
    if not files:
        raise ArchiveError(f"{one_line(root.join('events').uri)}: no event Parquet files")
    listed = record.files.get("events")
    if listed:
        have = {f.name for f in files}
        gone = [n for n in listed if n.endswith(".parquet") and n.rsplit("/", 1)[-1] not in have]
        if gone:
            raise ArchiveError(f"{one_line(root.uri)}: {gone[0]} is listed in its manifest but missing (a copy cut "
                               "short, or files removed); copy the archive again")
    for f in files:
        try:
            with f.fs.open_input_file(f.inner) as handle:
                schema = pq.read_schema(handle)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a broken file
            raise ArchiveError(f"{one_line(f.uri)}: not a readable Parquet file ({first_line(e)})") from None
        wanted = COLUMNS_BY_VERSION[record.event_schema_version]
        missing = [c for c in wanted if c not in schema.names]
        if missing:
            raise ArchiveError(f"{one_line(f.uri)}: missing event column(s) {', '.join(missing)}")
        twice = [c for c in wanted if schema.names.count(c) > 1]
        if twice:
            raise ArchiveError(f"{one_line(f.uri)}: event column(s) {', '.join(twice)} more than once")
        # Spark would fail on these only once it reads them, naming no file.
        wrong = [f"{c} is {schema.field(c).type}, not {SCHEMA.field(c).type}" for c in wanted
                 if not _compatible(schema.field(c).type, SCHEMA.field(c).type)]
        if wrong:
            raise ArchiveError(f"{one_line(f.uri)}: event column(s) of the wrong type: {'; '.join(wrong)}")
    return Archive(root.uri, record, [f.uri for f in files])


def load_archives(
    paths: Sequence[str],
    skip_bad: bool = False,
    warn: Callable[[str], None] = print,
    pool: bool = True,
) -> list[Archive]:
    """Each archive inspected (local or remote); with ``pool``, archives of one scenario name must share its
    definition (their data is pooled)."""
    out: list[Archive] = []
    seen: dict[str, str] = {}
    scenarios: dict[str, tuple[str, dict]] = {}
    for p in paths:
        try:
            a = inspect(p)
        except ArchiveError as e:
            if not skip_bad:
                raise
            warn(f"skipped: {e}")
            continue
        if a.run_id in seen:
            raise ArchiveError(f"{p}: run {a.run_id} is also at {seen[a.run_id]}; pass each archive once")
        seen[a.run_id] = p
        # Pooling two different loads under one name would mix what cannot be compared.
        sc = a.record.scenario
        name = sc.get("name", "?")
        if pool and name in scenarios and _comparable(scenarios[name][1]) != _comparable(sc):
            raise ArchiveError(f"{p}: scenario {name!r} differs from the one of {scenarios[name][0]} "
                               "(pool only archives of one scenario definition, or rename one)")
        scenarios.setdefault(name, (p, sc))
        out.append(a)
    if not out:
        raise ArchiveError("no readable run archive among the paths given")
    return out


def _comparable(scenario: dict) -> dict:
    """A scenario as far as pooling is concerned: how long it ran may differ (its duration, the cycles it ran
    to and their cap), what it did may not; a label (gate) is no difference either."""
    cycles = {k: v for k, v in (scenario.get("cycles") or {}).items() if k not in ("at_least", "cap_s")}
    return {**{k: v for k, v in scenario.items()
               if k not in ("duration_s", "description", "schema_version", "reference", "expect", "gate")},
            "cycles": cycles}


def scenario_of(archive: Archive) -> Scenario:
    """The scenario an archive ran, as its manifest recorded it (older schema versions included)."""
    return parse_scenario(archive.record.scenario, f"{archive.path}: manifest scenario")
