"""Property-based fuzzing of what users hand the harness (issue 18, item 4): scenario files, variant files and
command lines. Whatever they hold, the answer is what they describe, or ONE line naming the file (or option)
and what is wrong: a ConfigError (exit 2), no traceback, the input file unchanged and nothing written.

Scenarios and variants are random mutations of the built-in ones (workloads/scenarios/*.yaml,
workloads/variants.yaml): a field dropped, renamed or given a value of the wrong type or out of range (huge
numbers, NaN, unicode, markup), unknown keys, other documents (a list, a scalar, empty, several documents,
YAML cut short or with a stray character), bytes that are not UTF-8, YAML nested thousands deep, scalars YAML
itself cannot construct (a date 2024-13-45, an integer of 5000 digits), keys with line breaks, a directory or
an unreadable path instead of a file.

Command lines are built so that every case MUST be refused before any work (no broker, run, Spark or cluster
starts: those entry points are replaced by a tripwire that fails the test if reached): an unknown option, a
bad number, choice, run id, variant name, --fault or --duration, a broken or missing scenario or variants
file (always together with an unknown variant, so a mutation that happens to be valid still fails), existing
output files, RMQ_HARNESS_* values that are not what the option takes. They go through ``harness.cli.main.main``:
exit 2, exactly one line saying ``error:`` (argparse's own errors print their usage lines above it, as every
argparse program does), the other lines only usage or ``warning:``, no "Traceback", and the temporary
directory (the working directory of the call, holding every file it names) byte for byte as before. --help and
--version are the pure commands: exit 0, stdout only.

The cases are derandomized so CI sees the same ones every run; RMQ_HARNESS_FUZZ=N runs N random cases per test
instead (hypothesis also draws strings from the project's loaded modules, so the cases are the same for the same
code and test selection). PER_TEST counts them (``FUZZ_CASES``, 3,125), per target:

    scenario files     1,350 generated (mutations 800, points of mutated series 150, not UTF-8 / a directory / a
                       path the OS refuses 150, scalars YAML cannot build 150, keys with line breaks 100)
                       + 5 fixed (nesting 4, a path with '@' 1)
    variant files      900 generated (mutations, broken YAML, unreadable paths) + 7 fixed
    command lines      875 generated (refused before any work 700, --help / --version 75, markup in errors 40,
                       RMQ_HARNESS_* values 40, verdict rule options 20) + 8 fixed (--option=--)

About 35 s of CPU on this 2-core machine.
"""

from __future__ import annotations

import copy
import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from harness.core.errors import ConfigError
from harness.core.paths import DEFAULT_VARIANTS_FILE
from harness.inputs.catalogue import SCENARIO_DIR, load_scenario, load_scenarios
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant, load_variants
from tests.unit.fuzzing import PRINTABLE, Cases, mutated, scratch, snapshot, weird
from tests.unit.refusals import Case, assert_one_line, assert_refused, call_main, prepare

PER_TEST = {"scenario_mutations": 800, "scenario_series": 150, "variant_mutations": 900,
            "cli_refused": 700, "cli_pure": 75, "scenario_unreadable": 150, "scenario_bad_scalars": 150,
            "scenario_key_breaks": 100, "cli_markup": 40, "cli_env_values": 40, "cli_rule_options": 20}
FUZZ_CASES = sum(PER_TEST.values())
cases = Cases(PER_TEST, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture)
seen = cases.seen


# ---------------------------------------------------------------------------------------------------------
# YAML files (shared by scenarios and variants; the values and mutations: tests/unit/fuzzing.py)

def dump(doc: object, draw: st.DrawFn) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False,
                          default_flow_style=draw(st.sampled_from([None, False, True]))).encode()


@st.composite
def yaml_files(draw: st.DrawFn, docs: dict[str, object]) -> bytes:
    """A YAML file: a mutated document (mostly), or another document, or broken YAML text."""
    name = draw(st.sampled_from(sorted(docs)))
    kind = draw(st.sampled_from(["mutated"] * 6 + ["other", "empty", "broken", "cut", "several", "aliases"]))
    if kind == "mutated":
        return dump(draw(mutated(docs[name])), draw)
    if kind == "other":
        return dump(draw(weird), draw)
    if kind == "empty":
        return draw(st.sampled_from([b"", b"\n", b"# nothing here\n", b"---\n", b"...\n", b"\xef\xbb\xbf"]))
    text = dump(docs[name], draw)
    if kind == "broken":  # a stray character somewhere
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(list(":-[]{}!&*|>'\"%@`\t?,#"))).encode() + text[at:]
    if kind == "cut":  # cut short, on a UTF-8 boundary
        return text.decode()[:draw(st.integers(0, len(text.decode())))].encode()
    if kind == "several":
        return text + b"---\n" + text
    anchor = "&a [" + ", ".join(["x"] * 9) + "]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}" +
                                                              ", *a" * 8 + "]\n" for i in range(6))
    return ("a: " + anchor).encode() + text


