"""What the command line means, shared by every command: the parser class, RMQ_HARNESS_<OPTION> for every
option, the options several commands take, and the scenario those options name."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from harness.contracts.verdict import add_gate_option
from harness.core.errors import ConfigError
from harness.core.storage import dir_or_uri
from harness.inputs.scenario import PROTOCOLS, Scenario
from harness.inputs.variants import ORDERS, RANDOM

ENV_PREFIX = "RMQ_HARNESS_"


class Parser(argparse.ArgumentParser):
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


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of a parser and its subcommands, each once (parent parsers share action objects)."""
    out: dict[int, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.update((id(a), a) for a in _actions(sub))
        else:
            out[id(action)] = action
    return list(out.values())


def env_defaults(parser: argparse.ArgumentParser) -> None:
    """Every long option of every command also takes its value from RMQ_HARNESS_<OPTION> (the command
    line wins); a repeatable option takes a comma-separated list. Said in each option's help."""
    for action in _actions(parser):
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in ("help", "version") or action.help == argparse.SUPPRESS:
            continue
        var = env_name(longs[0])
        action.help = f"{action.help or ''} [env {var}]".strip()
        value = os.environ.get(var)
        if value is None:
            continue
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
        raise ConfigError(f"{var}={value!r}: {e}") from None
    if action.choices is not None and converted not in action.choices:
        raise ConfigError(f"{var}={value!r}: expected one of {', '.join(map(str, action.choices))}")
    return converted


def adopt(target: argparse.ArgumentParser, source: argparse.ArgumentParser, leave: tuple[str, ...] = ()) -> None:
    """Give ``target`` every option of ``source`` (a Spark job's own parser) but help and ``leave``."""
    for action in source._actions:
        if action.dest not in ("help", *leave):
            target._add_action(action)


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
    p.add_argument("--probe", action="store_true",
                   help="mount the pop-wakeup-probe agent on every variant and archive its counters")
    p.add_argument("--compare", action="store_true",
                   help="afterwards compare the second variant (candidate) against the first (baseline)")
    add_gate_option(p, "the comparison afterwards finds a regression (implies --compare)")
    p.add_argument("--order", choices=ORDERS, default=RANDOM,
                   help="the order the variants come up in and take their slots: random (default; recorded in "
                        "the manifest) or as given")
    p.add_argument("--ui", action="store_true",
                   help="serve Locust's web UI per variant while the run goes: on 127.0.0.1 here, through the "
                        "release's load-test Service with `k8s run` (addresses printed when the load starts; the "
                        "run starts and ends by itself as without it)")
    p.add_argument("--keep-resources", action="store_true",
                   help="leave the run's topics and groups on external clusters (variants with endpoints:); they "
                        "are removed after the run by default")
    p.add_argument("--run-id", type=run_id, default=None, help=argparse.SUPPRESS)
    return p


def scenario_of(args: argparse.Namespace) -> Scenario:
    """The scenario the options name, with --protocol, --fault and --duration applied."""
    from harness.inputs.scenario import load_scenario, on_protocol, parse_fault, parse_scenario, with_faults

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


def refuse_existing(out: Path | None, what: str = "reports") -> None:
    if out is not None and out.exists():
        raise ConfigError(f"{out} already exists; {what} are never overwritten (choose another --out)")
