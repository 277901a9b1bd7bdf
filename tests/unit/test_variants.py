from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.core.paths import DEFAULT_VARIANTS_FILE
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