# ---------------------------------------------------------------------------------------------------------
# Scenario files

SCENARIOS = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SCENARIO_DIR.glob("*.yaml"))}
SERIES = sorted(n for n, d in SCENARIOS.items() if isinstance(d, dict) and d.get("series"))
FILE_NAMES = st.sampled_from(["s.yaml", "scénario.yaml", "名前.yml", "with space.yaml", "[bold].yaml", "s.yml"])


def _load_or_refuse(target: str, path: Path, plural: bool = False) -> list[Scenario] | None:
    """The scenario(s), or None after checking the one-line refusal names the file."""
    try:
        got = load_scenarios(target) if plural else [load_scenario(target)]
    except ConfigError as e:
        assert_one_line(e, str(path))
        return None
    assert all(isinstance(s, Scenario) for s in got)
    return got


def test_every_builtin_scenario_is_a_document_the_fuzzer_can_mutate():
    assert len(SCENARIOS) >= 10 and all(isinstance(d, dict) and "name" in d for d in SCENARIOS.values())
    assert SERIES, "no series scenario to fuzz the points of"


@cases("scenario_mutations")
@given(yaml_files(SCENARIOS), FILE_NAMES, st.booleans())
def test_mutated_scenarios_load_or_are_refused_in_one_line(content, name, plural):
    seen["scenario_mutations"] += 1
    with scratch() as d:
        path = d / name
        path.write_bytes(content)
        before = snapshot(d)
        _load_or_refuse(str(path), path, plural)
        assert snapshot(d) == before


@cases("scenario_series")
@given(st.sampled_from(SERIES), st.data())
def test_points_of_mutated_series_load_or_are_refused_in_one_line(name, data):
    """NAME@N of a series file whose groups, points or series block were mutated."""
    doc = data.draw(mutated(SCENARIOS[name]))
    point = data.draw(st.one_of(st.integers(-2, 300).map(str), st.sampled_from(["", "x", "1.0", "١", "4 ", "0x4"])))
    with scratch() as d:
        path = d / "series.yaml"
        path.write_bytes(dump(doc, data.draw))
        before = snapshot(d)
        try:
            sc = load_scenario(f"{path}@{point}")
        except ConfigError as e:
            assert_one_line(e, str(path))
        else:
            assert sc.series is not None and len(sc.groups) == int(point)  # "١" is a digit too
        _load_or_refuse(str(path), path, plural=True)
        assert snapshot(d) == before
    seen["scenario_series"] += 1  # after every draw: a case hypothesis drops while drawing is not counted


