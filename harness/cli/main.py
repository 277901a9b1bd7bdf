"""The `rmq-harness` command: the one composition root. Each command group's module adds its parsers and names
the function that runs it (``set_defaults(func=...)``); this module builds the parser, gives each command its
examples, applies RMQ_HARNESS_* to the options of the command being run, and says errors and interrupts as
one line and an exit code (harness.core.exits). ``main(argv)`` is callable from tests; the console script calls
``entry``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness import __version__
from harness.cli import brokers, calibrate, canary, compare, listing, matrix, ramp, releases, runs
from harness.cli.options import VARIANTS_FILE_ENV, Parser, chosen, describe_env, env_defaults, set_env
from harness.core.exits import exit_code_of
from harness.report.console import err_console, line, say_end

# In the order `rmq-harness --help` lists them.
COMMANDS = (listing, brokers, runs, calibrate, matrix, ramp, releases, compare, canary)

# The end of each command's --help: what a newcomer types first. A command of a group is named by its path
# ("brokers up"). Every line starting with `rmq-harness` is parsed by a unit test, and every command must have
# examples, so an example that stops parsing, or a command without any, fails there, not in a reader's terminal.
EXAMPLES = {
    "": """\
examples:
  rmq-harness list scenarios                     # what can run, one line each
  rmq-harness run --variant unpatched --variant patched --compare
  rmq-harness run --variants my-builds.yaml --variant mine --scenario steady
  rmq-harness COMMAND --help                     # each command's options and examples""",
    "list": """\
examples:
  rmq-harness list scenarios
  rmq-harness list variants --variants my-builds.yaml""",
    "list scenarios": """\
examples:
  rmq-harness list scenarios                     # name, protocol, retry names, gate/upstream, what it does""",
    "list variants": """\
examples:
  rmq-harness list variants                      # workloads/variants.yaml: name, build in a word, description
  rmq-harness list variants --variants my-builds.yaml""",
    "brokers": """\
examples:
  rmq-harness brokers up --variant unpatched --variant patched   # prints each variant's endpoints
  rmq-harness brokers status
  rmq-harness brokers down --variant patched                     # all when no --variant""",
    "brokers up": """\
examples:
  rmq-harness brokers up --variant unpatched --variant patched   # prints each variant's endpoints
  rmq-harness brokers up --variants my-builds.yaml --variant mine --timeout 300""",
    "brokers fetch": """\
examples:
  rmq-harness brokers fetch --variant unpatched --variant upstream-5.4.0   # the jars cached for later, offline""",
    "brokers status": """\
examples:
  rmq-harness brokers status                     # exit 1 when a variant that is up is not healthy
  rmq-harness brokers status --workdir /tmp/my-brokers""",
    "brokers down": """\
examples:
  rmq-harness brokers down                       # every variant that is up
  rmq-harness brokers down --variant patched""",
    "run": """\
examples:
  rmq-harness run --variant unpatched --variant patched --compare        # what `make run` does
  rmq-harness run --variant unpatched --variant patched --fail-on-regression   # exit 3 on a regression
  rmq-harness run --variant patched --scenario steady --duration 120
  rmq-harness run --variant unpatched --variant patched --compare --format tsv   # rows for programs, on stdout
  rmq-harness run --variants my-builds.yaml --variant mine --fault kill9:broker@30+10""",
    "k8s": """\
examples:
  rmq-harness k8s status --wait 900
  rmq-harness k8s run --variant unpatched --variant patched --compare
  rmq-harness k8s compare RUN_ID --baseline unpatched --candidate patched""",
    "k8s run": """\
examples:
  rmq-harness k8s run --variant unpatched --variant patched --compare   # what `make loadtest` does, compared
  rmq-harness k8s run --release rmq --namespace rmq-harness --variant patched --scenario steady
  rmq-harness k8s run --variant unpatched --variant patched --compare --format tsv   # rows for programs""",
    "k8s collect": """\
examples:
  rmq-harness k8s collect                        # every archive on the runs volume not yet in runs/
  rmq-harness k8s collect RUN_ID --runs-dir runs""",
    "k8s compare": """\
examples:
  rmq-harness k8s compare RUN_ID --baseline unpatched --candidate patched
  rmq-harness k8s compare RUN_ID --baseline unpatched --candidate patched --format json   # for programs""",
    "k8s status": """\
examples:
  rmq-harness k8s status                         # each workload ready, or an error naming those not ready
  rmq-harness k8s status --wait 900              # what `make deploy` waits with""",
    "upload": """\
examples:
  rmq-harness upload runs/RUN_ID --runs-dir s3://bucket/prefix""",
    "calibrate": """\
examples:
  rmq-harness calibrate --variant patched --runs 60 --shift-runs 10     # about 2.7 hours
  rmq-harness calibrate --archives runs/calibration-TIME/*              # judge earlier runs again""",
    "matrix": """\
examples:
  rmq-harness matrix --variant unpatched --variant patched --scenario all
  rmq-harness matrix --variant patched --variant mine --scenario gate --fail-on-regression""",
    "canary": """\
examples:
  rmq-harness canary --variant patched                         # until Ctrl-C; metrics on 127.0.0.1:9300
  rmq-harness canary --variants ours.yaml --variant staging --scenario steady --metrics-port 9301""",
    "ramp": """\
examples:
  rmq-harness ramp --variant patched --rates 50,100,200,400 --rule 'redelivery_ms.p99 < 3000'""",
    "sweep": """\
examples:
  rmq-harness sweep --versions 5.1.0..5.5.1 --scenario burst""",
    "bisect": """\
examples:
  rmq-harness bisect --good 5.1.0 --bad 5.3.3 --scenario burst
  rmq-harness bisect --good 5.3.3 --bad jars:/path/to/rocketmq/lib""",
    "history": """\
examples:
  rmq-harness history runs/                      # exit 3: the newest run starts a regression""",
    "compare": """\
examples:
  rmq-harness compare runs/RUN_ID --baseline unpatched --candidate patched
  rmq-harness compare runs/A runs/B --baseline unpatched --candidate patched --fail-on-regression
  rmq-harness compare runs/RUN_ID --baseline unpatched --candidate patched --format json   # for programs""",
}


