"""What the command line means, shared by every command: the parser class, RMQ_HARNESS_<OPTION> for every
option, the options several commands take, and the scenario those options name (--fault's syntax included)."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from harness.contracts.options import add_run_options
from harness.contracts.verdict import add_gate_option
from harness.core.errors import ConfigError
from harness.core.storage import dir_or_uri
from harness.inputs.brokers import FAULT_ACTIONS, FAULT_TARGETS, Fault
from harness.inputs.scenario import PROTOCOLS, Scenario, invalid_message
from harness.report.console import FORMATS, TABLE

ENV_PREFIX = "RMQ_HARNESS_"
# Environment names that are not RMQ_HARNESS_<OPTION>, each with why. The variants file: RMQ_HARNESS_VARIANTS
# was one letter from RMQ_HARNESS_VARIANT (variant names) and read as names by anyone who knows make's
# VARIANTS=. A file-valued --out (calibrate, bisect write one JSON file): RMQ_HARNESS_OUT is a report folder.
VARIANTS_FILE_ENV = ENV_PREFIX + "VARIANTS_FILE"
OUT_FILE_ENV = ENV_PREFIX + "OUT_FILE"
# A documented old name -> the name it became; still read, with a one-line note, when the new one is unset.
DEPRECATED_ENV = {ENV_PREFIX + "VARIANTS": VARIANTS_FILE_ENV}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Examples (the epilog) as written, and every option's default said where its help does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        # Nothing said for no default (None, an empty list) or a flag's off (False); 0 is a default worth saying.
        shown = default is not None and default is not False and default not in (argparse.SUPPRESS, [], "")
        if shown and "default" not in text and action.option_strings:
            said, env, tail = text.rpartition(" [env ")  # the default before the variable that overrides it
            text = f"{said} (default: %(default)s){env}{tail}" if env else f"{text} (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> object:
        # Python 3.11 drops the value of --option=-- (it takes it for the end of the options) and hands the
        # option an empty list, whatever its type; later Pythons keep '--' as the value, and so does this.
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def env_name(option: str) -> str:
    """The environment variable that sets an option: --runs-dir -> RMQ_HARNESS_RUNS_DIR."""
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").upper()


def env_of(action: argparse.Action) -> str | None:
    """The environment variable an option reads (None: it reads none)."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    if not longs or action.dest in ("help", "version", argparse.SUPPRESS) or action.help == argparse.SUPPRESS:
        return None
    return getattr(action, "env", None) or env_name(longs[0])


def set_env(action: argparse.Action, name: str) -> argparse.Action:
    """Give an option an environment name of its own (one name, one meaning: DEPRECATED_ENV's comment)."""
    action.env = name  # type: ignore[attr-defined]
    return action


def _own_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """A parser and every parser of its subcommands."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser twice
                out += _parsers(sub)
    return out


def chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The parsers a parsed command line went through: the top one, its command's, its action's."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
            out += chosen(action.choices[getattr(args, action.dest)], args)
    return out


def describe_env(parser: argparse.ArgumentParser) -> None:
    """Say in each option's help the environment variable that also sets it."""
    seen: set[int] = set()  # parent parsers share action objects
    for p in _parsers(parser):
        for action in _own_actions(p):
            var = env_of(action)
            if var is None or id(action) in seen:
                continue
            seen.add(id(action))
            action.help = f"{action.help or ''} [env {var}]".strip()


def env_defaults(parsers: list[argparse.ArgumentParser], warn: Callable[[str], None]) -> None:
    """Every long option of the command being run also takes its value from its environment variable (the
    command line wins); a repeatable option takes a comma-separated list. Only the command being run reads
    them: a bad value for one command's option never stops another command, nor any --help."""
    for action in [a for p in parsers for a in _own_actions(p)]:
        var = env_of(action)
        if var is None or action.default == argparse.SUPPRESS:  # SUPPRESS: a second spelling of a top option
            continue
        value = os.environ.get(var)
        if value is None:
            old = next((o for o, new in DEPRECATED_ENV.items() if new == var and o in os.environ), None)
            if old is None:
                continue
            warn(f"{old} is deprecated: set {var} instead (same meaning)")
            var, value = old, os.environ[old]
        if isinstance(action, argparse._StoreTrueAction):
            if value.lower() not in ("1", "true", "yes", "0", "false", "no", ""):
                raise ConfigError(f"{var}={value!r}: expected 1/true/yes or 0/false/no")
            action.default = value.lower() in ("1", "true", "yes")
        elif isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*"):
            action.default = [_env_value(action, var, v.strip()) for v in value.split(",") if v.strip()]
        else:
            action.default = _env_value(action, var, value)


def _env_value(action: argparse.Action, var: str, value: str) -> object:
    """One value from RMQ_HARNESS_<OPTION>, converted and checked as the option's own (argparse checks neither
    the type of a list default nor the choices of any default)."""
    try:
        converted = action.type(value) if action.type else value
    except (TypeError, ValueError, argparse.ArgumentTypeError) as e:
        raise ConfigError(f"{var}={value!r}: {e}; fix or unset it") from None
    if action.choices is not None and converted not in action.choices:
        raise ConfigError(f"{var}={value!r}: expected one of {', '.join(map(str, action.choices))}; fix or unset it")
    return converted


def add_variants_file(parser: argparse.ArgumentParser) -> None:
    """--variants FILE, for every command that reads the variants file: also after the command's name (the top
    parser's --variants, before it, is the same option; this one wins when both are given)."""
    set_env(parser.add_argument("--variants", type=Path, default=argparse.SUPPRESS, metavar="FILE",
                                help="a variants file of your own builds, added to the built-in ones "
                                     "(workloads/variants.yaml; a name in both is yours); a relative path is "
                                     "taken from its folder when there"), VARIANTS_FILE_ENV)