@st.composite
def unreadable(draw: st.DrawFn) -> tuple[str, str]:
    """(how, what): a file that is not UTF-8, a directory, a path no file can have."""
    how = draw(st.sampled_from(["not utf-8", "directory", "nul in name", "name too long", "empty name", "at only"]))
    what = {"not utf-8": "", "directory": "", "nul in name": "x\x00y.yaml", "name too long": "n" * 300 + ".yaml",
            "empty name": "", "at only": "@"}[how]
    if how == "not utf-8":
        good = dump(SCENARIOS[draw(st.sampled_from(sorted(SCENARIOS)))], draw)
        at = draw(st.integers(0, len(good)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xfe\xff"]))
        what = (good[:at] + bad + good[at:]).decode("latin-1")
    return how, what


@cases("scenario_unreadable")
@given(unreadable())
def test_scenario_paths_that_cannot_be_read_as_text_are_refused_in_one_line(case):
    how, what = case
    with scratch() as d:
        if how == "not utf-8":
            path = d / "s.yaml"
            path.write_bytes(what.encode("latin-1"))
            target = str(path)
        elif how == "directory":
            path = d / "s.yaml"
            path.mkdir()
            target = str(path)
        elif how in ("empty name", "at only"):  # resolves to the working directory
            path, target = Path("."), what
        else:
            path = d / what
            target = str(path)
        before = snapshot(d)
        with pytest.raises(ConfigError) as e:
            load_scenario(target)
        assert_one_line(e.value, str(path) if how != "nul in name" else "x\\x00y.yaml", what or ".")
        assert snapshot(d) == before
    seen["scenario_unreadable"] += 1


BAD_SCALARS = ["2024-13-45", "2001-02-30", "!!timestamp 2001-01-01x", "!!int abc", "!!float abc", "9" * 5000,
               "-" + "1" * 4400, "!!binary ab=c", "!!timestamp x"]


@cases("scenario_bad_scalars")
@given(st.sampled_from(sorted(SCENARIOS)), st.data())
def test_scalars_yaml_cannot_construct_are_refused_in_one_line(name, data):
    """A value YAML parses but cannot build: an impossible date, an integer of more digits than Python
    converts, a bad explicit tag."""
    text = dump(SCENARIOS[name], data.draw).decode()
    key = data.draw(st.sampled_from([k for k in SCENARIOS[name] if k != "expect"]))
    text = re.sub(rf"^{key}:.*$", f"{key}: {data.draw(st.sampled_from(BAD_SCALARS))}", text, count=1,
                  flags=re.MULTILINE)
    if f"{key}: " not in text:
        text = f"{key}: {data.draw(st.sampled_from(BAD_SCALARS))}\n" + text
    with scratch() as d:
        path = d / "s.yaml"
        path.write_text(text)
        before = snapshot(d)
        _load_or_refuse(str(path), path)
        assert snapshot(d) == before
    seen["scenario_bad_scalars"] += 1


NESTED = {"flow list": "[" * 1_500, "flow list in a field": "name: x\ntopics: " + "[" * 1_500 + "]" * 1_500,
          "block mappings": "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1_000)),
          "flow mappings": "{a: " * 1_000 + "1" + "}" * 1_000}


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_scenarios_nested_deeper_than_yaml_recurses_are_refused_in_one_line(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_scenario(str(path))
    assert "nested too deeply" in assert_one_line(e.value, str(path))


def test_a_scenario_file_whose_path_has_an_at_sign_loads(tmp_path):
    path = tmp_path / "me@host" / "s.yaml"
    path.parent.mkdir()
    path.write_text((SCENARIO_DIR / "burst.yaml").read_text())
    assert load_scenario(str(path)).name == "burst"


@cases("scenario_key_breaks")
@given(st.sampled_from(sorted(SCENARIOS)), st.text(PRINTABLE, max_size=6),
       st.sampled_from(["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"]),
       st.text(PRINTABLE, max_size=6), st.booleans())
def test_unknown_keys_with_line_breaks_are_refused_in_one_line(name, head, brk, tail, nested):
    doc = copy.deepcopy(SCENARIOS[name])
    target = doc["produce"] if nested and isinstance(doc.get("produce"), dict) else doc
    target[head + brk + tail] = 1
    with scratch() as d:
        path = d / "s.yaml"
        path.write_bytes(yaml.safe_dump(doc, allow_unicode=True).encode())
        with pytest.raises(ConfigError) as e:
            load_scenario(str(path))
        assert_one_line(e.value, str(path))
    seen["scenario_key_breaks"] += 1


# ---------------------------------------------------------------------------------------------------------
# Variant files

VARIANTS = {"variants.yaml": yaml.safe_load(DEFAULT_VARIANTS_FILE.read_text())}


@cases("variant_mutations")
@given(st.one_of(yaml_files(VARIANTS), unreadable()), FILE_NAMES)
def test_mutated_variant_files_load_or_are_refused_in_one_line(content, name):
    """The shipped variants.yaml mutated, or broken YAML, or a path that cannot be read as text."""
    seen["variant_mutations"] += 1
    with scratch() as d:
        path = d / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content[0] == "not utf-8":
            path.write_bytes(content[1].encode("latin-1"))
        elif content[0] == "directory":
            path.mkdir()
        elif content[0] in ("empty name", "at only"):
            path = Path(content[1] or ".")  # the working directory, or a file '@' that is not there
        else:
            path = d / content[1]
        before = snapshot(d)
        try:
            got = load_variants(path)
        except ConfigError as e:
            assert_one_line(e, str(path).replace("\x00", "\\x00"))
        else:
            assert all(isinstance(v, Variant) and v.name == k for k, v in got.items())  # {}: select names none
        assert snapshot(d) == before


@pytest.mark.parametrize("text", [
    "variants:\n  x:\n    version: 2024-13-45\n",
    "variants:\n  x:\n    version: " + "9" * 5000 + "\n",
    "variants: " + "[" * 1_500,
    "variants:\n  x:\n    version: '5.3.3'\n    description: !!int abc\n",
    'variants:\n  "a\\nb":\n    version: "5.3.3"\n',
    'variants:\n  ok:\n    version: "5.3.3"\n    broker: {"x\\ny": [1]}\n',
    "[1, 2]\n",
])
def test_variant_files_yaml_cannot_build_are_refused_in_one_line(tmp_path, text):
    path = tmp_path / "v.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_variants(path)
    assert_one_line(e.value, str(path))
    assert ": : " not in str(e.value)  # an error of the whole document names no field


# ---------------------------------------------------------------------------------------------------------
# Command lines (what a refusal must be, and the tripwires: tests/unit/refusals.py)

KNOWN_VARIANTS = sorted(load_variants())
# Text as typed on a command line: no line breaks (argparse prints "unrecognized arguments" as typed), no
# rich markup or emoji codes ('[' and ':'; those have a test of their own below).
ARG_CHARS = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="[:")
words = st.text(ARG_CHARS, min_size=1, max_size=12)
UNKNOWN = "fuzz-unknown-"
unknown_variants = words.map(lambda w: UNKNOWN + w)

COMMANDS = [[], ["run"], ["brokers", "up"], ["brokers", "fetch"], ["brokers", "status"], ["brokers", "down"],
            ["k8s", "run"], ["k8s", "collect"], ["k8s", "status"], ["calibrate"],
            ["matrix", "--variant", "a"], ["compare", "x", "--baseline", "a", "--candidate", "b"],
            ["sweep", "--versions", "5.1.0..5.5.0"], ["bisect", "--good", "5.3.3", "--bad", "5.4.0"], ["history", "x"]]
NUMERIC = [(["run"], "--duration", float), (["k8s", "run"], "--duration", float),
           (["brokers", "up"], "--timeout", float), (["k8s", "status"], "--wait", float),
           (["calibrate"], "--runs", int), (["calibrate"], "--shift-ms", int), (["calibrate"], "--alpha", float),
           (["calibrate"], "--min-effect", float), (["calibrate"], "--bootstrap", int),
           (["compare", "x", "--baseline", "a", "--candidate", "b"], "--alpha", float),
           (["compare", "x", "--baseline", "a", "--candidate", "b"], "--min-effect", float),
           (["compare", "x", "--baseline", "a", "--candidate", "b"], "--bootstrap", int),
           (["sweep", "--versions", ".."], "--batch", int), (["history", "x"], "--window", int),
           (["history", "x"], "--max-pvalue", float)]
CHOICES = [(["run"], "--protocol", ("grpc", "remoting")), (["run"], "--backend", ("local", "k8s")),
           (["k8s", "run"], "--protocol", ("grpc", "remoting")),
           (["matrix", "--variant", "a"], "--protocol", ("grpc", "remoting"))]
STRUCTURE = [[], ["brokers"], ["k8s"], ["matrix"], ["compare"], ["compare", "x"],
             ["compare", "--baseline", "a", "--candidate", "b"], ["run", "--scenario"], ["run", "--variant"],
             ["--variants"], ["calibrate", "--archives"], ["brokers", "up", "--variant"],
             ["k8s", "collect", "--runs-dir"], ["matrix", "--variant"], ["run", "--fault"], ["brokers", "bogus"]]
# Commands that read the variants file and then select --variant NAME (calibrate: one name, matrix: required).
SELECTING = [["run"], ["calibrate"], ["matrix"], ["brokers", "fetch"], ["brokers", "up", "--workdir", "{T}/w"]]


def _not_a(kind: type, text: str) -> bool:
    try:
        kind(text)
    except ValueError:
        return True
    return False


@st.composite
def argparse_refusals(draw: st.DrawFn) -> Case:
    family = draw(st.sampled_from(["unknown option", "number", "choice", "run id", "structure", "command"]))
    if family == "unknown option":
        word = draw(st.text(string.ascii_letters + string.digits + "-_=", min_size=1, max_size=10))
        option = "--no-such-" + word
        return Case([*draw(st.sampled_from(COMMANDS)), option], names=("--no-such-", "required"))
    if family == "number":
        path, option, kind = draw(st.sampled_from(NUMERIC))
        value = draw(st.one_of(words, st.sampled_from(["", "1,5", "1.5.1", "0x10", "ten", "1e", "--", "-x", "１"])))
        assume(_not_a(kind, value))
        # (--option=-- has a test of its own below)
        argv = [*path, f"{option}={value}"] if value != "--" and draw(st.booleans()) else [*path, option, value]
        return Case(argv, names=(option,))
    if family == "choice":
        path, option, choices = draw(st.sampled_from(CHOICES))
        value = draw(words)
        assume(value not in choices)
        return Case([*path, option, value], names=(option,))
    if family == "run id":
        value = draw(st.one_of(words, st.sampled_from(["", "-a", ".a", "a/b", "a b", "x" * 64, "é"])))
        assume(not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value))
        return Case([*draw(st.sampled_from([["run"], ["k8s", "run"]])), "--run-id", value], names=("--run-id",))
    if family == "structure":
        return Case(list(draw(st.sampled_from(STRUCTURE))))
    word = draw(words)
    assume(word not in ("brokers", "run", "k8s", "cluster", "calibrate", "matrix", "compare"))
    return Case([word, *draw(st.sampled_from([[], ["--help"], ["run"]]))] if not word.startswith("-") else [word])


@st.composite
def variant_refusals(draw: st.DrawFn) -> Case:
    """Unknown --variant names, and broken variants files (always with an unknown name as well)."""
    path = draw(st.sampled_from(SELECTING))
    names = draw(st.lists(st.one_of(unknown_variants, st.sampled_from(KNOWN_VARIANTS)), min_size=1, max_size=3))
    if path == ["calibrate"]:
        names = names[:1]
    if not any(n.startswith(UNKNOWN) for n in names):
        names.append(UNKNOWN + "x")
        names = names[-1:] if path == ["calibrate"] else names
    argv = [*path, *[x for n in names for x in ("--variant", n)]]
    if draw(st.booleans()):
        return Case(argv, names=("unknown variant",))
    kind = draw(st.sampled_from(["file"] * 4 + ["missing", "directory"]))
    files: dict[str, bytes | None] = {}
    if kind == "file":
        content = draw(yaml_files(VARIANTS))
        assume(b"[/" not in content)
        files = {"v.yaml": content}
    elif kind == "directory":
        files = {"v.yaml": None}
    return Case(["--variants", "{T}/v.yaml", *argv], files=files, names=("v.yaml", "unknown variant"))


BAD_DURATIONS = ["0", "-1", "-0.001", "86400.5", "1e9", "nan", "inf", "-inf", "1e400"]


@st.composite
def fault_specs(draw: st.DrawFn) -> list[str]:
    """--fault values none of which can run against the default scenario (burst: 90 s, proxy: local)."""
    how = draw(st.sampled_from(["text", "action", "target", "topology", "sigstop", "restart", "late", "number",
                                "overlap"]))
    at = draw(st.integers(1, 80))
    if how == "text":
        spec = draw(words)
        assume(not re.match(r"^[a-z0-9]+:[a-z-]+@[0-9.]+(\+[0-9.]+)?$", spec))
        return [spec]
    if how == "action":
        action = draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8))
        assume(action not in ("kill9", "sigstop", "restart"))
        return [f"{action}:broker@{at}+1"]
    if how == "target":
        target = draw(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=10))
        assume(target not in ("namesrv", "broker", "broker-b", "slave", "proxy"))
        return [f"kill9:{target}@{at}"]
    if how == "topology":
        return [f"{draw(st.sampled_from(['kill9', 'restart']))}:{draw(st.sampled_from(['proxy', 'broker-b', 'slave']))}"
                f"@{at}"]
    if how == "sigstop":
        return [f"sigstop:broker@{at}"]
    if how == "restart":
        return [f"restart:namesrv@{at}+{draw(st.integers(0, 5))}"]
    if how == "late":
        return [f"kill9:broker@{draw(st.sampled_from(['90', '95.5', '86401', '1e3', '99999999']))}"]
    if how == "number":
        at_s, hold = draw(st.sampled_from(["1.2.3", ".", "..5", "5."])), draw(st.sampled_from(["1.1.1", "."]))
        return [f"kill9:broker@{at_s}+{hold}"]
    return [f"sigstop:broker@{at}+10", f"kill9:broker@{at + 5}"]


