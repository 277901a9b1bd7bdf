from pathlib import Path

import pytest

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
    assert "known variants: patched, patched-retry-read, patched-slow, unpatched, unpatched-kv, upstream-5.4.0" in err


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


def test_a_comparison_after_a_run_needs_two_variants_before_anything_starts(tmp_path: Path, capsys, monkeypatch):
    import harness.run.sequence as sequence

    monkeypatch.setattr(sequence.Run, "execute", lambda self: pytest.fail("the run started"))
    for extra in (["--compare"], ["--fail-on-regression"]):
        for names in (["patched"], ["unpatched", "patched", "upstream-5.4.0"]):
            argv = ["run", "--scenario", "burst", "--runs-dir", str(tmp_path), *extra]
            assert main([*argv, *[x for n in names for x in ("--variant", n)]]) == 2
            err = capsys.readouterr().err
            assert f"--compare needs two variants, the baseline then the candidate (got {len(names)})" in err
            assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_variants_come_up_in_a_recorded_random_order_or_as_given():
    from harness.inputs.variants import load_variants, select
    from harness.run.plan import variant_order

    variants = select(load_variants(None), ["unpatched", "patched", "upstream-5.4.0"])
    names = [v.name for v in variants]
    assert variant_order(variants, "given") == {"names": names, "how": "given", "seed": None}
    shuffled = variant_order(variants, "random", seed=7)
    assert shuffled == variant_order(variants, "random", seed=7)  # the seed gives it again
    assert sorted(shuffled["names"]) == sorted(names) and shuffled["how"] == "random"
    firsts = {variant_order(variants, "random", seed=s)["names"][0] for s in range(40)}
    assert firsts == set(names)  # none always first
    recorded = variant_order(variants, "random")
    assert isinstance(recorded["seed"], int)


def test_bisecting_a_build_against_itself_is_refused_before_any_lookup(tmp_path: Path, capsys, monkeypatch):
    from harness.campaigns import releases

    monkeypatch.setattr(releases, "catalogue", lambda *a, **k: pytest.fail("Maven Central was asked"))
    for good, bad in (("5.3.3", "5.3.3"), (f"jars:{tmp_path}", f"jars:{tmp_path}/.")):
        (tmp_path / "rocketmq-broker-5.3.3.jar").touch()
        assert main(["bisect", "--good", good, "--bad", bad, "--out", str(tmp_path / "b.json")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "are the same build" in err and "--good 5.1.0 --bad 5.3.3" in err
    assert not (tmp_path / "b.json").exists()


def test_stopping_a_variant_the_file_does_not_name_is_refused_listing_the_known(tmp_path: Path, capsys):
    assert main(["brokers", "down", "--variant", "nosuch", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown variant 'nosuch'; known variants: patched, " in err
    assert main(["brokers", "down", "--variant", "patched", "--workdir", str(tmp_path)]) == 0  # known, not up
    assert "nothing was running" in capsys.readouterr().out


def test_brokers_keep_their_state_where_workdir_says_it_does_by_default(tmp_path: Path, monkeypatch):
    from harness.cli.brokers import _backend
    from harness.cli.main import parse, parser, subcommand

    monkeypatch.setenv("COLUMNS", "300")  # the help unwrapped: argparse breaks lines at hyphens
    said = " ".join(subcommand(parser(), "brokers status").format_help().split())
    monkeypatch.setenv("RMQ_HARNESS_STATE", str(tmp_path / "state"))
    assert _backend(parse(["brokers", "status"])).workdir == (tmp_path / "state" / "brokers").resolve()
    assert "$RMQ_HARNESS_STATE/brokers" in said
    monkeypatch.delenv("RMQ_HARNESS_STATE")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert _backend(parse(["brokers", "status"])).workdir == (tmp_path / "xdg" / "rmq-harness" / "brokers").resolve()
    assert "$XDG_STATE_HOME/rmq-harness/brokers" in said
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _backend(parse(["brokers", "status"])).workdir == (tmp_path / "home" / ".local/state/rmq-harness/brokers")
    assert "~/.local/state/rmq-harness/brokers" in said
