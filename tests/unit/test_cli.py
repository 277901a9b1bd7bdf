from pathlib import Path

from harness.cli import main


def test_bad_variants_file_is_one_line_and_exit_2(tmp_path: Path, capsys):
    bad = tmp_path / "v.yaml"
    bad.write_text("variants:\n  x:\n    version: nope\n")
    assert main(["--variants", str(bad), "brokers", "up", "--variant", "x", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "variants.x.version" in err and "\n" not in err


def test_unknown_variant_lists_known(tmp_path: Path, capsys):
    assert main(["brokers", "up", "--variant", "nope", "--workdir", str(tmp_path)]) == 2
    assert "known variants: patched, unpatched, upstream-5.4.0" in capsys.readouterr().err


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