@st.composite
def run_refusals(draw: st.DrawFn) -> Case:
    """run / k8s run: a bad scenario, --duration or --fault (run also gets an unknown variant, so a mutated
    scenario that happens to be valid is still refused; k8s run checks no variant before submitting, so it gets
    only scenarios that cannot load)."""
    path = draw(st.sampled_from([["run"], ["k8s", "run"]]))
    family = draw(st.sampled_from(["scenario"] * 3 + ["duration", "fault"]))
    extra = ["--variant", UNKNOWN + "v"] if path == ["run"] else []
    if family == "duration":
        return Case([*path, "--duration", draw(st.sampled_from(BAD_DURATIONS)), *extra],
                    names=("--duration", "duration_s"))
    if family == "fault":
        specs = draw(fault_specs())
        return Case([*path, *[x for s in specs for x in ("--fault", s)], *extra], names=("--fault", "fault"))
    kind = draw(st.sampled_from(["file", "missing", "name", "point"] if path == ["run"] else ["missing", "name",
                                                                                              "point"]))
    if kind == "file":
        content = draw(yaml_files(SCENARIOS))
        assume(b"[/" not in content)
        return Case([*path, "--scenario", "{T}/s.yaml", *extra], files={"s.yaml": content},
                    names=("s.yaml", "unknown variant"))
    if kind == "missing":
        return Case([*path, "--scenario", "{T}/none.yaml", *extra], names=("none.yaml",))
    if kind == "name":
        name = "fuzz-none-" + draw(st.text(string.ascii_letters + string.digits + "-_", max_size=8))
        return Case([*path, "--scenario", name, *extra], names=(name,))
    series = draw(st.sampled_from(SERIES))
    point = draw(st.sampled_from(["", "@0", "@-1", "@2", "@x", "@1000", "@1@1"]))
    name = draw(st.sampled_from(["burst@1", "steady@4", f"{series}{point}"]))
    return Case([*path, "--scenario", name, *extra], names=(name.split("@")[0],))


