"""Every YAML the harness reads (scenarios, variants) refuses a key given twice and keeps the line and column
of what is wrong: one line naming the file, exit 2, before anything starts."""

from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.errors import ConfigError
from harness.core.yamlfile import read_yaml


def test_a_variant_named_twice_is_refused_naming_file_line_and_key(tmp_path: Path, capsys):
    variants = tmp_path / "mine.yaml"
    variants.write_text("variants:\n  mine: {version: '5.3.3'}\n  other: {version: '5.3.3'}\n"
                        "  mine: {version: '5.4.0'}\n")
    assert main(["list", "variants", "--variants", str(variants)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{variants}, line 4, column 3: not valid YAML: key 'mine' given twice (first on line 2)" in err


def test_a_scenario_key_given_twice_is_refused_before_the_run(tmp_path: Path, capsys, monkeypatch):
    import harness.run.sequence as sequence

    monkeypatch.setattr(sequence.Run, "execute", lambda self: pytest.fail("the run started"))
    burst = (Path(__file__).resolve().parents[2] / "workloads" / "scenarios" / "burst.yaml").read_text()
    scenario = tmp_path / "twice.yaml"
    first = next(i for i, row in enumerate(burst.splitlines(), 1) if row.startswith("duration_s:"))
    scenario.write_text(burst + "duration_s: 5\n")  # it used to replace burst's own duration_s silently
    assert main(["run", "--scenario", str(scenario), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    lines = burst.count("\n")
    assert f"twice.yaml, line {lines + 1}, column 1: not valid YAML: key 'duration_s' given twice (first on " \
           f"line {first}); keep one of them" in " ".join(err.split())
    assert not (tmp_path / "runs").exists()


def test_nested_duplicates_are_caught_and_merge_keys_still_override(tmp_path: Path):
    merged = tmp_path / "merge.yaml"
    merged.write_text("base: &b {a: 1, b: 2}\nmine:\n  <<: *b\n  a: 3\n")
    assert read_yaml(merged, "file", "missing") == {"base": {"a": 1, "b": 2}, "mine": {"a": 3, "b": 2}}
    nested = tmp_path / "nested.yaml"
    nested.write_text("top:\n  inner:\n    x: 1\n    y: 2\n    x: 3\n")
    with pytest.raises(ConfigError, match=r"line 5, column 5: .*key 'x' given twice \(first on line 3\)"):
        read_yaml(nested, "file", "missing")


def test_a_parse_error_keeps_its_line_and_column(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("variants:\n  a: {version: '5.3.3'\n  b: 1\n")
    with pytest.raises(ConfigError) as e:
        read_yaml(bad, "variants file", "missing")
    text = str(e.value)
    assert text.startswith(f"{bad}, line 3, column ") and "not valid YAML: " in text and "\n" not in text
