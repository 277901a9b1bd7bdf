from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.core.paths import DEFAULT_VARIANTS_FILE, REPO_ROOT
from harness.inputs.variants import load_variants, parse_variants, select


def test_shipped_variants_file_loads():
    variants = load_variants(DEFAULT_VARIANTS_FILE)
    assert variants["unpatched"].version == "5.3.3"
    assert variants["upstream-5.4.0"].version == "5.4.0"
    assert variants["unpatched"].agents == [] and variants["upstream-5.4.0"].agents == []
    assert variants["patched"].version == "5.3.3"
    assert [a.jar for a in variants["patched"].agents] == ["broker-patches/target/pop-retry-wakeup.jar"]


def test_overrides_and_agents_parse():
    v = parse_variants(
        {"variants": {"mine": {"version": "5.3.3", "broker": {"enableRetryTopicV2": True},
                               "agents": [{"jar": "broker-patches/x.jar", "options": "port=1"}]}}}
    )["mine"]
    assert v.broker == {"enableRetryTopicV2": True}
    assert v.agents[0].path().is_absolute()
    assert v.agents[0].options == "port=1"


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"version": "5.3.3", "colour": "red"}, "variants.x.colour"),
        ({"version": "latest"}, "variants.x.version"),
        ({}, "variants.x: version: required"),
        ({"version": "5.3.3", "broker": {"listenPort": 1}}, "listenPort set by the harness"),
        ({"version": "5.3.3", "proxy": {"grpcServerPort": 1}}, "grpcServerPort set by the harness"),
        ({"version": "5.3.3", "broker": {"a": [1]}}, "variants.x.broker.a"),
        ({"version": "5.3.3", "agents": [{"path": "a.jar"}]}, "variants.x.agents.0"),
    ],
)
def test_bad_variant_names_the_field(body, needle):
    with pytest.raises(ConfigError) as e:
        parse_variants({"variants": {"x": body}}, "v.yaml")
    msg = str(e.value)
    assert msg.startswith("v.yaml: ")
    assert needle in msg
    assert "\n" not in msg
    assert e.value.exit_code == 2


def test_bad_variant_name():
    with pytest.raises(ConfigError, match="variants.Bad_Name.name"):
        parse_variants({"variants": {"Bad_Name": {"version": "5.3.3"}}})


def test_top_level_unknown_key():
    with pytest.raises(ConfigError, match="scenarios"):
        parse_variants({"variants": {}, "scenarios": {}})


def test_missing_and_malformed_files(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such variants file"):
        load_variants(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("variants: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_variants(bad)


def test_select_keeps_order_and_lists_known_on_error():
    variants = parse_variants({"variants": {"a": {"version": "5.3.3"}, "b": {"version": "5.4.0"}}})
    assert [v.name for v in select(variants, ["b", "a", "b"])] == ["b", "a"]
    with pytest.raises(ConfigError, match="unknown variant 'c'; known variants: a, b"):
        select(variants, ["c"])


def test_a_variants_file_adds_to_the_built_in_ones_and_a_name_in_both_is_the_files(tmp_path: Path):
    own = tmp_path / "mine" / "variants.yaml"
    own.parent.mkdir()
    own.write_text("variants:\n  theirs: {endpoints: {namesrv: 'h:9876'}}\n"
                   "  patched: {version: '5.4.0', description: my patched}\n")
    said = []
    variants = load_variants(own, say=said.append)
    # theirs beside the built-in unpatched, as a file defining only theirs is used: compared against the built-ins
    assert [v.name for v in select(variants, ["theirs", "unpatched"])] == ["theirs", "unpatched"]
    assert variants["patched"].version == "5.4.0" and variants["patched"].source == str(own)
    assert variants["upstream-5.4.0"].version == "5.4.0"  # the rest as built in
    assert said == [f"variants file {own}: patched replaces the built-in variant of the same name"]
    assert load_variants(own, say=said.append) and len(said) == 2  # said once per load, not per variant use
    said.clear()
    load_variants(DEFAULT_VARIANTS_FILE, say=said.append)
    assert said == []  # the built-in file named: nothing replaced


def test_relative_paths_in_a_variants_file_resolve_against_its_folder(tmp_path: Path, monkeypatch):
    own = tmp_path / "conf" / "variants.yaml"
    (tmp_path / "conf" / "agents").mkdir(parents=True)
    (tmp_path / "conf" / "agents" / "fix.jar").write_bytes(b"")
    (tmp_path / "build" / "lib").mkdir(parents=True)
    own.write_text("variants:\n  mine:\n    version: '5.3.3'\n    jars: ../build/lib\n"
                   "    agents: [{jar: agents/fix.jar}, {jar: /abs/probe.jar},\n"
                   "             {jar: broker-patches/target/pop-retry-wakeup.jar}]\n")
    monkeypatch.chdir(tmp_path)  # not the repository, and not the file's folder
    v = load_variants(Path("conf/variants.yaml"))["mine"]
    assert v.jars == tmp_path / "conf" / ".." / "build" / "lib"
    # beside the file; absolute; not beside the file: from the repository root, as before files were layered (a
    # chart's variants file names the image's agents so)
    assert [a.path() for a in v.agents] == [tmp_path / "conf" / "agents" / "fix.jar", Path("/abs/probe.jar"),
                                            REPO_ROOT / "broker-patches" / "target" / "pop-retry-wakeup.jar"]
    assert load_variants()["patched"].agents[0].jar == "broker-patches/target/pop-retry-wakeup.jar"