@st.composite
def other_refusals(draw: st.DrawFn) -> Case:
    """calibrate, matrix and compare: what each refuses before its runs or Spark."""
    family = draw(st.sampled_from(["calibrate", "matrix", "compare", "releases", "env"]))
    if family == "calibrate":
        how = draw(st.sampled_from(["runs", "shift", "out", "archives"]))
        if how == "runs":
            return Case(["calibrate", "--runs", str(draw(st.integers(-10**6, 0)))], names=("--runs",))
        if how == "shift":
            ms = draw(st.one_of(st.integers(-10**6, 0), st.integers(2001, 10**9)))
            return Case(["calibrate", "--runs", "1", "--shift-ms", "50", "--shift-ms", str(ms)], names=("--shift-ms",))
        if how == "out":
            return Case(["calibrate", "--runs", "1", "--out", "{T}/result.json"], files={"result.json": b"{}"},
                        names=("result.json",))
        return Case(["calibrate", "--archives", "{T}/a", "{T}/b"],
                    files={"b/manifest.json": draw(st.sampled_from([b"", b"{", b"[]", b"\xff"]))},
                    names=("{T}/a", "{T}/b"))
    if family == "matrix":
        two = ["--variant", "unpatched", "--variant", "patched"]
        how = draw(st.sampled_from(["one variant", "out", "all and more", "archives", "protocol"]))
        if how == "one variant":
            return Case(["matrix", "--variant", draw(st.sampled_from(KNOWN_VARIANTS)), "--scenario", "burst"],
                        names=("two variants",))
        if how == "out":
            return Case(["matrix", *two, "--out", "{T}/report"], files={"report": None}, names=("report",))
        if how == "all and more":
            return Case(["matrix", *two, "--scenario", "all", "--scenario", "burst"], names=("--scenario all",))
        if how == "archives":
            return Case(["matrix", *two, "--archives", "{T}/none"], names=("none",))
        return Case(["matrix", *two, "--protocol", "remoting", "--scenario", "fifo"], names=("--protocol",))
    if family == "compare":
        # (A value starting with '-' is argparse's to refuse as an option, naming the option, not the archive.)
        value = words.filter(lambda w: not w.startswith("-"))
        base = ["compare", "{T}/a", "--baseline", draw(value), "--candidate", draw(value)]
        how = draw(st.sampled_from(["missing", "empty dir", "junk", "out"]))
        if how == "out":
            return Case([*base, "--out", "{T}/out"], files={"out": b""}, names=("out",))
        files = {"missing": {}, "empty dir": {"a": None},
                 "junk": {"a/manifest.json": draw(st.binary(max_size=64)), "a/events/x.parquet": b"PAR1"}}[how]
        return Case(base, files=files, names=("{T}/a",))
    if family == "releases":
        return draw(release_refusals())
    var, value, argv = draw(st.sampled_from([
        ("RMQ_HARNESS_PROBE", "bool", ["run"]), ("RMQ_HARNESS_COMPARE", "bool", ["run"]),
        ("RMQ_HARNESS_FAIL_ON_REGRESSION", "bool", ["compare", "x", "--baseline", "a", "--candidate", "b"]),
        ("RMQ_HARNESS_SKIP_BAD", "bool", ["compare", "x", "--baseline", "a", "--candidate", "b"]),
        ("RMQ_HARNESS_DURATION", "float", ["run"]), ("RMQ_HARNESS_RUNS", "int", ["calibrate"]),
        ("RMQ_HARNESS_RUNS", "int <= 0", ["calibrate"]), ("RMQ_HARNESS_SCENARIO", "missing file", ["run"]),
        ("RMQ_HARNESS_VARIANTS_FILE", "missing file", ["run"]), ("RMQ_HARNESS_VARIANT", "unknown", ["run"]),
    ]))
    if value == "bool":
        text = draw(words)
        assume(text.lower() not in ("1", "true", "yes", "0", "false", "no", ""))
    elif value in ("float", "int"):
        text = draw(words)
        assume(_not_a(float if value == "float" else int, text))
    elif value == "int <= 0":
        text = str(draw(st.integers(-1000, 0)))
    elif value == "missing file":
        text = "{T}/none.yaml"
    else:
        text = ",".join(draw(st.lists(unknown_variants.map(lambda s: s.replace(",", "")), min_size=1, max_size=3)))
    option = "--" + var.removeprefix("RMQ_HARNESS_").removesuffix("_FILE").lower().replace("_", "-")
    return Case(argv, env={var: text}, names=(var, option, "none.yaml", "unknown variant"))


