from pathlib import Path

from harness.cli.main import main


def test_bad_variants_file_is_one_line_and_exit_2(tmp_path: Path, capsys):
    bad = tmp_path / "v.yaml"
    bad.write_text("variants:\n  x:\n    version: nope\n")
    assert main(["--variants", str(bad), "brokers", "up", "--variant", "x", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "variants.x.version" in err and "\n" not in err


def test_unknown_variant_lists_known(tmp_path: Path, capsys):
    assert main(["brokers", "up", "--variant", "nope", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "known variants: patched, patched-retry-read, unpatched, unpatched-kv, upstream-5.4.0" in err


def test_status_and_down_with_nothing_up(tmp_path: Path, capsys):
    assert main(["brokers", "status", "--workdir", str(tmp_path)]) == 0
    assert main(["brokers", "down", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no variants are up" in out and "nothing was running" in out


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["brokers", "up", "--workdir", str(tmp_path)]) == 1
    assert "java not found" in capsys.readouterr().err


def test_a_variant_setting_against_the_scenario_is_refused_naming_both_files(tmp_path: Path, capsys):
    variants = tmp_path / "mine.yaml"
    variants.write_text("variants:\n  v2:\n    version: '5.3.3'\n    broker: {enableRetryTopicV2: true}\n")
    assert main(["--variants", str(variants), "run", "--variant", "v2", "--scenario", "burst",
                 "--runs-dir", str(tmp_path / "runs")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "enableRetryTopicV2=true (the scenario needs false)" in err
    assert "mine.yaml" in err and "burst.yaml" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_options_also_come_from_the_environment(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("RMQ_HARNESS_VARIANTS", str(tmp_path / "absent.yaml"))
    assert main(["brokers", "up", "--workdir", str(tmp_path)]) == 2
    assert "absent.yaml: no such variants file" in capsys.readouterr().err
    monkeypatch.setenv("RMQ_HARNESS_PROBE", "maybe")
    assert main(["run"]) == 2
    assert "RMQ_HARNESS_PROBE='maybe'" in capsys.readouterr().err


def test_calibrating_an_unknown_variant_is_one_line_and_exit_2(capsys):
    assert main(["calibrate", "--variant", "nope", "--runs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown variant 'nope'" in err and "\n" not in err
