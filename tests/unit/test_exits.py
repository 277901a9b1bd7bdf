"""How every command ends (harness.core.exits), through each of its three entry points: `rmq-harness`, the
Spark jobs' base (spark.jobs.entry) and the tools (tools.entry): an error is one line (its detail below) and its
exit code, an interrupt (Ctrl-C, or SIGTERM while the command runs) one line and 130, anything else passes."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pytest

from harness.core.errors import ConfigError, HarnessError
from harness.core.exits import DETAIL, ERROR, EXIT_INTERRUPTED, INTERRUPTED, exit_code_of


def _raise(error: BaseException):
    def command(*args: object) -> int:
        raise error

    return command


def _sigterm(*args: object) -> int:
    signal.raise_signal(signal.SIGTERM)
    raise AssertionError("SIGTERM did not interrupt the command")


def test_a_command_ends_with_its_code_an_error_with_its_line_and_an_interrupt_with_130():
    said: list[tuple[str, str]] = []

    def say(what: str, text: str) -> None:
        said.append((what, text))

    assert exit_code_of(lambda: 3, say) == 3 and said == []
    assert exit_code_of(_raise(HarnessError("broker down", detail="log tail")), say) == 1
    assert said == [(ERROR, "broker down"), (DETAIL, "log tail")]
    said.clear()
    assert exit_code_of(_raise(ConfigError("bad option")), say) == 2 and said == [(ERROR, "bad option")]
    said.clear()
    assert exit_code_of(_raise(KeyboardInterrupt()), say, "stopped") == EXIT_INTERRUPTED == 130
    assert said == [(INTERRUPTED, "stopped")]


def test_sigterm_is_an_interrupt_only_while_the_command_runs():
    before = signal.getsignal(signal.SIGTERM)
    said: list[tuple[str, str]] = []
    assert exit_code_of(_sigterm, lambda what, text: said.append((what, text))) == 130
    assert said == [(INTERRUPTED, "interrupted")]
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("error", [RuntimeError("a bug"), SystemExit(0)])
def test_anything_else_passes_through(error):
    with pytest.raises(type(error)):
        exit_code_of(_raise(error), lambda what, text: None)


def _cli(monkeypatch, func) -> int:
    from harness.cli import main

    monkeypatch.setattr(main, "parse", lambda argv: argparse.Namespace(func=func))
    return main.main([])


def test_the_cli_says_an_error_its_detail_and_an_interrupt(monkeypatch, capsys):
    assert _cli(monkeypatch, _raise(HarnessError("broker down", detail="[tail] of the log"))) == 1
    assert capsys.readouterr().err == "error: broker down\n[tail] of the log\n"
    assert _cli(monkeypatch, _raise(KeyboardInterrupt())) == 130
    assert capsys.readouterr().err == "interrupted; started processes were stopped\n"
    assert _cli(monkeypatch, _sigterm) == 130
    assert capsys.readouterr().err == "interrupted; started processes were stopped\n"


def test_the_tools_say_an_error_its_detail_and_an_interrupt(capsys):
    from tools import entry

    def parser() -> argparse.ArgumentParser:
        return argparse.ArgumentParser(prog="tool")

    assert entry.main(parser, _raise(ConfigError("no such bucket", detail="detail")), []) == 2
    assert capsys.readouterr().err == "error: no such bucket\ndetail\n"
    assert entry.main(parser, _raise(KeyboardInterrupt()), []) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert entry.main(parser, lambda args: 0, []) == 0


def _job(work, exit_code=lambda args, summary: 0):
    from spark.jobs.entry import Job

    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog="job")
        p.add_argument("--out", default=None)
        return p

    return Job("job", parser, work, exit_code)


def test_a_job_refuses_an_existing_out_before_its_work(tmp_path: Path, capsys):
    (tmp_path / "r").mkdir()
    job = _job(_raise(AssertionError("the work ran")))
    assert job.main(["--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "already exists" in err and err.count("\n") == 1


def test_a_job_says_its_verdict_and_report_and_ends_with_its_exit_code(tmp_path: Path, capsys):
    def work(call) -> dict:
        call.warn("one archive skipped")
        assert call.out() == tmp_path / "r" and call.out("other") == tmp_path / "r"
        return {"verdict": "regression", "report": str(tmp_path / "r" / "report.html")}

    job = _job(work, exit_code=lambda args, summary: 3 if summary["verdict"] == "regression" else 0)
    assert job.main(["--out", str(tmp_path / "r")]) == 3
    out, err = capsys.readouterr()
    assert out == f"verdict: regression\nreport: {tmp_path / 'r' / 'report.html'}\n"
    assert err == "warning: one archive skipped\n"


def test_a_job_says_an_error_or_an_interrupt_in_one_line(capsys):
    assert _job(_raise(ConfigError("--window 2: at least 4 points"))).main([]) == 2
    assert capsys.readouterr().err == "error: --window 2: at least 4 points\n"
    assert _job(_raise(KeyboardInterrupt())).main([]) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert _job(_sigterm).main([]) == 130


def test_reasons_and_distinct_variants():
    from spark.jobs.entry import distinct, reasons

    args = argparse.Namespace(failed=["burst=timed out", "steady=a=b"], not_applicable=[])
    assert reasons(args, "--failed", "--not-applicable") == [{"burst": "timed out", "steady": "a=b"}, {}]
    with pytest.raises(ConfigError, match="--failed 'burst': write SCENARIO=REASON"):
        reasons(argparse.Namespace(failed=["burst"]), "--failed")
    assert distinct(["a", "b"]) == ["a", "b"]
    with pytest.raises(ConfigError, match="each release once"):
        distinct(["a", "a"], "release")