@st.composite
def release_refusals(draw: st.DrawFn) -> Case:
    """sweep, bisect and history: what each refuses before Maven, brokers or Spark."""
    version = st.sampled_from(["5.x", "5", "5.1", "v5.1.0", "5.1.0.0", "", "five", "5.1.0-rc1", "0.0.0"])
    old = st.sampled_from(["4.9.7", "5.0.0", "3.2.6"])
    how = draw(st.sampled_from(["range", "batch", "sweep out", "bisect end", "history source", "history window",
                                "history p", "history out"]))
    if how == "range":
        spec = draw(st.one_of(
            version,  # no '..'
            st.tuples(version.filter(bool), st.sampled_from(["", "5.5.0"])).map("..".join),
            st.tuples(st.sampled_from(["5.4.0", "5.5.1"]), st.sampled_from(["5.1.0", "5.3.3"])).map("..".join),
            st.tuples(old, st.sampled_from(["", "5.3.3"])).map("..".join)))
        return Case(["sweep", "--versions", spec], names=("--versions",))
    if how == "batch":
        return Case(["sweep", "--versions", "5.1.0..", "--batch", str(draw(st.integers(-100, 0)))], names=("--batch",))
    if how == "sweep out":
        return Case(["sweep", "--versions", "5.1.0..", "--out", "{T}/r"], files={"r": None}, names=("r",))
    if how == "bisect end":
        end = draw(st.one_of(version.filter(lambda v: v != "0.0.0"), old, st.just("jars:{T}/none"),
                             st.just("jars:{T}/empty")))
        side = draw(st.sampled_from(["--good", "--bad"]))
        other = "--bad" if side == "--good" else "--good"
        return Case(["bisect", side, end, other, "5.4.0"], files={"empty": None},
                    names=(end.replace("jars:", ""), "release version", "older than"))
    if how == "history source":
        return Case(["history", "{T}/none"], names=("none",))
    if how == "history window":
        return Case(["history", "{T}", "--window", str(draw(st.integers(-5, 3)))], names=("--window",))
    if how == "history p":
        p = draw(st.one_of(st.floats(max_value=0, allow_nan=False, allow_infinity=False),
                           st.floats(min_value=1, allow_nan=False, allow_infinity=False)))
        return Case(["history", "{T}", "--max-pvalue", repr(p)], names=("--max-pvalue",))
    return Case(["history", "{T}", "--out", "{T}/r"], files={"r": None}, names=("r",))