def add_keep_brokers(parser: argparse.ArgumentParser) -> None:
    """A campaign's runs on the brokers of the run before, where they start alike (harness.run.kept)."""
    parser.add_argument("--keep-brokers", action="store_true",
                        help="run each scenario on the brokers of the one before when every variant starts alike "
                             "(same build, settings, topology; not after faults, actions, plants, observations or "
                             "--probe), instead of starting them again (30-50 s a run); the log and each manifest "
                             "say where brokers were kept")


def add_out_file(parser: argparse.ArgumentParser, default: str) -> None:
    """--out for a command that writes one file (a folder elsewhere: its own environment name)."""
    set_env(parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                                help=f"the result, one JSON file (default: {default})"), OUT_FILE_ENV)


def adopt(target: argparse.ArgumentParser, source: argparse.ArgumentParser, leave: tuple[str, ...] = ()) -> None:
    """Give ``target`` every option of ``source`` (a Spark job's own parser) but help and ``leave``."""
    for action in source._actions:
        if action.dest not in ("help", *leave):
            target._add_action(action)


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """--format: tables for people, or the same results as rows for programs on stdout (progress on stderr)."""
    parser.add_argument("--format", choices=FORMATS, default=TABLE,
                        help="how the results print: table, for people; tsv (a header line, a line a variant or "
                             "comparison, a blank line after each block) or json (one document a line), for programs: "
                             "only they go to stdout, progress goes to stderr")


def run_id(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value):
        raise argparse.ArgumentTypeError(f"{value!r}: a run id is letters, digits, '.', '_' and '-' (at most 63)")
    return value


def run_options() -> argparse.ArgumentParser:
    """The options of one run, wherever it runs (`run`, `k8s run`)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                   help="variant to run against (repeatable; default: unpatched)")
    p.add_argument("--scenario", default="burst", help="scenario file, or a name in workloads/scenarios/")
    p.add_argument("--protocol", choices=PROTOCOLS, default=None,
                   help="run the scenario's form over this protocol (NAME-PROTOCOL; default: its own)")
    p.add_argument("--duration", type=float, default=None, help="override the scenario's duration_s")
    p.add_argument("--fault", action="append", dest="faults", metavar="ACTION:TARGET@AT_S[+DURATION_S]",
                   help="inject this fault instead of the scenario's own (repeatable; e.g. kill9:broker@30+10, "
                        "sigstop:proxy@30+10, restart:namesrv@30); the scenario is named after its faults")
    p.add_argument("--runs-dir", type=dir_or_uri, default=Path("runs"),
                   help="where run archives go: a directory or s3://bucket/prefix (default: runs/)")
    p.add_argument("--compare", action="store_true",
                   help="afterwards compare the second variant (candidate) against the first (baseline)")
    add_gate_option(p, "the comparison afterwards finds a regression (implies --compare)")
    add_run_options(p)
    p.add_argument("--run-id", type=run_id, default=None, help=argparse.SUPPRESS)
    add_variants_file(p)
    return p


def scenario_of(args: argparse.Namespace) -> Scenario:
    """The scenario the options name, with --protocol, --fault and --duration applied."""
    from harness.inputs.catalogue import load_scenario, on_protocol, with_faults
    from harness.inputs.scenario import parse_scenario

    scenario = load_scenario(args.scenario)
    if getattr(args, "protocol", None):
        scenario = on_protocol(scenario, args.protocol)
    # The faults first: a shorter --duration is checked against the faults that will run.
    if getattr(args, "faults", None):
        scenario = with_faults(scenario, [parse_fault(f) for f in args.faults])
    if getattr(args, "duration", None) is not None:
        data = {**scenario.model_dump(), "duration_s": args.duration}
        if scenario.cycles.at_least:  # a longer run keeps its cycle count: the cap moves with it
            data["cycles"] = {**data["cycles"], "cap_s": max(scenario.cycles.cap_s or 0.0, args.duration)}
        scenario = parse_scenario(data, f"{scenario.source} (--duration {args.duration:g})")
    return scenario


_FAULT_SPEC = re.compile(r"^(?P<action>[a-z0-9]+):(?P<target>[a-z-]+)@(?P<at>[0-9.]+)(\+(?P<duration>[0-9.]+))?$")


def parse_fault(spec: str) -> Fault:
    """``ACTION:TARGET@AT_S[+DURATION_S]`` (e.g. kill9:broker@30+10) -> a Fault; ConfigError naming what is wrong."""
    m = _FAULT_SPEC.match(spec)
    if not m:
        raise ConfigError(f"--fault {spec!r}: expected ACTION:TARGET@AT_S[+DURATION_S], e.g. kill9:broker@30+10 "
                          f"(actions: {', '.join(FAULT_ACTIONS)}; targets: {', '.join(FAULT_TARGETS)})")
    data = {"action": m["action"], "target": m["target"], "at_s": m["at"]}
    if m["duration"] is not None:
        data["duration_s"] = m["duration"]
    try:
        return Fault.model_validate(data)
    except ValidationError as e:
        raise ConfigError(invalid_message(e, f"--fault {spec}")) from None


def refuse_existing(out: Path | None, what: str = "reports") -> None:
    if out is not None and out.exists():
        raise ConfigError(f"{out} already exists; {what} are never overwritten (choose another --out)")
