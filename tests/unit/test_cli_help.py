"""What a newcomer meets first: --help of every command (examples that parse, defaults said, --variants where
it is read), `list`, --version, and the environment read only by the command it is meant for."""

import argparse
import shlex
from pathlib import Path

import pytest

from harness.cli.main import EXAMPLES, main, parse, parser
from harness.cli.options import _own_actions, _parsers, env_name, env_of


def _commands(p: argparse.ArgumentParser | None = None,
              path: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every command by its path, a group's own commands too ("brokers", "brokers up")."""
    out = {}
    for action in (p or parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[" ".join((*path, name))] = sub
                out.update(_commands(sub, (*path, name)))
    return out


def test_every_command_ends_its_help_with_examples_that_parse(capsys):
    commands = _commands()
    assert set(commands) == set(EXAMPLES) - {""}  # a new command, a group's too, gets its examples
    for name, text in EXAMPLES.items():
        help_text = (commands[name] if name else parser()).format_help()
        assert help_text.rstrip().endswith(text.rstrip()), name  # shown as written (RawDescription)
        examples = [shlex.split(row, comments=True) for row in text.splitlines() if row.strip().startswith("rmq-")]
        assert examples, name
        for words in examples:
            if "COMMAND" in words:
                continue
            try:
                parser().parse_args(words[1:])
            except SystemExit as e:
                pytest.fail(f"example {shlex.join(words)!r} does not parse: {capsys.readouterr().err}")
                raise AssertionError from e


def test_every_option_with_a_default_says_it_in_its_help():
    for p in _parsers(parser()):
        for action in _own_actions(p):
            default = action.default
            if (default is None or default is False or default in (argparse.SUPPRESS, [], "")
                    or not action.option_strings):
                continue
            shown = p._get_formatter()._expand_help(action)
            assert "default" in shown, f"{p.prog} {action.option_strings[0]}: its default {default!r} is not shown"


def test_variants_file_is_an_option_of_every_command_that_reads_it_before_or_after_its_name(tmp_path: Path):
    readers = [["run"], ["k8s", "run"], ["brokers", "up"], ["brokers", "fetch"], ["brokers", "down"], ["calibrate"],
               ["matrix", "--variant", "a"], ["ramp", "--variant", "a"], ["list", "variants"]]
    mine, theirs = tmp_path / "mine.yaml", tmp_path / "theirs.yaml"
    for words in readers:
        assert parse([*words, "--variants", str(mine)]).variants == mine
        assert parse(["--variants", str(theirs), *words]).variants == theirs
        assert parse(["--variants", str(theirs), *words, "--variants", str(mine)]).variants == mine  # nearest wins
        p = parser()
        for w in [w for w in words if not w.startswith("-") and w != "a"]:
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[w]
        assert "--variants FILE" in p.format_help() and "RMQ_HARNESS_VARIANTS_FILE" in p.format_help(), words


def test_the_variants_file_has_its_own_environment_name_and_the_old_one_still_works(tmp_path: Path, monkeypatch,
                                                                                    capsys):
    mine, old = tmp_path / "mine.yaml", tmp_path / "old.yaml"
    monkeypatch.setenv("RMQ_HARNESS_VARIANT", "a,b")  # names, one letter away: never a file
    monkeypatch.setenv("RMQ_HARNESS_VARIANTS", str(old))
    args = parse(["run"])
    assert (args.variants, args.variants_wanted) == (old, ["a", "b"])
    assert capsys.readouterr().err.strip() == ("note: RMQ_HARNESS_VARIANTS is deprecated: set "
                                               "RMQ_HARNESS_VARIANTS_FILE instead (same meaning)")
    monkeypatch.setenv("RMQ_HARNESS_VARIANTS_FILE", str(mine))
    assert parse(["run"]).variants == mine and capsys.readouterr().err == ""
    assert parse(["run", "--variants", str(old)]).variants == old  # the command line wins


def test_a_bad_environment_value_stops_only_the_command_that_reads_it(capsys, monkeypatch):
    monkeypatch.setenv("RMQ_HARNESS_DURATION", "abc")
    for argv in (["--help"], ["run", "--help"], ["brokers", "status", "--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as e:
            parse(argv)
        assert e.value.code == 0
    assert main(["list", "scenarios"]) == 0
    capsys.readouterr()
    assert main(["run"]) == 2
    assert capsys.readouterr().err.strip() == ("error: RMQ_HARNESS_DURATION='abc': could not convert string to "
                                               "float: 'abc'; fix or unset it")


def test_out_means_a_folder_and_out_file_a_file(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("RMQ_HARNESS_OUT", str(tmp_path / "reports"))
    assert parse(["matrix", "--variant", "a"]).out == tmp_path / "reports"
    assert parse(["calibrate"]).out is None  # a folder is not the file calibrate writes
    assert parse(["bisect", "--good", "5.1.0", "--bad", "5.3.3"]).out is None
    monkeypatch.setenv("RMQ_HARNESS_OUT_FILE", str(tmp_path / "r.json"))
    assert parse(["calibrate"]).out == parse(["bisect", "--good", "5.1.0", "--bad", "5.3.3"]).out == tmp_path / "r.json"
    assert parse(["matrix", "--variant", "a"]).out == tmp_path / "reports"


def test_every_option_reads_its_own_name_but_the_two_the_docs_name():
    """docs/guide.md and docs/operations.md: RMQ_HARNESS_<OPTION> for every long option, but --variants FILE and the
    one-file --out of calibrate and bisect. A new exception must be said there first."""
    others = set()
    for p in _parsers(parser()):
        for action in _own_actions(p):
            var = env_of(action)
            option = next((o for o in action.option_strings if o.startswith("--")), None)
            if var is not None and var != env_name(option):
                others.add((p.prog, option, var))
    files = {(prog, "--variants", "RMQ_HARNESS_VARIANTS_FILE") for prog, option, _ in others if option == "--variants"}
    assert others == files | {("rmq-harness calibrate", "--out", "RMQ_HARNESS_OUT_FILE"),
                              ("rmq-harness bisect", "--out", "RMQ_HARNESS_OUT_FILE")}
    assert ("rmq-harness", "--variants", "RMQ_HARNESS_VARIANTS_FILE") in files


def test_list_scenarios_and_variants_one_line_each(tmp_path: Path, capsys):
    from harness.inputs.catalogue import builtin_names

    assert main(["list", "scenarios"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows] == builtin_names()
    [burst] = [r for r in rows if r.startswith("burst ")]
    assert "gate" in burst and "32 messages at once" in burst
    variants = tmp_path / "v.yaml"
    variants.write_text("variants:\n  mine:\n    version: '5.3.3'\n    description: my build\n"
                        "    agents: [{jar: broker-patches/target/pop-retry-wakeup.jar}]\n"
                        "  theirs: {endpoints: {namesrv: 'h:9876'}, description: their cluster}\n")
    assert main(["list", "variants", "--variants", str(variants)]) == 0
    rows = [r.split() for r in capsys.readouterr().out.splitlines()]
    # the file's beside the built-in ones
    assert ["mine", "5.3.3+pop-retry-wakeup", "my", "build"] in rows
    assert ["theirs", "endpoints", "h:9876", "their", "cluster"] in rows
    assert {"unpatched", "patched"} <= {r[0] for r in rows}


def test_version_names_the_commit(capsys):
    from harness.core.paths import git_sha

    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    sha = git_sha()
    assert out.startswith("rmq-harness ") and (sha is None or f"(commit {sha[:12]})" in out)