@cases("cli_refused")
@given(st.one_of(argparse_refusals(), variant_refusals(), run_refusals(), other_refusals()))
def test_command_lines_that_cannot_run_are_refused_in_one_line_before_any_work(capsys, tripwires, case):
    seen["cli_refused"] += 1
    assert_refused(capsys, case)


@cases("cli_pure")
@given(st.one_of(
    # The command's words (a subcommand and its action, never an option waiting for its value).
    st.tuples(st.sampled_from([[w for w in (c[:2] if c and c[0] not in ("matrix", "compare") else c[:1])
                                if not w.startswith("-")] for c in COMMANDS]),
              st.sampled_from(["--help", "-h"]), st.lists(words, max_size=3)),
    st.tuples(st.just([]), st.just("--version"), st.lists(words, max_size=3))))
def test_help_and_version_are_pure_exit_0_on_stdout(capsys, tripwires, parts):
    seen["cli_pure"] += 1
    path, flag, tail = parts
    with scratch() as d:
        prepare(Case([]), d)
        code, out, err, argv = call_main(capsys, Case([*path, flag, *tail]), d)
        assert sorted(p.name for p in d.iterdir()) == ["cwd"] and not any((d / "cwd").iterdir())
    assert code == 0 and err == "", f"{argv}: exit {code}: {err}"
    version = r"rmq-harness \S+ \(commit [^)]+\)\n$"
    assert out.startswith("usage: rmq-harness") if flag != "--version" else re.match(version, out)


DASHES = [["run", "--duration=--"], ["k8s", "run", "--duration=--"], ["calibrate", "--runs=--"],
          ["calibrate", "--shift-ms=--"], ["brokers", "up", "--workdir", "{T}/w", "--timeout=--"],
          ["run", "--scenario=--", "--variant", UNKNOWN + "x"], ["run", "--protocol=--"],
          ["k8s", "status", "--wait=--"]]


@pytest.mark.parametrize("argv", DASHES, ids=[" ".join(a) for a in DASHES])
def test_an_option_given_dash_dash_as_its_value_is_refused_in_one_line(capsys, tripwires, argv):
    assert_refused(capsys, Case(argv))


MARKUP = ["[/]", "[bold]", "[/bold]", "[x]", "[link=x]", ":cat:", "[red]x[/red]", "[@click]"]