class _Version(argparse.Action):
    """--version: the package's version and the commit it was run from (git is asked only when shown)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and the git commit, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from harness.core.paths import git_sha

        sha = git_sha()
        print(f"{parser.prog} {__version__} (commit {sha[:12] if sha else 'unknown: not a git checkout'})")
        parser.exit()


def subcommand(top: argparse.ArgumentParser, path: str) -> argparse.ArgumentParser:
    """The parser of a command by its path: "run", "brokers up"."""
    p = top
    for word in path.split():
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return p


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="rmq-harness", description="Load-test and regression harness for RocketMQ POP",
               epilog=EXAMPLES[""])
    p.add_argument("--version", action=_Version)
    set_env(p.add_argument("--variants", type=Path, default=None, metavar="FILE",
                           help="a variants file of your own builds, added to the built-in ones (workloads/"
                                "variants.yaml); also accepted after the command"), VARIANTS_FILE_ENV)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parsers(sub)
    for name, text in EXAMPLES.items():
        if name:
            subcommand(p, name).epilog = text
    describe_env(p)
    return p


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, then the environment for the options of the command it names (the command line
    wins). Parsed first without the environment: --help, and a command whose options are set right, never
    read another command's RMQ_HARNESS_* (raises ConfigError for a bad value of the command's own)."""
    p = parser()
    first = p.parse_args(argv)
    env_defaults(chosen(p, first), warn=lambda text: err_console.print(line("note:", "yellow", text),
                                                                        soft_wrap=True))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    def command() -> int:
        args = parse(argv)
        return args.func(args)

    return exit_code_of(command, say_end, "interrupted; started processes were stopped")


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
