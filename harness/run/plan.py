"""A run before anything starts: the checks every command that runs one shares (`run`, the campaigns before their
first run), the variants as the run starts them, the order they come up in, the run's id.
"""

from __future__ import annotations

import datetime as dt
import random
import secrets
from collections.abc import Callable, Sequence

from harness.contracts.options import GIVEN, ORDERS, RANDOM, RunOptions
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.core.errors import ConfigError, NotApplicable
from harness.deploy.agents import pop_fault_options, with_plants, with_probe
from harness.inputs import needs
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant


def new_run_id(scenario: str) -> str:
    """Time, scenario, 4 random hex digits; at most 63 characters (it is a Kubernetes label value too)."""
    now = dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%d-%H%M%S}-{scenario[:40].rstrip('-')}-{secrets.token_hex(2)}"


def refuse_on_external(v: Variant, scenario: Scenario, probe: bool) -> None:
    """What a run cannot do to a cluster it does not own, said before anything starts."""
    where = f"variant {v.name} ({v.source}) is an external cluster"
    if scenario.faults:
        raise ConfigError(f"scenario {scenario.name} injects {scenario.faults[0].label}; {where} whose processes the "
                          "harness does not own: leave it out or pick a scenario without faults")
    wide = [a for a in scenario.actions if a.do == "broker_config"]
    if wide:
        raise ConfigError(f"scenario {scenario.name} changes its brokers' settings during the load ({wide[0].label}); "
                          f"{where} whose brokers serve others too: leave it out or pick a scenario without it")
    if probe:
        raise ConfigError(f"--probe mounts the wakeup-probe agent on every variant; {where}: run without --probe "
                          "or leave it out")
    if scenario.plant:
        raise ConfigError(f"scenario {scenario.name} plants failures in the brokers' code (plant:); {where} whose "
                          "brokers the harness does not start: leave it out")
    if scenario.proxy:
        keys = ", ".join(sorted(scenario.proxy))
        raise ConfigError(f"scenario {scenario.name} needs proxy settings ({keys}); {where} whose proxy the harness "
                          "neither reads nor sets: leave it out")


def options_for(scenario: Scenario, options: RunOptions, log: Callable[[str], None] = print) -> RunOptions:
    """The options as this scenario runs: a scenario that needs one gRPC client (its grpc_client) drives it in
    place of the default, and says so (the manifest records the client)."""
    need = scenario.grpc_client
    if need is None or options.grpc_client == need:
        return options
    if options.grpc_client != DEFAULT_GRPC_CLIENT:
        raise ConfigError(f"--grpc-client {options.grpc_client} with scenario {scenario.name}, which needs the {need} "
                          f"gRPC client ({scenario.source}: grpc_client): drop --grpc-client")
    log(f"gRPC client: {need}, which scenario {scenario.name} needs (its grpc_client)")
    return options.model_copy(update={"grpc_client": need})


def check(variants: Sequence[Variant], scenario: Scenario, options: RunOptions, applicable: bool = True) -> None:
    """Whether these variants can run this scenario with these options, before anything starts: a ConfigError
    says what is wrong, a NotApplicable (``applicable``) which build the scenario cannot ask."""
    if options.grpc_client != DEFAULT_GRPC_CLIENT and scenario.protocol != "grpc":
        raise ConfigError(f"--grpc-client {options.grpc_client} with scenario {scenario.name} over "
                          f"{scenario.protocol}: the gRPC client drives gRPC scenarios only; drop it or run a gRPC "
                          "form")
    # The scenario decides retry-topic naming and the observer effect for every variant it runs against;
    # a variant that says otherwise would silently run something else.
    for v in variants:
        refuse_clash(v, scenario)
        if v.is_external:  # a cluster the harness does not own: its live settings are checked instead
            refuse_on_external(v, scenario, options.probe)
        why = needs.not_applicable(scenario, v.version) if applicable else None
        if why:
            raise NotApplicable(v.name, f"variant {v.name}: {why}")


def refuse_clash(v: Variant, scenario: Scenario) -> None:
    """ConfigError when the variant sets a broker or proxy setting the scenario decides otherwise."""
    clash = needs.conflicts(scenario, v.broker, v.proxy)
    if clash:
        raise ConfigError(f"variant {v.name} ({v.source}) sets {'; '.join(clash)} against scenario "
                          f"{scenario.name} ({scenario.source}); remove it from the variant or pick another "
                          "scenario")


def with_scenario_settings(v: Variant, scenario: Scenario) -> Variant:
    """The variant with the scenario's broker and proxy settings, as a run starts it (an external cluster as it is)."""
    return v if v.is_external else v.model_copy(update={
        "broker": {**v.broker, **needs.broker_overrides(scenario)}, "proxy": {**v.proxy, **scenario.proxy}})


def as_run(variants: Sequence[Variant], scenario: Scenario, options: RunOptions) -> list[Variant]:
    """The variants as the run starts them: the scenario's broker and proxy settings, the failures it plants and
    the probe applied (an external cluster as it is)."""
    out = [with_scenario_settings(v, scenario) for v in variants]
    if scenario.plant:
        planted = pop_fault_options(scenario.plant)
        out = [with_plants(v, planted) for v in out]
    if options.probe:
        out = [with_probe(v) for v in out]
    return out


def variant_order(variants: Sequence[Variant], how: str, seed: int | None = None) -> dict:
    """{"names": the order the run brings the variants up in, "how": random or given, "seed"}."""
    names = [v.name for v in variants]
    if how == GIVEN:
        return {"names": names, "how": GIVEN, "seed": None}
    if how != RANDOM:
        raise ConfigError(f"variant order {how!r}: one of {', '.join(ORDERS)}")
    seed = secrets.randbits(32) if seed is None else seed
    random.Random(seed).shuffle(names)
    return {"names": names, "how": RANDOM, "seed": seed}
