"""The contract of an input the harness refuses, as the fuzz suites check it: exit 2 and one line naming the file
or option; and, for a command line, refused before any work (an entry point that does real work trips a wire), no
traceback, only usage or warning lines besides the error, and nothing written or changed."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.core.errors import EXIT_USAGE, ConfigError
from tests.unit.fuzzing import scratch, snapshot


def assert_one_line(err: ConfigError, *names: str) -> str:
    """The contract of a refused input: exit 2, one line, naming the file (or option)."""
    msg = str(err)
    assert err.exit_code == EXIT_USAGE, msg
    assert "\n" not in msg and "\r" not in msg, f"more than one line: {msg!r}"
    assert msg.strip(), "an empty message"
    assert "Traceback" not in msg
    assert any(n in msg for n in names), f"{msg!r} names none of {names}"
    return msg


class Tripwire(BaseException):  # noqa: N818 - not an error of the product: the fuzzer went too far
    """Raised by every entry point that does real work; main() does not catch it, so the case fails."""


def trip(*args: object, **kwargs: object) -> None:
    raise Tripwire("a fuzzed command line reached real work (brokers, a run, Spark, a cluster)")


# The entry points that do real work: the fixture `tripwires` (tests/unit/conftest.py) makes each one trip().
TRIPWIRES = [
    "harness.run.sequence.Run.__init__", "harness.run.sequence.Run.execute",
    "harness.deploy.local.launcher.LocalBackend.up", "harness.deploy.local.launcher.LocalBackend.down",
    "harness.deploy.local.launcher.LocalBackend.status",
    "harness.deploy.local.jars.distribution_for", "harness.deploy.local.jars.ensure_version",
    "spark.session.local_session", "harness.campaigns.calibrate.run_all", "harness.campaigns.matrix.run_all",
    "harness.deploy.k8s.remote.Cluster.__init__", "harness.deploy.k8s.remote.wait_ready",
    "harness.campaigns.releases.catalogue", "harness.campaigns.sweep.run_all", "harness.campaigns.bisect.search",
]


# The error line: ours ("error: ...") or argparse's ("rmq-harness run: error: ...", after its usage lines).
ERROR_LINE = re.compile(r"^(?:rmq-harness(?: [a-z0-9-]+)*: )?error: \S")


@dataclass
class Case:
    """A command line that must be refused. ``{T}`` in argv and env stands for the case's directory;
    ``files`` are written there first (bytes; None: a directory); ``names``: the error names one of them."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes | None] = field(default_factory=dict)
    names: tuple[str, ...] = ()


def prepare(case: Case, d: Path) -> None:
    for rel, content in case.files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir(exist_ok=True) if content is None else p.write_bytes(content)
    (d / "cwd").mkdir(exist_ok=True)


def call_main(capsys, case: Case, d: Path) -> tuple[int, str, str, str]:
    """main(argv) in ``d``/cwd with only the case's RMQ_HARNESS_* variables: (exit code, stdout, stderr, the
    argv as run)."""
    from harness.cli.main import main

    argv = [a.replace("{T}", str(d)) for a in case.argv]
    with pytest.MonkeyPatch.context() as mp:
        for k in [k for k in os.environ if k.startswith("RMQ_HARNESS_")]:
            mp.delenv(k)
        mp.setenv("RMQ_HARNESS_STATE", str(d / "state"))
        mp.setenv("RMQ_HARNESS_CACHE", str(d / "cache"))
        for k, v in case.env.items():
            mp.setenv(k, v.replace("{T}", str(d)))
        mp.chdir(d / "cwd")
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's own errors, --help, --version
            code = e.code
    out, err = capsys.readouterr()
    return code, out, err, " ".join(argv)


def messages(err: str) -> list[str]:
    """stderr's messages, each a line with the indented lines that continue it (a warning wraps at the width
    under its first word), joined."""
    out: list[str] = []
    for line in err.splitlines():
        if line.strip() and line[:1].isspace() and out:
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
        elif line.strip():
            out.append(line.rstrip())
    return out


def assert_refused(capsys, case: Case, warnings: tuple[str, ...] | None = None) -> str:
    """Exit 2, one error line naming one of ``case.names``, no traceback, nothing written or changed; with
    ``warnings``, one ``warning:`` line saying each of them and no other."""
    with scratch() as d:
        prepare(case, d)
        before = snapshot(d)
        code, out, err, argv = call_main(capsys, case, d)
        where = f"argv {argv!r}, env {case.env}"
        assert snapshot(d) == before, f"{where}: wrote or changed files"
        names = [n.replace("{T}", str(d)) for n in case.names]
    assert code == EXIT_USAGE, f"{where}: exit {code}\n{err}"
    assert "Traceback" not in out + err, f"{where}: {err}"
    lines = messages(err)
    errors = [line for line in lines if ERROR_LINE.match(line)]
    assert len(errors) == 1, f"{where}: {len(errors)} error lines in {err!r}"
    others = [line for line in lines if line is not errors[0]]
    if others and not all(line.startswith("warning:") for line in others):
        assert others[0].startswith("usage:") and lines[-1] is errors[0], f"{where}: {err!r}"
    assert not names or any(n in errors[0] for n in names), f"{where}: {errors[0]!r} names none of {names}"
    if warnings is not None:
        said = [line for line in lines if line.startswith("warning:")]
        assert len(said) == len(warnings) and all(any(w.replace("{T}", str(d)) in line for line in said)
                                                  for w in warnings), f"{where}: warnings {said}"
    return errors[0]
