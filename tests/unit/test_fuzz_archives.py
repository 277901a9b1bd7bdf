"""Property-based fuzzing of run archives as the Spark comparison reads them (issue 18, item 4), through the
checks ``spark.io.load_archives`` makes before any SparkSession starts (``compare``, ``matrix`` and
``calibrate`` all call it first): whatever a damaged archive holds, the answer is the archive, or ONE line
naming the file and what is wrong (an ArchiveError, exit 2), no traceback, the archive unchanged.

A valid two-variant archive (tests.synth) is damaged at random: manifest.json not JSON (binary, cut short, not
UTF-8, nested thousands deep, an integer of 5000 digits, NaN), a directory, empty, not an object; a required
field dropped or of the wrong type; schema versions unknown, from a newer harness, or true / 2.0 / "2"; variants
without names; the scenario it ran mutated or missing; events/ missing, empty, a file, or with no Parquet; an
event file truncated, emptied, replaced by garbage or with bytes flipped; columns dropped, of another type or
twice. Damage an archive must survive is checked to pass: fields and columns a newer harness adds, an event
file with no rows, the columns of an older event schema version under that version.

Cases (derandomized; RMQ_HARNESS_FUZZ=N runs N random ones per test instead): PER_TEST below, 830 in all:
600 through load_archives, 200 through ``rmq-harness compare`` (damage that must be refused: exit 2, one
line, no report directory, and a tripwire on the SparkSession), 30 through ``compare --skip-bad`` (one warning
line per damaged archive, never rich markup). About 12 s of CPU on this 2-core machine. The one damage these
checks cannot see (data pages
corrupt behind a good footer) needs Spark: tests/spark/test_fuzz_archives.py.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from harness.contracts.events import COLUMNS_BY_VERSION, EVENT_SCHEMA_VERSION, SCHEMA
from harness.contracts.record import MANIFEST_SCHEMA_VERSION
from spark.io import ArchiveError, load_archives
from tests import synth
from tests.unit.fuzzing import Cases, mutated, scratch, snapshot, weird
from tests.unit.refusals import Case, assert_one_line, assert_refused

PER_TEST = {"load": 600, "compare": 200, "skip_bad": 30}
FUZZ_CASES = sum(PER_TEST.values())
cases = Cases(PER_TEST, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much)
seen = cases.seen


def _valid() -> dict[str, bytes | None]:
    """A valid archive as {relative path: bytes (None: a directory)}."""
    with scratch() as d:
        root = synth.archive(d, "fuzz-run", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
        return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


VALID = _valid()
MANIFEST = json.loads(VALID["manifest.json"])
EVENTS = sorted(k for k in VALID if k.endswith(".parquet"))
REQUIRED = ("schema_version", "event_schema_version", "run_id", "variants", "scenario")
STRING_ALIKE = (pa.string(), pa.large_string())


class Damage:
    """What was done, the archive after it (not in the repr, so a failing case reads well), and whether it must
    be refused (True), must load (False) or may do either (None); a refusal must say ``needle``."""

    def __init__(self, what: str, files: dict[str, bytes | None], refused: bool | None, needle: str = "",
                 twice: bool = False) -> None:
        self.what, self.files, self.refused, self.needle, self.twice = what, files, refused, needle, twice

    def __repr__(self) -> str:
        return f"Damage({self.what!r}, refused={self.refused}, needle={self.needle!r}, twice={self.twice})"


def _manifest(doc: object) -> bytes:
    return json.dumps(doc, allow_nan=True, default=str).encode()  # default: the dates ``weird`` draws


def _table(name: str) -> pa.Table:
    return pq.read_table(io.BytesIO(VALID[name]))


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


OTHER_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.bool_(),
               pa.timestamp("ns"), pa.binary(), pa.list_(pa.int64()), pa.date32()]


@st.composite
def damages(draw: st.DrawFn) -> Damage:
    files = dict(VALID)
    kind = draw(st.sampled_from([
        "manifest bytes", "manifest dir", "drop field", "field value", "version", "newer harness", "variants",
        "scenario", "unknown fields", "twice", "no events", "events file", "empty events", "no parquet",
        "truncate", "flip", "empty parquet", "garbage", "drop columns", "column types", "duplicate column",
        "extra columns", "no rows", "older version",
    ]))
    m = json.loads(VALID["manifest.json"])
    event = draw(st.sampled_from(EVENTS))
    if kind == "manifest bytes":
        good = VALID["manifest.json"]
        how = draw(st.sampled_from(["binary", "cut", "not utf-8", "deep", "digits", "not an object", "empty"]))
        files["manifest.json"] = {
            "binary": lambda: draw(st.binary(max_size=200)),
            "cut": lambda: good[:draw(st.integers(0, len(good) - 1))],
            "not utf-8": lambda: good[:10] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"])) + good[10:],
            "deep": lambda: b"[" * draw(st.integers(1_000, 200_000)),
            "digits": lambda: good.replace(b'"duration_s": 60.0', b'"duration_s": ' + b"9" * 5000),
            "not an object": lambda: _manifest(draw(st.one_of(st.none(), st.booleans(), st.integers(), st.text(),
                                                              st.lists(st.integers(), max_size=3)))),
            "empty": lambda: b"",
        }[how]()
        return Damage(f"manifest.json: {how}", files, True, "manifest.json")
    if kind == "manifest dir":
        files["manifest.json"] = None
        return Damage(kind, files, True, "manifest.json")
    if kind == "drop field":
        key = draw(st.sampled_from(sorted(m)))
        del m[key]
        files["manifest.json"] = _manifest(m)
        return Damage(f"manifest without {key}", files, key in REQUIRED or None, key if key in REQUIRED else "")
    if kind == "field value":
        key = draw(st.sampled_from(sorted(m)))
        m[key] = draw(weird)
        files["manifest.json"] = _manifest(m)
        return Damage(f"manifest {key} = {m[key]!r}", files, None)
    if kind == "version":
        key = draw(st.sampled_from(["schema_version", "event_schema_version"]))
        top = MANIFEST_SCHEMA_VERSION if key == "schema_version" else EVENT_SCHEMA_VERSION
        m[key] = draw(st.one_of(st.integers(top + 1, 10**30), st.integers(-10**6, 0), st.sampled_from(
            [True, False, None, float(top), str(top), [top], {"v": top}, math.nan, math.inf, 1.5])))
        files["manifest.json"] = _manifest(m)
        return Damage(f"manifest {key} = {m[key]!r}", files, True, "schema version")
    if kind == "newer harness":
        key = draw(st.sampled_from(["schema_version", "event_schema_version"]))
        top = MANIFEST_SCHEMA_VERSION if key == "schema_version" else EVENT_SCHEMA_VERSION
        m[key] = top + draw(st.integers(1, 100))
        m["added_by_a_newer_harness"] = draw(weird)
        files["manifest.json"] = _manifest(m)
        return Damage(f"{key} {m[key]} from a newer harness", files, True, "upgrade rmq-pop-harness")
    if kind == "variants":
        m["variants"] = draw(st.one_of(
            st.just({"name": "patched"}), st.just("patched"), st.just(None),
            st.lists(st.one_of(st.dictionaries(st.sampled_from(["version", "nmae", "agents"]), weird, max_size=2),
                               st.fixed_dictionaries({"name": weird}).filter(lambda v: not isinstance(v["name"], str)),
                               weird.filter(lambda v: not isinstance(v, dict))), min_size=1, max_size=3)))
        files["manifest.json"] = _manifest(m)
        return Damage(f"manifest variants = {m['variants']!r}", files, True, "variants")
    if kind == "scenario":
        m["scenario"] = draw(mutated(m["scenario"]))
        files["manifest.json"] = _manifest(m)
        return Damage(f"manifest scenario = {m['scenario']!r}", files, None, "scenario")
    if kind == "unknown fields":
        for k, v in draw(st.dictionaries(st.text(min_size=1, max_size=10), weird, min_size=1, max_size=4)).items():
            m.setdefault(k, v)
        files["manifest.json"] = _manifest(m)
        return Damage("fields a newer harness added", files, False)
    if kind == "twice":
        return Damage("the same run twice", files, True, "pass each archive once", twice=True)
    if kind in ("no events", "events file", "empty events", "no parquet"):
        files = {k: v for k, v in files.items() if not k.startswith("events")}
        files.update({"no events": {}, "events file": {"events": b"PAR1"}, "empty events": {"events": None},
                      "no parquet": {"events/patched.parquet.tmp": VALID[event], "events/x.csv": b"a,b\n"}}[kind])
        return Damage(kind, files, True, "events")
    if kind == "truncate":
        files[event] = VALID[event][:draw(st.integers(0, len(VALID[event]) - 1))]
        return Damage(f"{event} cut to {len(files[event])} bytes", files, True, event)
    if kind == "flip":
        data = bytearray(VALID[event])
        for at, byte in draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), min_size=1,
                                      max_size=8)):
            data[at] = byte
        files[event] = bytes(data)
        return Damage(f"{event} with bytes changed", files, None, event)
    if kind == "empty parquet":
        files[event] = b""
        return Damage(f"{event} empty", files, True, event)
    if kind == "garbage":
        files[event] = draw(st.sampled_from([b"PAR1", b"PAR1PAR1", b"", b"not parquet"])) + draw(st.binary())
        return Damage(f"{event} garbage", files, True, event)
    table = _table(event)
    version = m["event_schema_version"]
    needed = list(COLUMNS_BY_VERSION[version])
    if kind == "drop columns":
        gone = draw(st.lists(st.sampled_from(needed), min_size=1, max_size=5, unique=True))
        files[event] = _parquet(table.drop_columns(gone))
        return Damage(f"{event} without {gone}", files, True, gone[0])
    if kind == "column types":
        changed = draw(st.lists(st.sampled_from(needed), min_size=1, max_size=4, unique=True))
        for c in changed:
            wanted = SCHEMA.field(c).type
            new = draw(st.sampled_from([t for t in OTHER_TYPES if t != wanted and not (
                wanted in STRING_ALIKE and t in STRING_ALIKE)]))
            i = table.schema.get_field_index(c)
            table = table.set_column(i, pa.field(c, new), pa.nulls(table.num_rows, new)
                                     if draw(st.booleans()) else _cast_or_nulls(table.column(c), new))
        files[event] = _parquet(table)
        return Damage(f"{event} with {changed} of other types", files, True, changed[0])
    if kind == "duplicate column":
        c = draw(st.sampled_from(needed))
        files[event] = _parquet(table.append_column(pa.field(c, table.schema.field(c).type), table.column(c)))
        return Damage(f"{event} with {c} twice", files, True, c)
    if kind == "extra columns":
        for name in draw(st.lists(st.text(min_size=1, max_size=8).filter(lambda n: n not in SCHEMA.names),
                                  min_size=1, max_size=3, unique=True)):
            table = table.append_column(name, pa.nulls(table.num_rows, draw(st.sampled_from(OTHER_TYPES))))
        files[event] = _parquet(table)
        return Damage(f"{event} with columns a newer harness added", files, False)
    if kind == "no rows":
        files[event] = _parquet(table.slice(0, 0))
        return Damage(f"{event} with no rows", files, False)
    older = draw(st.integers(1, EVENT_SCHEMA_VERSION))
    m["event_schema_version"] = older
    files["manifest.json"] = _manifest(m)
    for e in EVENTS:
        files[e] = _parquet(_table(e).select(list(COLUMNS_BY_VERSION[older])))
    return Damage(f"an event schema version {older} archive", files, False)


def _cast_or_nulls(column: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    try:
        return column.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.chunked_array([pa.nulls(len(column), to)])


def _write(files: dict[str, bytes | None], root: Path) -> None:
    root.mkdir()
    for rel, content in sorted(files.items()):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir(exist_ok=True) if content is None else p.write_bytes(content)


def test_the_archive_the_fuzzer_damages_loads():
    with scratch() as d:
        _write(VALID, d / "run")
        [a] = load_archives([str(d / "run")])
        assert a.run_id == "fuzz-run" and a.variants == ["unpatched", "patched"] and len(a.event_files) == 2


@cases("load")
@given(damages())
def test_damaged_archives_load_or_are_refused_in_one_line_naming_the_file(damage):
    seen["load"] += 1
    with scratch() as d:
        _write(damage.files, d / "run")
        paths = [str(d / "run")]
        if damage.twice:
            _write(damage.files, d / "copy")
            paths.append(str(d / "copy"))
        before = snapshot(d)
        try:
            archives = load_archives(paths, warn=lambda s: None)
        except ArchiveError as e:
            msg = assert_one_line(e, str(d))
            assert damage.refused is not False, f"{damage.what}: refused: {msg}"
            assert damage.needle in msg, f"{damage.what}: {msg!r} does not say {damage.needle!r}"
        else:
            assert damage.refused is not True, f"{damage.what}: loaded"
            assert len(archives) == 1 and archives[0].variants
        assert snapshot(d) == before


@st.composite
def refused_damages(draw: st.DrawFn) -> Damage:
    d = draw(damages())
    if d.refused is not True:
        d = draw(st.sampled_from([Damage("no events", {k: v for k, v in VALID.items() if not k.startswith("events")},
                                         True, "events"),
                                  Damage("manifest dir", {**VALID, "manifest.json": None}, True, "manifest.json")]))
    return d


def _compare_case(damage: Damage, *extra: str) -> Case:
    files = {f"run/{k}": v for k, v in damage.files.items()} | {"run": None}
    argv = ["compare", "{T}/run", "--baseline", "unpatched", "--candidate", "patched", "--out", "{T}/report", *extra]
    if damage.twice:
        files |= {f"copy/{k}": v for k, v in damage.files.items()} | {"copy": None}
        argv.insert(2, "{T}/copy")
    return Case(argv, files=files, names=("{T}/run", "no readable run archive"))


@cases("compare")
@given(refused_damages())
def test_compare_refuses_a_damaged_archive_in_one_line_before_spark_and_writes_no_report(capsys, tripwires, damage):
    """Through `rmq-harness compare`: exit 2, one line naming the damaged file, no report directory, no Spark."""
    seen["compare"] += 1
    line = assert_refused(capsys, _compare_case(damage))
    assert damage.needle in line, f"{damage.what}: {line}"


@cases("skip_bad")
@given(refused_damages().filter(lambda d: not d.twice))
def test_skip_bad_warns_about_each_damaged_archive_in_one_line(capsys, tripwires, damage):
    """--skip-bad: one warning line for the damaged archive, then, with none left, the one error line."""
    seen["skip_bad"] += 1
    case = _compare_case(damage, "--skip-bad")
    case.argv[1] = "{T}/[/]run"
    case.files = {k.replace("run", "[/]run", 1): v for k, v in case.files.items()}
    case.names = ("no readable run archive",)
    assert_refused(capsys, case, warnings=("{T}/[/]run",))


def test_the_suite_ran_every_case_it_counts(request):
    """Runs last in this module: the cases above add up to FUZZ_CASES, and each test ran every case it counts."""
    assert FUZZ_CASES == 830
    cases.check(request)