@st.composite
def markup_cases(draw: st.DrawFn) -> tuple[Case, str]:
    """(a command line, text its error must show as written)."""
    how = draw(st.sampled_from(["variant", "scenario file", "variant file name", "pattern"]))
    # ('@' in a scenario path reads as NAME@POINT: a test of its own above)
    markup = [m for m in MARKUP if how != "scenario file" or "@" not in m]
    fragment = draw(st.text(string.ascii_lowercase, max_size=4)) + draw(st.sampled_from(markup))
    if how == "variant":
        return Case(["run", "--variant", fragment]), fragment
    if how == "scenario file":
        return Case(["run", "--scenario", f"{{T}}/{fragment}.yaml"]), f"{fragment}.yaml"
    if how == "variant file name":
        return Case(["--variants", f"{{T}}/{fragment}.yaml", "run"]), f"{fragment}.yaml"
    # The product's own message: a variant name that is not a DNS label quotes its pattern, '[a-z0-9]...'.
    name = draw(st.text(string.ascii_uppercase + "_", min_size=1, max_size=8))
    return Case(["--variants", "{T}/v.yaml", "run", "--variant", name.lower() or "x"],
                files={"v.yaml": f"variants:\n  {name}:\n    version: '5.3.3'\n".encode()}), "[a-z0-9]"


@cases("cli_markup")
@given(markup_cases())
def test_errors_show_what_the_user_wrote_even_when_it_looks_like_markup(capsys, tripwires, case_and_text):
    case, text = case_and_text
    line = assert_refused(capsys, case)
    assert text in line, f"{text!r} not shown as written in {line!r}"
    seen["cli_markup"] += 1


@st.composite
def env_cases(draw: st.DrawFn) -> Case:
    """RMQ_HARNESS_* values an option with choices, a typed repeatable option or an nargs=+ option refuses."""
    how = draw(st.sampled_from(["backend", "protocol", "shift", "archives"]))
    if how in ("backend", "protocol"):
        value = draw(st.one_of(words.map(lambda w: w.replace(",", "")), st.just("")))
        assume(value not in ("local", "k8s", "grpc", "remoting"))
        var = f"RMQ_HARNESS_{how.upper()}"
        return Case(["run"], env={var: value}, names=(var,))
    if how == "shift":
        value = draw(st.one_of(st.integers(-5, 5000).map(str), words))
        # --out exists: whatever the shifts, calibrate stops before its runs.
        return Case(["calibrate", "--runs", "1", "--out", "{T}/result.json"], env={"RMQ_HARNESS_SHIFT_MS": value},
                    files={"result.json": b"{}"}, names=("RMQ_HARNESS_SHIFT_MS", "--shift-ms", "result.json"))
    n = draw(st.integers(1, 3))
    return Case(draw(st.sampled_from([["matrix", "--variant", "unpatched", "--variant", "patched"],
                                      ["calibrate", "--runs", "1"]])),
                env={"RMQ_HARNESS_ARCHIVES": ",".join(f"{{T}}/none{i}" for i in range(n))}, names=("none0",))


@cases("cli_env_values")
@given(env_cases())
def test_environment_values_are_checked_like_the_options_they_set(capsys, tripwires, case):
    assert_refused(capsys, case)
    seen["cli_env_values"] += 1


@st.composite
def rule_cases(draw: st.DrawFn) -> tuple[list[str], bool]:
    """(options of the verdict rule that cannot be, whether for compare rather than calibrate)."""
    option = draw(st.sampled_from(["--alpha", "--min-effect", "--bootstrap"]))
    if option == "--bootstrap":
        value = str(draw(st.integers(-10**6, 0)))
    else:
        value = draw(st.sampled_from(["0", "1", "-0.5", "1.5", "nan", "inf", "-inf", "5"] +
                                     (["0"] if option == "--alpha" else [])))
        if option == "--min-effect":
            assume(value != "0")
    return [option, value], draw(st.booleans())


@cases("cli_rule_options")
@given(rule_cases())
def test_verdict_rule_options_out_of_range_are_refused_before_any_work(capsys, tripwires, tmp_path, case):
    from tests import synth

    options, compare = case
    runs = tmp_path / "runs"
    archive = runs / "fuzz-rule"
    if not archive.exists():
        synth.archive(runs, "fuzz-rule", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
    argv = (["compare", str(archive), "--baseline", "unpatched", "--candidate", "patched"] if compare
            else ["calibrate", "--runs", "1"])
    assert_refused(capsys, Case([*argv, *options], names=(options[0],)))
    seen["cli_rule_options"] += 1


def test_the_suite_ran_every_case_it_counts(request):
    """Runs last in this module: the cases above add up to FUZZ_CASES, and each test ran every case it counts."""
    assert FUZZ_CASES == 3_125
    cases.check(request)
